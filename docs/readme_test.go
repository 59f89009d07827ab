package docs

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeRenders: the README starts with its title and closes every
// code fence it opens (an open fence renders the rest of the page as
// code: the quick start's fence was never closed).
func TestReadmeRenders(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	s := string(b)
	require.True(t, strings.HasPrefix(s, "# "), "README.md starts with its title, not %q", s[:min(len(s), 20)])
	open := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			open = !open
		}
	}
	require.False(t, open, "README.md leaves a code fence open")
}
