package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// publicHeading is the heading of library.md's section whose first table
// lists the public packages.
const publicHeading = "## The public packages"

// publicPackages returns the module's library: its packages outside
// internal/ and cmd/ that hold code (codePackages: test-only packages such
// as bench, e2e and docs are not the library), sorted.
func publicPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	for rel := range codePackages(t) {
		if rel != "." && !strings.HasPrefix(rel, "internal/") && !strings.HasPrefix(rel, "cmd/") {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// TestLibraryPackages: docs/library.md's table of public packages names
// exactly the module's importable packages, each one with example files
// (example*_test.go) that the table links; DESIGN.md's package map marks
// the same packages **public**.
func TestLibraryPackages(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("library.md")
	require.NoError(t, err)
	library := string(b)
	var documented []string
	links := map[string]string{}
	for _, row := range firstTable(t, library, publicHeading) {
		names := codeSpans(row[0])
		require.Len(t, names, 1, "a row of library.md's public packages names one package: %q", row)
		documented = append(documented, names[0])
		links[names[0]] = strings.Join(row[1:], "|")
	}
	slices.Sort(documented)
	public := publicPackages(t)
	require.Equal(t, public, documented, "library.md's public packages are not the module's importable ones")

	for _, pkg := range public {
		files, err := filepath.Glob(filepath.Join("..", pkg, "example*_test.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "public package %s has no example*_test.go", pkg)
		for _, f := range files {
			require.Contains(t, links[pkg], "](../"+pkg+"/"+filepath.Base(f)+")",
				"library.md's row of %s does not link %s", pkg, f)
		}
	}

	var marked []string
	for _, row := range firstTable(t, readDesign(t), mapHeading) {
		if strings.Contains(row[1], "**public**") {
			marked = append(marked, codeSpans(row[0])...)
		}
	}
	slices.Sort(marked)
	require.Equal(t, public, marked, "DESIGN.md's package map marks other packages **public**")
}
