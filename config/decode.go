package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// decoder walks a yaml.Node tree along the config schema — the yaml tags of
// the Config structs — writing the values it finds over a Config and
// recording the line of every field it sees.
type decoder struct {
	file  string
	lines map[string]int
	errs  []*FieldError
	// budget bounds the entries visited, so that aliases and merge keys
	// referring to each other cannot make decoding take exponential time.
	budget int
}

// spend uses up one unit of the budget and reports whether any is left.
func (d *decoder) spend(n *yaml.Node, path string) bool {
	d.budget--
	if d.budget == 0 {
		d.fail(n, path, "document too complex: too many alias or merge-key expansions")
	}
	return d.budget > 0
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Field: path, Reason: fmt.Sprintf(format, args...)})
}

// field is one key of a block: its name in the file and its place in the
// struct (an index path, through inline embedded structs).
type field struct {
	name  string
	index []int
}

// block is the schema of a struct type: its fields by name and in the order
// of the struct, and their names sorted (the candidates of "did you mean").
type block struct {
	fields map[string]field
	order  []field
	names  []string
}

var blocks sync.Map // reflect.Type → *block

// blockOf returns the schema of the struct type t, read from its yaml tags:
// `yaml:"name"` is a key, `yaml:"-"` is not in the file, `yaml:",inline"`
// brings an embedded struct's keys in. An exported field without a yaml
// tag is a programming error (it would be silently left out of the schema).
func blockOf(t reflect.Type) *block {
	if b, ok := blocks.Load(t); ok {
		return b.(*block)
	}
	b := &block{fields: map[string]field{}}
	b.add(t, nil)
	sort.Strings(b.names)
	blocks.Store(t, b)
	return b
}

func (b *block) add(t reflect.Type, prefix []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		index := append(slices.Clone(prefix), i)
		switch tag, ok := f.Tag.Lookup("yaml"); {
		case !ok:
			panic(fmt.Sprintf("config: field %s.%s has no yaml tag", t.Name(), f.Name))
		case tag == "-":
		case tag == ",inline":
			b.add(f.Type, index)
		default:
			fd := field{name: tag, index: index}
			b.fields[tag] = fd
			b.order = append(b.order, fd)
			b.names = append(b.names, tag)
		}
	}
}

// config decodes the root mapping over c. Its sections are decoded in the
// order of Config's fields, whatever their order in the file, and agents
// last: each agent starts from the resolved defaults and the file's agent
// block overrides them field by field. Defaults that depend on other
// fields (the breaker key, the limits key) are left unset: Config.Agent
// applies them.
func (d *decoder) config(root *yaml.Node, c *Config) {
	v := reflect.ValueOf(c).Elem()
	sections := map[string]*yaml.Node{}
	d.object(root, "", v, func(name string, n *yaml.Node) bool {
		sections[name] = n
		return true
	})
	for _, f := range blockOf(v.Type()).order {
		if n, ok := sections[f.name]; ok && f.name != "agents" {
			d.value(n, f.name, v.FieldByIndex(f.index))
		}
	}
	ps, _ := d.pairs(sections["agents"], "agents")
	for _, p := range ps {
		name, path := p.key.Value, join("agents", p.key.Value)
		d.lines[path] = p.key.Line
		a := Agent{Name: name, Settings: c.Defaults.Clone()}
		d.object(p.val, path, reflect.ValueOf(&a).Elem(), nil)
		c.Agents[name] = a
	}
}

// object decodes a mapping over the struct v, key by key in file order; a
// key that is not in v's schema is an unknown field. hold, when not nil, may
// take a field's node to decode later instead.
func (d *decoder) object(n *yaml.Node, path string, v reflect.Value, hold func(name string, n *yaml.Node) bool) {
	b := blockOf(v.Type())
	ps, _ := d.pairs(n, path)
	for _, p := range ps {
		fp := join(path, p.key.Value)
		f, ok := b.fields[p.key.Value]
		if !ok {
			d.fail(p.key, fp, "unknown field%s", suggest(p.key.Value, b.names))
			continue
		}
		d.lines[fp] = p.key.Line
		if hold == nil || !hold(f.name, p.val) {
			d.value(p.val, fp, v.FieldByIndex(f.index))
		}
	}
}

// value decodes n over v according to v's type. A null node leaves v as it
// is (the seed value, or the defaults' value for an agent).
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value) {
	if v.Type() == paramsType {
		d.params(n, path, v)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.object(n, path, v, nil)
	case reflect.Pointer:
		d.pointer(n, path, v)
	case reflect.Slice:
		d.list(n, path, v)
	case reflect.Map:
		d.mapping(n, path, v)
	default:
		d.scalarValue(n, path, v)
	}
}

// pointer decodes an optional value: a block (exec, http, health) is a fresh
// one, seeded, with the file's fields over it; a scalar (a class rule's
// cells) is set only when it decodes.
func (d *decoder) pointer(n *yaml.Node, path string, v reflect.Value) {
	if isNull(deref(n)) {
		return
	}
	p := reflect.New(v.Type().Elem())
	if p.Elem().Kind() != reflect.Struct {
		if d.scalarValue(n, path, p.Elem()) {
			v.Set(p)
		}
		return
	}
	if s, ok := p.Interface().(seeder); ok {
		s.seed()
	}
	d.object(n, path, p.Elem(), nil)
	v.Set(p)
}

// list decodes a sequence, replacing the slice v whole (an empty list is
// kept as empty, not nil). Elements are at "path[i]".
func (d *decoder) list(n *yaml.Node, path string, v reflect.Value) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind == yaml.ScalarNode && v.Type() == codesType {
		// status: 500 is status: [500].
		e := reflect.New(v.Type().Elem()).Elem()
		if d.scalarValue(n, path, e) {
			v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
		}
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "must be a list, got %s", describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, e := range n.Content {
		if !d.spend(e, path) {
			return
		}
		ep := fmt.Sprintf("%s[%d]", path, i)
		d.lines[ep] = e.Line
		ev := reflect.New(v.Type().Elem()).Elem()
		d.value(e, ep, ev)
		out = reflect.Append(out, ev)
	}
	v.Set(out)
}

// mapping decodes a mapping into the map v, recording each key's line. A
// map of scalars (worker.queues, http.headers) is replaced whole by the
// file's; a map of blocks (classes) is merged key by key and field by field.
// String values are text whatever YAML takes them for (X-Retries: 3 is the
// header value "3").
func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value) {
	ps, ok := d.pairs(n, path)
	if !ok || isNull(deref(n)) {
		return
	}
	t := v.Type()
	merge := t.Elem().Kind() == reflect.Struct
	if !merge {
		v.Set(reflect.MakeMapWithSize(t, len(ps)))
	}
	for _, p := range ps {
		kp := join(path, p.key.Value)
		d.lines[kp] = p.key.Line
		key := reflect.ValueOf(p.key.Value).Convert(t.Key())
		e := reflect.New(t.Elem()).Elem()
		switch {
		case merge:
			if old := v.MapIndex(key); old.IsValid() {
				e.Set(old)
			}
			d.object(p.val, kp, e, nil)
		case t.Elem().Kind() == reflect.String:
			s := d.scalar(p.val, kp, "a string")
			if s == nil {
				continue
			}
			e.SetString(s.Value)
		default:
			d.scalarValue(p.val, kp, e)
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(t))
		}
		v.SetMapIndex(key, e)
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// scalars says, for each kind of Go scalar but strings and durations, what
// the file must hold: the YAML tags accepted and their description in
// errors.
var scalars = map[reflect.Kind]struct {
	tags []string
	want string
}{
	reflect.Int:     {[]string{"!!int"}, "an integer"},
	reflect.Int64:   {[]string{"!!int"}, "an integer"},
	reflect.Float64: {[]string{"!!float", "!!int"}, "a number"},
	reflect.Bool:    {[]string{"!!bool"}, "true or false"},
}

// scalarValue decodes a scalar into v and reports whether it did. A null
// node is not an error: it leaves v alone.
func (d *decoder) scalarValue(n *yaml.Node, path string, v reflect.Value) bool {
	switch {
	case v.Type() == durationType:
		return d.duration(n, path, v)
	case v.Kind() == reflect.String:
		return d.str(n, path, v)
	}
	k, ok := scalars[v.Kind()]
	if !ok {
		panic(fmt.Sprintf("config: %s: no decoder for %s", path, v.Type()))
	}
	s := d.scalar(n, path, k.want)
	if s == nil {
		return false
	}
	x := reflect.New(v.Type())
	if !slices.Contains(k.tags, s.Tag) || s.Decode(x.Interface()) != nil {
		d.fail(s, path, "must be %s, got %s", k.want, describe(s))
		return false
	}
	v.Set(x.Elem())
	return true
}

func (d *decoder) str(n *yaml.Node, path string, v reflect.Value) bool {
	s := d.scalar(n, path, "a string")
	if s == nil {
		return false
	}
	if s.Tag != "!!str" {
		d.fail(s, path, "must be a string, got %s (quote it)", describe(s))
		return false
	}
	v.SetString(s.Value)
	return true
}

func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) bool {
	s := d.scalar(n, path, "a duration")
	if s == nil {
		return false
	}
	switch s.Tag {
	case "!!int", "!!float":
		d.fail(s, path, "%s has no unit: write a Go duration such as %ss or %sms", s.Value, s.Value, s.Value)
		return false
	case "!!str":
		x, err := time.ParseDuration(s.Value)
		if err != nil {
			d.fail(s, path, "%q is not a duration: write a Go duration such as 500ms, 30s or 1m", s.Value)
			return false
		}
		v.SetInt(int64(x))
		return true
	}
	d.fail(s, path, "must be a duration such as 30s, got %s", describe(s))
	return false
}

var paramsType = reflect.TypeFor[Params]()

// params decodes a schedule's params: a mapping, kept as its JSON, or a
// string holding a JSON object.
func (d *decoder) params(n *yaml.Node, path string, v reflect.Value) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if !json.Valid([]byte(n.Value)) {
			d.fail(n, path, "must be a mapping or a JSON object, got a string that is not JSON")
			return
		}
		v.SetBytes([]byte(n.Value))
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping, got %s", describe(n))
		return
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		d.fail(n, path, "must be a mapping: %v", err)
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		d.fail(n, path, "cannot be written as JSON: %v", err)
		return
	}
	v.SetBytes(b)
}
