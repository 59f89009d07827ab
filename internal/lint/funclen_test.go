package lint

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuncLines is the longest a function may be, from its func line to its
// closing brace, in every non-test Go file outside internal/demo/.
const maxFuncLines = 80

// pendingLong are functions known to be longer than maxFuncLines whose
// files another change is rewriting; each entry must still be too long
// (delete it once the function is split) and may not grow.
var pendingLong = map[string]int{}

// repoRoot is the module's root, two levels above this package.
const repoRoot = "../.."

// TestNoLongFunctions fails naming every function (or method) of a non-test
// .go file outside internal/demo/ longer than maxFuncLines.
func TestNoLongFunctions(t *testing.T) {
	t.Parallel()
	long, err := longFunctions(repoRoot, maxFuncLines)
	require.NoError(t, err)
	var bad []string
	for key, n := range long {
		if allowed, ok := pendingLong[key]; ok && n <= allowed {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s is %d lines (max %d): split it", key, n, maxFuncLines))
	}
	for key := range pendingLong {
		if _, ok := long[key]; !ok {
			bad = append(bad, fmt.Sprintf("%s is no longer over %d lines: delete it from pendingLong", key, maxFuncLines))
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad)
}

// TestLongFunctionsFound: the walk sees a long function and counts from
// the func line to the closing brace (a check that finds nothing proves
// nothing).
func TestLongFunctionsFound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := strings.Repeat("\t_ = 1\n", 79)
	src := "package x\n\n// f is long.\nfunc f() {\n" + body + "}\n\nfunc g() {\n" + body[len("\t_ = 1\n"):] + "}\n"
	require.NoError(t, writeFile(filepath.Join(dir, "x.go"), src))
	require.NoError(t, writeFile(filepath.Join(dir, "x_test.go"), "package x\n\nfunc h() {\n"+body+body+"}\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "internal", "demo", "d.go"), "package demo\n\nfunc h() {\n"+body+body+"}\n"))
	long, err := longFunctions(dir, maxFuncLines)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"x.go:f": 81}, long)
}

// longFunctions maps "path:Func" (path relative to root; methods as
// "path:Type.Method") to its length in lines for every function longer
// than max in the non-test .go files under root, skipping internal/demo/, testdata
// and hidden directories.
func longFunctions(root string, max int) (map[string]int, error) {
	out := map[string]int{}
	skip := func(rel, _ string) bool { return rel == "internal/demo" }
	err := walkGoFiles(root, 0, skip, func(rel string, fset *token.FileSet, f *ast.File) error {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Type.Func).Line + 1
			if n > max {
				out[rel+":"+funcName(fd)] = n
			}
		}
		return nil
	})
	return out, err
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if ix, ok := typ.(*ast.IndexListExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
