package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func writeFile(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o644)
}

// walkFiles calls fn with the path, and the path relative to root (with
// slashes), of every file under root whose name ends in suffix. It skips
// the directories testdata and vendor, hidden ones and those starting with
// "_", and those skip names (given its relative path and name; skip may be
// nil).
func walkFiles(root, suffix string, skip func(rel, name string) bool, fn func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") ||
				strings.HasPrefix(name, "_") || skip != nil && skip(rel, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, suffix) {
			return nil
		}
		return fn(path, rel)
	})
}

// walkGoFiles calls fn with every non-test .go file under root (as
// walkFiles walks), parsed with mode (SkipObjectResolution added) into
// fset.
func walkGoFiles(root string, mode parser.Mode, skip func(rel, name string) bool, fn func(rel string, fset *token.FileSet, f *ast.File) error) error {
	fset := token.NewFileSet()
	return walkFiles(root, ".go", skip, func(path, rel string) error {
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, mode|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		return fn(rel, fset, f)
	})
}
