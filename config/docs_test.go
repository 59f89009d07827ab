package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/resilience"
)

// schemaField is one field of the file format, found by walking the Config
// structs and their yaml tags.
type schemaField struct {
	path  string        // agents.NAME.http.url, defaults.classes.CLASS.retry
	value reflect.Value // its value in Default(); invalid under a map key
	leaf  bool          // false for a block (a struct, a map of blocks)
}

// schemaFields walks v (a Config) by reflection. A map of blocks stands for
// its keys by NAME (agents) or CLASS (classes); an agent's own settings are
// the defaults' fields (docs/configuration.md documents them once, under
// defaults).
func schemaFields(t *testing.T) []schemaField {
	t.Helper()
	var out []schemaField
	var walk func(prefix string, typ reflect.Type, v reflect.Value)
	walk = func(prefix string, typ reflect.Type, v reflect.Value) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, ok := f.Tag.Lookup("yaml")
			require.True(t, ok, "%s.%s has no yaml tag", typ.Name(), f.Name)
			if tag == "-" || (tag == ",inline" && typ == reflect.TypeFor[Agent]()) {
				continue
			}
			fv := reflect.Value{}
			if v.IsValid() {
				fv = v.Field(i)
			}
			if tag == ",inline" {
				walk(prefix, f.Type, fv)
				continue
			}
			path := join(prefix, tag)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft, fv = ft.Elem(), reflect.Value{}
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != durationType:
				out = append(out, schemaField{path: path, value: fv})
				walk(path, ft, fv)
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				out = append(out, schemaField{path: path, value: fv})
				key := "NAME"
				if ft.Key() == reflect.TypeFor[resilience.Class]() {
					key = "CLASS"
				}
				walk(path+"."+key, ft.Elem(), reflect.Value{})
			default:
				out = append(out, schemaField{path: path, value: fv, leaf: true})
			}
		}
	}
	walk("", reflect.TypeFor[Config](), reflect.ValueOf(*Default()))
	return out
}

// configDoc is the page that lists every field of the file format.
const configDoc = "../docs/configuration.md"

// docRow is one row of docs/configuration.md's table of fields.
type docRow struct {
	paths []string
	zero  string
}

// docRows reads the table of docs/configuration.md's "Every field"
// section. A cell naming `a.b.c` / `.d` names a.b.c and a.b.d.
func docRows(t *testing.T) []docRow {
	t.Helper()
	data, err := os.ReadFile(configDoc)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "\n## Every field\n")
	require.True(t, ok, "%s has no Every field section", configDoc)
	section, _, _ = strings.Cut(section, "\n## ")
	tick := regexp.MustCompile("`([^`]+)`")
	var rows []docRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		var row docRow
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			p := m[1]
			if strings.HasPrefix(p, ".") && len(row.paths) > 0 {
				prev := row.paths[len(row.paths)-1]
				p = prev[:strings.LastIndex(prev, ".")] + p
			}
			row.paths = append(row.paths, p)
		}
		row.zero = strings.TrimSpace(cells[2])
		rows = append(rows, row)
	}
	require.NotEmpty(t, rows, "no table rows found in the Every field section")
	return rows
}

// TestEveryFieldHasDocRow: every field of the file format has a row in
// docs/configuration.md's table, and every row names a field.
func TestEveryFieldHasDocRow(t *testing.T) {
	t.Parallel()
	fields := schemaFields(t)
	documented := map[string]bool{}
	for _, r := range docRows(t) {
		for _, p := range r.paths {
			documented[p] = true
		}
	}
	known := map[string]bool{}
	var missing, unknown []string
	for _, f := range fields {
		known[f.path] = true
		if f.leaf && !documented[f.path] {
			missing = append(missing, f.path)
		}
	}
	for p := range documented {
		if !known[p] {
			unknown = append(unknown, p)
		}
	}
	require.Empty(t, missing, "fields without a row in docs/configuration.md's Every field")
	require.Empty(t, unknown, "rows of docs/configuration.md's Every field that name no config field")
	require.Contains(t, known, "defaults.retry.max_attempts")
	require.Contains(t, known, "agents.NAME.http.url")
	require.Contains(t, known, "defaults.classes.CLASS.exhausted")
}

// TestDocZeroColumnIsDefault: docs/configuration.md's "zero" column says
// what Default() holds, for every field Default() sets.
func TestDocZeroColumnIsDefault(t *testing.T) {
	t.Parallel()
	values := map[string]reflect.Value{}
	for _, f := range schemaFields(t) {
		if f.leaf && f.value.IsValid() {
			values[f.path] = f.value
		}
	}
	checked := 0
	for _, r := range docRows(t) {
		for _, p := range r.paths {
			want, ok := values[p]
			if !ok {
				continue
			}
			text, _, _ := strings.Cut(r.zero, " — ")
			text = strings.Trim(text, "`")
			got := reflect.New(want.Type()).Elem()
			if text != "none" {
				var doc yaml.Node
				require.NoError(t, yaml.Unmarshal([]byte(text), &doc), "%s: zero %q", p, r.zero)
				d := &decoder{file: "docs/configuration.md", lines: map[string]int{}, budget: 1000}
				d.value(doc.Content[0], p, got)
				require.Empty(t, d.errs, "%s: zero %q", p, r.zero)
			}
			require.Equal(t, want.Interface(), got.Interface(), "docs/configuration.md's zero for %s", p)
			checked++
		}
	}
	require.Len(t, values, checked, "a field set by Default() has no row in docs/configuration.md")
}

// TestDocumentedExamplesValidate: the YAML of the ```yaml blocks of
// README.md and docs/*.md (but DESIGN.md, whose block shows every key at
// once), of the package doc (doc.go) and deploy/agentq.yaml parses and
// validates, with the environment they refer to.
func TestDocumentedExamplesValidate(t *testing.T) {
	t.Parallel()
	examples := map[string]string{}
	pages, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	yamlBlock := regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```")
	total := 0
	for _, page := range append([]string{"../README.md"}, pages...) {
		if filepath.Base(page) == "DESIGN.md" {
			continue
		}
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		for i, m := range yamlBlock.FindAllStringSubmatch(string(text), -1) {
			examples[strings.TrimPrefix(page, "../")+" yaml block "+strconv.Itoa(i+1)] = m[1]
			total++
		}
	}
	require.GreaterOrEqual(t, total, 8, "the docs' yaml blocks not found")
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(doc), "A file looks like this")
	require.True(t, ok)
	var lines []string
	for _, l := range strings.Split(after, "\n")[1:] {
		if l == "//" && len(lines) == 0 {
			continue
		}
		body, ok := strings.CutPrefix(l, "//\t")
		if !ok {
			break
		}
		lines = append(lines, body)
	}
	require.Greater(t, len(lines), 20, "doc.go's example not found")
	examples["doc.go"] = strings.Join(lines, "\n")
	deploy, err := os.ReadFile("../deploy/agentq.yaml")
	require.NoError(t, err)
	examples["deploy/agentq.yaml"] = string(deploy)

	placeholder := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	for name, src := range examples {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(src), name)
			require.NoError(t, err, "%s:\n%s", name, src)
			require.NotEmpty(t, c.Agents, "an example without agents says little")
			c.ApplyEnv(func(k string) string { return map[string]string{EnvRedisURL: "redis://redis:6379/0"}[k] })
			require.NoError(t, c.Validate(), "with %s set", EnvRedisURL)
			for _, a := range c.Agents {
				if a.HTTP == nil {
					continue
				}
				for k, v := range a.HTTP.Headers {
					refs := placeholder.FindAllStringSubmatch(v, -1)
					expanded := a.HTTP.ExpandHeaders(func(name string) string { return "value-of-" + name })[k]
					for _, m := range refs {
						require.Contains(t, expanded, "value-of-"+m[1], "agents.%s.http.headers.%s", a.Name, k)
					}
					require.NotContains(t, expanded, "${", "agents.%s.http.headers.%s", a.Name, k)
				}
			}
		})
	}
}
