package lint

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirectScriptCallsDocumented: every script run straight on a Redis
// client (xScript.Run / .EvalSha / .Eval, not through a redisx.Runner) in
// a non-test file outside internal/redisx and demo/ is named, with the
// reason, in internal/redisx's package doc; and every script the doc names
// as run straight is one.
func TestDirectScriptCallsDocumented(t *testing.T) {
	t.Parallel()
	direct, err := directScriptCalls(repoRoot)
	require.NoError(t, err)
	require.NotEmpty(t, direct, "the walk found no direct script call: it is broken")
	doc, err := os.ReadFile(filepath.Join(repoRoot, "internal", "redisx", "doc.go"))
	require.NoError(t, err)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b([a-z][A-Za-z]*Script)\b`).FindAllStringSubmatch(string(doc), -1) {
		named[m[1]] = true
	}
	var missing, stale []string
	for name, where := range direct {
		if !named[name] {
			missing = append(missing, name+" ("+strings.Join(where, ", ")+")")
		}
	}
	for name := range named {
		if _, ok := direct[name]; !ok {
			stale = append(stale, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	require.Empty(t, missing, "scripts run straight on a client that internal/redisx/doc.go does not name")
	require.Empty(t, stale, "scripts internal/redisx/doc.go names as run straight on a client that no code runs so")
}

// directScriptCalls maps each package-level script variable (a name ending
// in Script) whose Run, EvalSha or Eval method is called, to the files
// calling it.
func directScriptCalls(root string) (map[string][]string, error) {
	out := map[string][]string{}
	skip := func(rel, _ string) bool { return rel == "internal/demo" || rel == "internal/redisx" }
	err := walkGoFiles(root, 0, skip, func(rel string, _ *token.FileSet, f *ast.File) error {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Run" && sel.Sel.Name != "EvalSha" && sel.Sel.Name != "Eval") {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Script") && id.Name != "Script" {
				if !contains(out[id.Name], rel) {
					out[id.Name] = append(out[id.Name], rel)
				}
			}
			return true
		})
		return nil
	})
	return out, err
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
