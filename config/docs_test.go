package config

import (
	"os"
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
// the defaults' fields (the README documents them once, under defaults).
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

// readmeRow is one row of the README's configuration reference table.
type readmeRow struct {
	paths []string
	zero  string
}

// readmeRows reads the table of README.md's "Configuration reference"
// section. A cell naming `a.b.c` / `.d` names a.b.c and a.b.d.
func readmeRows(t *testing.T) []readmeRow {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "\n## Configuration reference\n")
	require.True(t, ok, "README.md has no Configuration reference section")
	section, _, _ = strings.Cut(section, "\n## ")
	tick := regexp.MustCompile("`([^`]+)`")
	var rows []readmeRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		var row readmeRow
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
	require.NotEmpty(t, rows, "no table rows found in the Configuration reference section")
	return rows
}

// TestEveryFieldHasReadmeRow: every field of the file format has a row in
// README.md's configuration reference, and every row names a field.
func TestEveryFieldHasReadmeRow(t *testing.T) {
	t.Parallel()
	fields := schemaFields(t)
	documented := map[string]bool{}
	for _, r := range readmeRows(t) {
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
	require.Empty(t, missing, "fields without a row in README.md's Configuration reference")
	require.Empty(t, unknown, "rows of README.md's Configuration reference that name no config field")
	require.Contains(t, known, "defaults.retry.max_attempts")
	require.Contains(t, known, "agents.NAME.http.url")
	require.Contains(t, known, "defaults.classes.CLASS.exhausted")
}

// TestReadmeZeroColumnIsDefault: the README's "zero" column says what
// Default() holds, for every field Default() sets.
func TestReadmeZeroColumnIsDefault(t *testing.T) {
	t.Parallel()
	values := map[string]reflect.Value{}
	for _, f := range schemaFields(t) {
		if f.leaf && f.value.IsValid() {
			values[f.path] = f.value
		}
	}
	checked := 0
	for _, r := range readmeRows(t) {
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
				d := &decoder{file: "README.md", lines: map[string]int{}, budget: 1000}
				d.value(doc.Content[0], p, got)
				require.Empty(t, d.errs, "%s: zero %q", p, r.zero)
			}
			require.Equal(t, want.Interface(), got.Interface(), "README.md's zero for %s", p)
			checked++
		}
	}
	require.Len(t, values, checked, "a field set by Default() has no README row")
}

// TestDocumentedExamplesValidate: the YAML of README.md's ```yaml blocks,
// of the package doc (doc.go) and deploy/agentq.yaml parses and validates,
// with the environment they refer to.
func TestDocumentedExamplesValidate(t *testing.T) {
	t.Parallel()
	examples := map[string]string{}
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```").FindAllStringSubmatch(string(readme), -1)
	require.GreaterOrEqual(t, len(blocks), 4, "README.md's yaml blocks not found")
	for i, m := range blocks {
		examples["README.md yaml block "+strconv.Itoa(i+1)] = m[1]
	}
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
