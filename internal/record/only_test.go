package record

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readCmds are the go-redis methods that only read a key: the only calls
// outside internal/record that may be given a task record's key.
var readCmds = map[string]bool{
	"HGet": true, "HMGet": true, "HGetAll": true, "HExists": true, "HLen": true, "LRange": true, "LLen": true,
	"LIndex": true, "Exists": true, "TTL": true, "PTTL": true, "Type": true,
}

// TestOnlyRecordWritesTheRecord: outside internal/record, no Go file
// (tests aside) writes a task's record or history: a key built by
// rkeys.Task or rkeys.TaskHistory may only be the direct argument of a read
// command (HGet, HMGet, LRange, …): not of a write, not of a script or a
// pipeline of commands, not kept in a variable; and no Go string or Lua
// file names the record's keys.
func TestOnlyRecordWritesTheRecord(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") || rel == filepath.Join("internal", "record") || rel == filepath.Join("internal", "rkeys") || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".lua") {
			b, err := os.ReadFile(path)
			if err == nil && strings.Contains(string(b), "{task:") {
				bad = append(bad, rel+": a Lua file names a task record key")
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		bad = append(bad, recordWrites(t, path, rel)...)
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad, "only internal/record may write a task's record or history")
}

// recordWrites lists the uses of a task record's keys in one file that are
// not the direct argument of a read command.
func recordWrites(t *testing.T, path, rel string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	require.NoError(t, err, path)
	var bad []string
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		defer func() { stack = append(stack, n) }()
		if lit, ok := n.(*ast.BasicLit); ok && strings.Contains(lit.Value, "{task:") {
			bad = append(bad, rel+":"+fmt.Sprint(fset.Position(lit.Pos()).Line)+": names a task record key")
		}
		call, ok := n.(*ast.CallExpr)
		if !ok || !(isSel(call.Fun, "rkeys", "Task") || isSel(call.Fun, "rkeys", "TaskHistory")) {
			return true
		}
		if parent, ok := stack[len(stack)-1].(*ast.CallExpr); ok {
			if sel, ok := parent.Fun.(*ast.SelectorExpr); ok && readCmds[sel.Sel.Name] {
				return true
			}
		}
		bad = append(bad, rel+":"+fmt.Sprint(fset.Position(call.Pos()).Line)+": a task record key used other than by a read command")
		return true
	})
	return bad
}

// mentionsRecordKey reports whether e builds a task record or history key.
func mentionsRecordKey(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && (isSel(c.Fun, "rkeys", "Task") || isSel(c.Fun, "rkeys", "TaskHistory")) {
			found = true
		}
		return !found
	})
	return found
}

func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}
