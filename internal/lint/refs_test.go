package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommentsNameRealPackages: every internal/NAME a comment of a non-test
// Go file points at is a package of this module (worker/worker.go once
// pointed at an internal/rbatch that never existed).
func TestCommentsNameRealPackages(t *testing.T) {
	t.Parallel()
	ref := regexp.MustCompile(`\binternal/([a-z][a-z0-9]*)\b`)
	var bad []string
	err := walkGoFiles(repoRoot, parser.ParseComments, nil, func(rel string, _ *token.FileSet, f *ast.File) error {
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
