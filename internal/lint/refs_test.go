package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommentsNameRealPackages: every internal/NAME a comment of a non-test
// Go file points at is a package of this module (worker/worker.go once
// pointed at an internal/rbatch that never existed).
func TestCommentsNameRealPackages(t *testing.T) {
	t.Parallel()
	ref := regexp.MustCompile(`\binternal/([a-z][a-z0-9]*)\b`)
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			for _, m := range ref.FindAllStringSubmatch(cg.Text(), -1) {
				// asynq's own internal packages (internal/base, internal/rdb, …)
				// are named as asynq's.
				if _, err := os.Stat(filepath.Join(repoRoot, "internal", m[1])); err != nil && !asynqInternal[m[1]] {
					bad = append(bad, rel+": internal/"+m[1])
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(bad)
	require.Empty(t, bad, "comments pointing at packages that do not exist")
}

// asynqInternal are the internal packages of asynq that comments name.
var asynqInternal = map[string]bool{"base": true, "rdb": true, "proto": true}
