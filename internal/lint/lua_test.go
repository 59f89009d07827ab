package lint

import (
	"bufio"
	"fmt"
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

// scriptBuilders are the files that may call NewScript: redisx's Scripts
// (every package's embedded .lua files) and internal/record's builders,
// which render the record's own embedded files with its schema, and
// internal/broker's copies of asynq's scripts (embedded lua/asynq/ files
// sent byte for byte, unrendered, so that their SHA-1 is asynq's).
var scriptBuilders = map[string]bool{
	"internal/redisx/luafile.go":      true,
	"internal/record/prelude.go":      true,
	"internal/broker/asynq.go":        true,
	"internal/broker/asynq_server.go": true,
}

// TestNoInlineScripts: no non-test Go file builds a script itself (a call
// of a function or method named NewScript, redis.NewScript included)
// outside redisx's Scripts and internal/record's builders: every script is
// an embedded .lua file, never a Go string.
func TestNoInlineScripts(t *testing.T) {
	t.Parallel()
	calls, err := newScriptCalls(repoRoot)
	require.NoError(t, err)
	require.Contains(t, calls, "internal/redisx/luafile.go", "the walk missed redisx's own NewScript: it is broken")
	var bad []string
	for file, lines := range calls {
		if scriptBuilders[file] {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s:%v builds a script from a Go string: put it in an embedded .lua file built with redisx.NewScripts", file, lines))
	}
	sort.Strings(bad)
	require.Empty(t, bad)
}

// TestInlineScriptFound: the walk finds a planted inline script, by
// package function or by method, and skips test files and testdata.
func TestInlineScriptFound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "x", "x.go"), "package x\n\nimport \"github.com/redis/go-redis/v9\"\n\n"+
		"var s = redis.NewScript(`return 1`)\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "y", "y.go"), "package y\n\ntype b struct{}\n\nfunc (b) NewScript(string) int { return 0 }\n\n"+
		"var n = b{}.NewScript(\"return 1\")\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "x", "x_test.go"), "package x\n\nvar t = redis.NewScript(`return 2`)\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "z", "testdata", "z.go"), "package z\n\nvar t = redis.NewScript(`return 3`)\n"))
	calls, err := newScriptCalls(dir)
	require.NoError(t, err)
	require.Equal(t, map[string][]int{"x/x.go": {5}, "y/y.go": {7}}, calls)
}

// newScriptCalls maps each non-test .go file under root (outside testdata,
// vendor and hidden directories) that calls something named NewScript to
// the lines of the calls.
func newScriptCalls(root string) (map[string][]int, error) {
	out := map[string][]int{}
	err := walkGoFiles(root, 0, nil, func(rel string, fset *token.FileSet, f *ast.File) error {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := ""
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.Ident:
				name = fn.Name
			}
			if name == "NewScript" {
				out[rel] = append(out[rel], fset.Position(call.Pos()).Line)
			}
			return true
		})
		return nil
	})
	return out, err
}

// TestScriptsDocumented: every .lua file of the repository (outside
// testdata, clients and node_modules) starts with a comment block that
// names its KEYS when it reads KEYS[, its ARGV when it reads ARGV[, and
// what it returns (a line matching /return/i) when it returns.
func TestScriptsDocumented(t *testing.T) {
	t.Parallel()
	problems, n, err := undocumentedScripts(repoRoot)
	require.NoError(t, err)
	require.NotZero(t, n, "the walk found no .lua file: it is broken")
	require.Empty(t, problems)
}

// TestUndocumentedScriptFound: the check names what a file's leading
// comments leave out, reads only the leading block, and skips testdata.
func TestUndocumentedScriptFound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := "-- good sets a key.\n--\n-- KEYS[1] the key.\n-- ARGV[1] its value.\n-- Returns 1.\nredis.call('SET', KEYS[1], ARGV[1])\nreturn 1\n"
	bad := "-- bad sets a key.\nredis.call('SET', KEYS[1], ARGV[1])\n-- KEYS ARGV returns, too late\nreturn 1\n"
	require.NoError(t, writeFile(filepath.Join(dir, "a", "good.lua"), good))
	require.NoError(t, writeFile(filepath.Join(dir, "a", "bad.lua"), bad))
	require.NoError(t, writeFile(filepath.Join(dir, "a", "none.lua"), "local x = 1\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "testdata", "t.lua"), bad))
	require.NoError(t, writeFile(filepath.Join(dir, "clients", "node", "c.lua"), bad))
	problems, n, err := undocumentedScripts(dir)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, []string{
		"a/bad.lua: its leading comments do not name its KEYS",
		"a/bad.lua: its leading comments do not name its ARGV",
		"a/bad.lua: its leading comments do not say what it returns",
	}, problems)
}

var luaReturn = regexp.MustCompile(`\breturn\b`)

// undocumentedScripts checks every .lua file under root (outside testdata,
// clients, node_modules and hidden directories, as walkFiles walks) and returns its problems
// and how many files it read.
func undocumentedScripts(root string) (problems []string, n int, err error) {
	skip := func(_, name string) bool { return name == "clients" || name == "node_modules" }
	err = walkFiles(root, ".lua", skip, func(path, rel string) error {
		n++
		head, body, err := splitLeadingComments(path)
		if err != nil {
			return err
		}
		if strings.Contains(body, "KEYS[") && !strings.Contains(head, "KEYS") {
			problems = append(problems, rel+": its leading comments do not name its KEYS")
		}
		if strings.Contains(body, "ARGV[") && !strings.Contains(head, "ARGV") {
			problems = append(problems, rel+": its leading comments do not name its ARGV")
		}
		if luaReturn.MatchString(body) && !strings.Contains(strings.ToLower(head), "return") {
			problems = append(problems, rel+": its leading comments do not say what it returns")
		}
		return nil
	})
	return problems, n, err
}

// splitLeadingComments returns a Lua file's leading comment block (its
// first lines that are "--" comments or blank) and the code after it with
// its line comments dropped.
func splitLeadingComments(path string) (head, body string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	var h, b strings.Builder
	inHead := true
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if inHead && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			h.WriteString(line + "\n")
			continue
		}
		inHead = false
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return h.String(), b.String(), sc.Err()
}
