package docs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// markdownFiles returns every Markdown file users read: README.md,
// docs/*.md and clients/*/README.md, as paths from this directory.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	clients, err := filepath.Glob("../clients/*/README.md")
	require.NoError(t, err)
	require.NotEmpty(t, clients, "the clients' READMEs")
	return append(pages(t), clients...)
}

// fence is an opening code fence: its character (` or ~), how many, and
// its line.
type fence struct {
	char byte
	n    int
	line int
}

// fenceOf reports whether line is a code fence (up to three spaces of
// indent, then three or more backticks or tildes), with its run and the
// text after the run.
func fenceOf(line string) (char byte, n int, rest string, ok bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 || len(trimmed) < 3 || (trimmed[0] != '`' && trimmed[0] != '~') {
		return 0, 0, "", false
	}
	char = trimmed[0]
	for n < len(trimmed) && trimmed[n] == char {
		n++
	}
	return char, n, strings.TrimSpace(trimmed[n:]), n >= 3
}

// fenceProblems lists, as "path:line: why", the code fences of text that
// never close (CommonMark: a closing fence is the opening's character, at
// least as long, with nothing after it), and every fence with an info
// string ("```sh") met inside an open block: it cannot close the block, so
// the block above it was left open.
func fenceProblems(path, text string) []string {
	var problems []string
	var open *fence
	for i, line := range strings.Split(text, "\n") {
		char, n, rest, ok := fenceOf(line)
		switch {
		case !ok:
		case open == nil:
			open = &fence{char: char, n: n, line: i + 1}
		case char == open.char && n >= open.n && rest == "":
			open = nil
		case rest != "":
			problems = append(problems, path+":"+strconv.Itoa(i+1)+": a fence opens inside the code block of line "+strconv.Itoa(open.line)+" (is that block closed?)")
		}
	}
	if open != nil {
		problems = append(problems, path+":"+strconv.Itoa(open.line)+": this code fence is never closed (the rest of the page renders as code)")
	}
	return problems
}

// TestMarkdownFencesClose: every Markdown file closes each code fence it
// opens (the README's quick start once did not, and the rest of the page
// rendered as code).
func TestMarkdownFencesClose(t *testing.T) {
	t.Parallel()
	var problems []string
	for _, p := range markdownFiles(t) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		problems = append(problems, fenceProblems(p, string(data))...)
	}
	require.Empty(t, problems, "code fences")
}

// TestFenceCheckerFindsOpenFences: the checker tells closed fences from a
// fence left open, an info string that cannot close a block, and a longer
// or tilde fence from a shorter one.
func TestFenceCheckerFindsOpenFences(t *testing.T) {
	t.Parallel()
	require.Empty(t, fenceProblems("ok.md", "# ok\n```sh\nls\n```\n\n  ~~~\n```\n~~~\n````\n```\n````\n"))
	require.Equal(t, []string{"open.md:3: this code fence is never closed (the rest of the page renders as code)"},
		fenceProblems("open.md", "# open\n\n```sh\nls\n\nWords that render as code.\n"))
	problems := fenceProblems("quick.md", "```sh\nmake build\n\nWords.\n\n```sh\ncurl\n```\n")
	require.Equal(t, []string{"quick.md:6: a fence opens inside the code block of line 1 (is that block closed?)"}, problems)
	require.Len(t, fenceProblems("short.md", "````\n```\n"), 1, "a shorter fence does not close a longer one")
	require.Len(t, fenceProblems("tilde.md", "~~~\n```\n"), 1, "backticks do not close tildes")
	require.Empty(t, fenceProblems("indent.md", "    ```\nindented code, not a fence\n"))
}
