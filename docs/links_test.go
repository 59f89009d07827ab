// Package docs holds no code: its tests hold the documentation (README.md
// and docs/*.md) to itself. Every relative link must reach an existing file
// and, with a #fragment, an existing heading of it; the README stays short
// and maps every page of docs/.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// maxReadmeLines bounds the README: what agentq is, the two commands, a
// quick start and the map of the docs; the reference lives in docs/.
const maxReadmeLines = 250

// pages returns README.md and every docs/*.md, as paths from this directory.
func pages(t *testing.T) []string {
	t.Helper()
	md, err := filepath.Glob("*.md")
	require.NoError(t, err)
	require.NotEmpty(t, md)
	return append([]string{"../README.md"}, md...)
}

// linkRE matches an inline link or image target: [text](target) or
// [text](target "title").
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// headingRE matches an ATX heading and captures its text.
var headingRE = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*$`)

// prose returns the lines of a markdown file outside fenced code blocks,
// with their 1-based line numbers.
func prose(text string) map[int]string {
	out := map[int]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out[i+1] = line
		}
	}
	return out
}

// slug is GitHub's anchor for a heading's text: lower case, every
// character but letters, digits, '_', '-' and spaces dropped (so `code`
// keeps its text), spaces turned to '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a markdown file's headings, numbering
// repeats as GitHub does (x, x-1, x-2).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	p := prose(text)
	for i := 1; i <= len(strings.Split(text, "\n")); i++ {
		m := headingRE.FindStringSubmatch(p[i])
		if m == nil {
			continue
		}
		s := slug(strings.TrimSpace(m[1]))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// brokenLinks lists the relative links of the file at path (read from
// disk) whose file or heading does not exist, as "path:line: target: why".
func brokenLinks(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var broken []string
	lines := prose(string(data))
	for n := 1; n <= len(strings.Split(string(data), "\n")); n++ {
		line, ok := lines[n]
		if !ok {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			where := path
			if file != "" {
				where = filepath.Join(filepath.Dir(path), file)
			}
			bad := func(why string) { broken = append(broken, path+":"+strconv.Itoa(n)+": "+target+": "+why) }
			info, err := os.Stat(where)
			if err != nil {
				bad("no such file")
				continue
			}
			if frag == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(where, ".md") {
				bad("a #fragment on a file that is not markdown")
				continue
			}
			body, err := os.ReadFile(where)
			require.NoError(t, err)
			if !anchors(string(body))[frag] {
				bad("no such heading")
			}
		}
	}
	return broken
}

// TestDocLinksResolve: every relative link of README.md and docs/*.md names
// an existing file and, with a fragment, an existing heading of it.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	var broken []string
	for _, p := range pages(t) {
		broken = append(broken, brokenLinks(t, p)...)
	}
	require.Empty(t, broken, "broken links")
}

// TestDocLinkCheckerFindsBrokenLinks: the checker itself sees a missing
// file, a missing heading and a good link for what they are.
func TestDocLinkCheckerFindsBrokenLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	page := filepath.Join(dir, "page.md")
	text := "# Page\n\n## Web console (`/ui/`)\n\n## Web console (`/ui/`)\n\n" +
		"[ok](#web-console-ui) [ok2](#web-console-ui-1) [ok3](page.md#page)\n" +
		"[gone](missing.md) [nohead](#no-such-heading)\n" +
		"```\n[in code](nowhere.md)\n# not a heading\n```\n[code-heading](#not-a-heading)\n"
	require.NoError(t, os.WriteFile(page, []byte(text), 0o600))
	broken := brokenLinks(t, page)
	require.Len(t, broken, 3, "%q", broken)
	require.Contains(t, broken[0], "missing.md: no such file")
	require.Contains(t, broken[1], "#no-such-heading: no such heading")
	require.Contains(t, broken[2], "#not-a-heading: no such heading")
}

// TestDocReadmeIsShortAndMapsEveryPage: the README fits in maxReadmeLines
// and links every page of docs/.
func TestDocReadmeIsShortAndMapsEveryPage(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	readme := string(data)
	require.LessOrEqual(t, strings.Count(strings.TrimRight(readme, "\n"), "\n")+1, maxReadmeLines,
		"README.md is the quick start and the map; the reference belongs in docs/")
	md, err := filepath.Glob("*.md")
	require.NoError(t, err)
	for _, p := range md {
		require.Contains(t, readme, "](docs/"+p, "README.md's map does not link docs/%s", p)
	}
}
