package redisx

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Scripts is one package's Lua: its embedded .lua files and the Go names
// they are rendered with. Every script of agentq is built through it (or,
// for internal/record, through the same rendering of its own schema), so
// a script's keys, fields and constants come from Go and a script is never
// an inline string (internal/lint's TestNoInlineScripts holds it).
//
// A file names a Go value as T.name, where T is one upper-case letter the
// package gives a table for (F for a hash's fields, K for key parts, C
// for constants, …) and name is a key of that table; rendering replaces
// the reference by the table's Lua literal. SERVER_NOW_MS is replaced by
// LuaServerMS (the server's clock in ms, as an expression). A reference
// to a name a table does not have, or a file that is missing, panics when
// the script is built: a bug in a script fails when its package loads, not
// on a call.
//
// Each file starts with comments naming what it does, its KEYS, ARGV and
// replies (internal/lint's TestScriptsDocumented holds it).
type Scripts struct {
	pkg    string
	fsys   fs.FS
	tables map[string]map[string]string
	ref    *regexp.Regexp
}

// NowMS, given to Source or Script among the file names, inserts
// LuaNowMS (the function now_ms(), the clock a script reads: the server's
// TIME, or ARGV's in tests).
const NowMS = "@now_ms"

// NewScripts returns the scripts of package pkg (named in panics) read
// from fsys, rendered with tables (letter → name → Lua literal; nil: no
// tables). Quoted and Literals build the tables.
func NewScripts(pkg string, fsys fs.FS, tables map[string]map[string]string) *Scripts {
	letters := ""
	for l := range tables {
		if len(l) != 1 || l[0] < 'A' || l[0] > 'Z' {
			panic(fmt.Sprintf("%s: a script table is named by one upper-case letter, not %q", pkg, l))
		}
		letters += l
	}
	s := &Scripts{pkg: pkg, fsys: fsys, tables: tables}
	if letters != "" {
		s.ref = regexp.MustCompile(`\b([` + letters + `])\.([A-Za-z_][A-Za-z0-9_]*)\b`)
	}
	return s
}

// Source is the rendered concatenation of the files names (paths in the
// package's file system, or NowMS).
func (s *Scripts) Source(names ...string) string {
	var b strings.Builder
	for _, name := range names {
		if name == NowMS {
			b.WriteString(LuaNowMS)
			continue
		}
		src, err := fs.ReadFile(s.fsys, name)
		if err != nil {
			panic(s.pkg + ": " + err.Error())
		}
		b.Write(src)
		if len(src) > 0 && src[len(src)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return s.render(b.String())
}

// Script is the script whose body is Source(names...).
func (s *Scripts) Script(names ...string) *redis.Script {
	return redis.NewScript(s.Source(names...))
}

func (s *Scripts) render(src string) string {
	src = strings.ReplaceAll(src, "SERVER_NOW_MS", LuaServerMS)
	if s.ref == nil {
		return src
	}
	return s.ref.ReplaceAllStringFunc(src, func(ref string) string {
		m := s.ref.FindStringSubmatch(ref)
		v, ok := s.tables[m[1]][m[2]]
		if !ok {
			panic(s.pkg + ": a script names " + ref + ", which its Go tables do not have")
		}
		return v
	})
}

// Quoted is a table of names whose Lua literals are the names quoted:
// Quoted("state") renders F.state as "state".
func Quoted(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = fmt.Sprintf("%q", n)
	}
	return m
}

// Literals is a table of Go values rendered as Lua literals: strings
// quoted, integers and floats as numbers, booleans as true or false.
// Another type panics.
func Literals(values map[string]any) map[string]string {
	m := make(map[string]string, len(values))
	for k, v := range values {
		switch x := v.(type) {
		case string:
			m[k] = fmt.Sprintf("%q", x)
		case int, int32, int64, uint, uint32, uint64:
			m[k] = fmt.Sprint(x)
		case float64:
			m[k] = fmt.Sprint(x)
		case bool:
			m[k] = fmt.Sprint(x)
		default:
			panic(fmt.Sprintf("redisx: no Lua literal for %s (%T)", k, v))
		}
	}
	return m
}
