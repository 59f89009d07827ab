package docs

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// contentsLinkRE matches a list item's links to headings of the same page:
// "- [Routes](#routes)" and the further "(and [x](#x))" on its line.
var contentsLinkRE = regexp.MustCompile(`\]\(#([^)\s]+)\)`)

// contentsProblems lists, as "path:line: why", every "## " heading of text
// that its contents list does not link. The contents list is the list
// items linking "#…" anchors before the first "## " heading; a page
// without one has nothing to check.
func contentsProblems(path, text string) []string {
	lines := strings.Split(text, "\n")
	p := prose(text)
	listed := map[string]bool{}
	first := len(lines) + 1
	for i := 1; i <= len(lines); i++ {
		line, ok := p[i]
		if !ok {
			continue
		}
		if strings.HasPrefix(line, "## ") {
			first = i
			break
		}
		if item := strings.TrimSpace(line); strings.HasPrefix(item, "- ") || strings.HasPrefix(item, "* ") {
			for _, m := range contentsLinkRE.FindAllStringSubmatch(item, -1) {
				listed[m[1]] = true
			}
		}
	}
	if len(listed) == 0 {
		return nil
	}
	var problems []string
	for i := first; i <= len(lines); i++ {
		line, ok := p[i]
		if !ok || !strings.HasPrefix(line, "## ") {
			continue
		}
		if heading := strings.TrimSpace(strings.TrimPrefix(line, "## ")); !listed[slug(heading)] {
			problems = append(problems, path+":"+strconv.Itoa(i)+": \"## "+heading+"\" is not in the contents list (#"+slug(heading)+")")
		}
	}
	return problems
}

// TestContentsListEveryHeading: a page with a contents list links every
// one of its "## " sections from it (docs/http-api.md's and
// docs/configuration.md's lists once left sections out).
func TestContentsListEveryHeading(t *testing.T) {
	t.Parallel()
	var problems []string
	for _, p := range markdownFiles(t) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		problems = append(problems, contentsProblems(p, string(data))...)
	}
	require.Empty(t, problems, "contents lists")
}

// TestContentsCheckerFindsMissingSections: the checker sees a section the
// list leaves out, ignores headings in code and pages without a list.
func TestContentsCheckerFindsMissingSections(t *testing.T) {
	t.Parallel()
	page := "# Page\n\n- [One](#one)\n- [Two `x`](#two-x) (and [more](#more))\n\n## One\n\n```\n## not a heading\n```\n\n## Two `x`\n\n### More\n\n## Three\n"
	require.Equal(t, []string{`page.md:16: "## Three" is not in the contents list (#three)`}, contentsProblems("page.md", page))
	require.Empty(t, contentsProblems("plain.md", "# Plain\n\nSee [One](#one).\n\n## One\n\n## Two\n"))
}
