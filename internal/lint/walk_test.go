package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The walk of a task (issue #36): a static, depth-first walk of the calls
// from an entry function through the functions and methods of this module
// that the calls name, resolved with go/types (packages of the module are
// type-checked from source, every other package is imported from the
// export data `go list -export` names). Each function is walked once, the
// first time a call reaches it: that is a stop, in the function's file.
// The walk is the sequence of its stops, in the order a reader following
// the calls meets them (depth first, each function's calls in source
// order); a stop in another file than the stop before it, in a file the
// walk has been in before, is a return. Calls through
// an interface or a function value are not followed (they name no
// function statically); a function literal is walked as part of the
// function it is written in.

// walkFigures are a walk's counts.
type walkFigures struct {
	Stops   int // functions reached, the entry included
	Files   int // distinct files of those functions
	Returns int // moves into a file the walk was in before
	// Entered is how many times the walk moved into each file (the first
	// time included).
	Entered map[string]int
	// Crossings are the returns: "caller (file) -> callee (file)".
	Crossings []string
	// Path is the stops in the walk's order: "file: function".
	Path []string
}

// moduleSource is the module's packages that pattern depends on (itself
// included), type-checked from source.
type moduleSource struct {
	fset  *token.FileSet
	decls map[*types.Func]*ast.FuncDecl
	infos map[*ast.FuncDecl]*types.Info
	pkgs  map[string]*types.Package
	root  string
}

// listedPackage is the part of `go list -json` the walk reads.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Module     *struct{ Path string }
	Standard   bool
}

// loadModule lists pattern's dependencies (in dependency order) from the
// module at root and type-checks the module's own packages from source.
func loadModule(root, pattern string) (*moduleSource, error) {
	cmd := exec.Command("go", "list", "-deps", "-export", "-json", pattern)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	modPath, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	var own []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == modPath {
			own = append(own, p)
		}
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	m := &moduleSource{fset: token.NewFileSet(), decls: map[*types.Func]*ast.FuncDecl{},
		infos: map[*ast.FuncDecl]*types.Info{}, pkgs: map[string]*types.Package{}, root: absRoot}
	gc := importer.ForCompiler(m.fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	imp := importerFunc(func(path string) (*types.Package, error) {
		if p, ok := m.pkgs[path]; ok {
			return p, nil
		}
		return gc.Import(path)
	})
	for _, p := range own {
		if err := m.check(p, imp); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// check type-checks one package of the module and indexes its functions.
func (m *moduleSource) check(p listedPackage, imp types.Importer) error {
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(m.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check(p.ImportPath, m.fset, files, info)
	if err != nil {
		return fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	m.pkgs[p.ImportPath] = pkg
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := info.Defs[fd.Name].(*types.Func); ok {
					m.decls[fn] = fd
					m.infos[fd] = info
				}
			}
		}
	}
	return nil
}

// modulePath is the module path in root's go.mod.
func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", errors.New("go.mod names no module")
}

// lookup finds a function by package path and name ("F" or "T.M").
func (m *moduleSource) lookup(pkgPath, name string) (*types.Func, error) {
	pkg, ok := m.pkgs[pkgPath]
	if !ok {
		return nil, fmt.Errorf("package %s not loaded", pkgPath)
	}
	typ, fn, isMethod := strings.Cut(name, ".")
	if !isMethod {
		if f, ok := pkg.Scope().Lookup(name).(*types.Func); ok {
			return f, nil
		}
		return nil, fmt.Errorf("no func %s in %s", name, pkgPath)
	}
	tn, ok := pkg.Scope().Lookup(typ).(*types.TypeName)
	if !ok {
		return nil, fmt.Errorf("no type %s in %s", typ, pkgPath)
	}
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(tn.Type()), true, pkg, fn)
	if f, ok := obj.(*types.Func); ok {
		return f, nil
	}
	return nil, fmt.Errorf("no method %s on %s in %s", fn, typ, pkgPath)
}

// file is fn's file, relative to the module's root.
func (m *moduleSource) file(fd *ast.FuncDecl) string {
	name := m.fset.Position(fd.Pos()).Filename
	if rel, err := filepath.Rel(m.root, name); err == nil {
		return filepath.ToSlash(rel)
	}
	return name
}

// callees are the module's functions fd's calls name, in source order.
func (m *moduleSource) callees(fd *ast.FuncDecl) []*ast.FuncDecl {
	info := m.infos[fd]
	var out []*ast.FuncDecl
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if id := calleeIdent(call.Fun); id != nil {
			if fn, ok := info.Uses[id].(*types.Func); ok {
				if d, ok := m.decls[fn.Origin()]; ok {
					out = append(out, d)
				}
			}
		}
		return true
	})
	return out
}

// calleeIdent is the name a call's function expression ends with.
func calleeIdent(e ast.Expr) *ast.Ident {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return calleeIdent(x.X)
	case *ast.Ident:
		return x
	case *ast.SelectorExpr:
		return x.Sel
	case *ast.IndexExpr:
		return calleeIdent(x.X)
	case *ast.IndexListExpr:
		return calleeIdent(x.X)
	}
	return nil
}

// walk walks from entry; within, when not empty, keeps the walk to the
// files under that directory of the module (calls out of it are neither
// stops nor followed).
func (m *moduleSource) walk(entry *types.Func, within string) walkFigures {
	w := &walker{m: m, within: within, seen: map[*ast.FuncDecl]bool{}, been: map[string]bool{},
		fig: walkFigures{Entered: map[string]int{}}}
	root := m.decls[entry]
	w.seen[root] = true
	w.fig.Stops = 1
	w.fig.Path = append(w.fig.Path, filepath.Base(m.file(root))+": "+root.Name.Name)
	w.moveTo(m.file(root))
	w.visit(root)
	w.fig.Files = len(w.been)
	return w.fig
}

type walker struct {
	m      *moduleSource
	within string
	seen   map[*ast.FuncDecl]bool
	been   map[string]bool
	at     string
	fig    walkFigures
}

func (w *walker) visit(fd *ast.FuncDecl) {
	here := w.m.file(fd)
	for _, c := range w.m.callees(fd) {
		if w.seen[c] || !strings.HasPrefix(w.m.file(c), w.within) {
			continue
		}
		w.seen[c] = true
		w.fig.Stops++
		f := w.m.file(c)
		if f != w.at && w.been[f] {
			w.fig.Crossings = append(w.fig.Crossings, fd.Name.Name+" ("+filepath.Base(here)+") -> "+c.Name.Name+" ("+filepath.Base(f)+")")
		}
		w.fig.Path = append(w.fig.Path, filepath.Base(f)+": "+c.Name.Name)
		w.moveTo(f)
		w.visit(c)
	}
}

// moveTo moves the walk into file, counting a return when it was there
// before.
func (w *walker) moveTo(file string) {
	if file == w.at {
		return
	}
	if w.been[file] {
		w.fig.Returns++
	}
	w.been[file] = true
	w.fig.Entered[file]++
	w.at = file
}

// fileGraph is which files of package pkgPath use something declared in
// another of its files (a type, a function, a method, a field, a constant,
// a variable): from → to → true.
func (m *moduleSource) fileGraph(pkgPath string) map[string]map[string]bool {
	g := map[string]map[string]bool{}
	pkg := m.pkgs[pkgPath]
	seen := map[*types.Info]bool{}
	for _, info := range m.infos {
		if seen[info] {
			continue
		}
		seen[info] = true
		for id, obj := range info.Uses {
			if obj.Pkg() != pkg || !obj.Pos().IsValid() {
				continue
			}
			from, to := m.rel(id.Pos()), m.rel(obj.Pos())
			if from == to || !strings.HasPrefix(from, m.dirOf(pkgPath)) {
				continue
			}
			if g[from] == nil {
				g[from] = map[string]bool{}
			}
			g[from][to] = true
		}
	}
	return g
}

// rel is the file of pos, relative to the module's root.
func (m *moduleSource) rel(pos token.Pos) string {
	name := m.fset.Position(pos).Filename
	if r, err := filepath.Rel(m.root, name); err == nil {
		return filepath.ToSlash(r)
	}
	return name
}

// dirOf is pkgPath's directory relative to the module's root, with a
// trailing slash.
func (m *moduleSource) dirOf(pkgPath string) string {
	for fn, fd := range m.decls {
		if fn.Pkg() != nil && fn.Pkg().Path() == pkgPath {
			return filepath.ToSlash(filepath.Dir(m.file(fd))) + "/"
		}
	}
	return pkgPath + "/"
}

// cycles are the strongly connected components of g with more than one
// file (Tarjan's algorithm), each sorted, in sorted order.
func cycles(g map[string]map[string]bool) [][]string {
	index, low, on := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var out [][]string
	var nodes []string
	for n := range g {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		on[v] = true
		for _, w := range sortedKeys(g[v]) {
			if _, ok := index[w]; !ok {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			on[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		if len(comp) > 1 {
			sort.Strings(comp)
			out = append(out, comp)
		}
	}
	for _, n := range nodes {
		if _, ok := index[n]; !ok {
			strong(n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
