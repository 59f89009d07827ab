package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// modulePath is the module's import path; the map names packages relative
// to it.
const modulePath = "github.com/agentq/agentq"

// goPackage is what `go list -json` says of one package of the module.
type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// rel is the package's path relative to the module ("." for its root).
func (p goPackage) rel() string {
	if p.ImportPath == modulePath {
		return "."
	}
	return strings.TrimPrefix(p.ImportPath, modulePath+"/")
}

// listPackages runs `go list -json ./...` at the module's root once for
// every test of the package.
var listPackages = sync.OnceValues(func() ([]goPackage, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New("go list: " + err.Error() + ": " + stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
})

// codePackages returns the module's packages that hold code, by path
// relative to the module. A test-only package is left out: one with no
// non-test Go file (docs, e2e, deploy) or whose non-test files declare
// nothing (bench and internal/lint: a doc.go and their tests).
func codePackages(t *testing.T) map[string]goPackage {
	t.Helper()
	pkgs, err := listPackages()
	require.NoError(t, err)
	out := map[string]goPackage{}
	for _, p := range pkgs {
		if declares(t, p) {
			out[p.rel()] = p
		}
	}
	return out
}

// declares reports whether any non-test Go file of p declares something
// (an import, a type, a func, a var or a const).
func declares(t *testing.T, p goPackage) bool {
	t.Helper()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		if len(f.Decls) > 0 {
			return true
		}
	}
	return false
}

// mapHeading is the heading of docs/DESIGN.md's section whose first table
// is the package map.
const mapHeading = "### Architecture (package map and import direction)"

// backtickRE matches a `code span`.
var backtickRE = regexp.MustCompile("`([^`]+)`")

// firstTable reads the first table after heading (a whole line of text)
// and returns its rows after the header, each row's cells.
func firstTable(t *testing.T, text, heading string) [][]string {
	t.Helper()
	_, section, ok := strings.Cut(text, "\n"+heading+"\n")
	require.True(t, ok, "no %q section", heading)
	var rows [][]string
	header := 0
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 || strings.HasPrefix(line, "#") {
				break
			}
			continue
		}
		if header++; header <= 2 { // the header and its |---| line
			continue
		}
		rows = append(rows, strings.Split(strings.Trim(line, "|"), "|"))
	}
	require.NotEmpty(t, rows, "the %q section has no table", heading)
	return rows
}

// codeSpans returns the `code spans` of a table cell, a trailing slash
// dropped.
func codeSpans(cell string) []string {
	var out []string
	for _, m := range backtickRE.FindAllStringSubmatch(cell, -1) {
		out = append(out, strings.TrimSuffix(m[1], "/"))
	}
	return out
}

// packageMap reads the package map of DESIGN.md (text): the first table
// after mapHeading, one row a layer from the top, each row's first cell
// naming its packages in backticks. It returns the layers' packages.
func packageMap(t *testing.T, text string) [][]string {
	t.Helper()
	var layers [][]string
	for _, row := range firstTable(t, text, mapHeading) {
		layer := codeSpans(row[0])
		require.NotEmpty(t, layer, "a row of the package map names no package: %q", row)
		layers = append(layers, layer)
	}
	return layers
}

// readDesign returns docs/DESIGN.md.
func readDesign(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("DESIGN.md")
	require.NoError(t, err)
	return string(b)
}

// designMap is docs/DESIGN.md's package map.
func designMap(t *testing.T) [][]string {
	t.Helper()
	return packageMap(t, readDesign(t))
}

// layerOf maps each package of the map to its row, 0 at the top.
func layerOf(t *testing.T, layers [][]string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i, layer := range layers {
		for _, p := range layer {
			_, dup := out[p]
			require.False(t, dup, "the package map lists %s twice", p)
			out[p] = i
		}
	}
	return out
}

// TestPackageMapMatchesGoList: DESIGN.md's package map lists every package
// of the module that holds code, and nothing else (a package added, moved
// or removed is a one-row edit of the map).
func TestPackageMapMatchesGoList(t *testing.T) {
	t.Parallel()
	pkgs := codePackages(t)
	listed := layerOf(t, designMap(t))
	var missing, gone []string
	for p := range pkgs {
		if _, ok := listed[p]; !ok {
			missing = append(missing, p)
		}
	}
	for p := range listed {
		if _, ok := pkgs[p]; !ok {
			gone = append(gone, p)
		}
	}
	slices.Sort(missing)
	slices.Sort(gone)
	require.Empty(t, missing, "packages of the module missing from DESIGN.md's package map")
	require.Empty(t, gone, "DESIGN.md's package map lists packages that do not exist (or hold no code)")
}

// upward lists the imports of pkgs that point to a package on a row above
// the importer's, as "importer → imported"; same-row imports are allowed.
// Packages outside the map are not judged here.
func upward(pkgs map[string]goPackage, layer map[string]int) []string {
	var out []string
	for rel, p := range pkgs {
		from, ok := layer[rel]
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if imp != modulePath && !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			to, ok := layer[goPackage{ImportPath: imp}.rel()]
			if ok && to < from {
				out = append(out, rel+" → "+goPackage{ImportPath: imp}.rel())
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestLayersImportOnlyDown: the package map's order is the import
// direction: no package imports one on a row above its own (non-test
// imports; tests may import anything, as the test-support row at the top
// shows).
func TestLayersImportOnlyDown(t *testing.T) {
	t.Parallel()
	require.Empty(t, upward(codePackages(t), layerOf(t, designMap(t))),
		"imports pointing up DESIGN.md's package map")
}

// TestLayersCheckerFindsUpwardImports: the map's reader and the layering
// check see a row of several packages, an upward import and a same-row
// import for what they are.
func TestLayersCheckerFindsUpwardImports(t *testing.T) {
	t.Parallel()
	text := "# D\n\n" + mapHeading + "\n\nThe map:\n\n| packages | owns |\n|---|---|\n" +
		"| `cmd/x` | main |\n| `a`, `b/` | two |\n| `c` | low |\n\n## Next\n\n| `z` | not the map |\n"
	layers := packageMap(t, text)
	require.Equal(t, [][]string{{"cmd/x"}, {"a", "b"}, {"c"}}, layers)
	pkg := func(rel string, imports ...string) goPackage {
		p := goPackage{ImportPath: modulePath + "/" + rel}
		for _, i := range imports {
			p.Imports = append(p.Imports, modulePath+"/"+i)
		}
		return p
	}
	pkgs := map[string]goPackage{
		"cmd/x": pkg("cmd/x", "a", "c"),
		"a":     pkg("a", "b", "c"),
		"b":     pkg("b"),
		"c":     pkg("c", "a"),
	}
	require.Equal(t, []string{"c → a"}, upward(pkgs, layerOf(t, layers)))
}
