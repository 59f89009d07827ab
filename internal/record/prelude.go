package record

import (
	"embed"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Code is the first element of every record script's reply.
type Code int64

// The codes of the record's scripts: one convention for all of them.
const (
	// CodeApplied: the write was applied.
	CodeApplied Code = 0
	// CodeRepeat: the write had been applied already (its write ID is the
	// record's last): nothing was written again.
	CodeRepeat Code = 1
	// CodeStale: the record is at a newer run than the write's.
	CodeStale Code = 2
	// CodeEnded: the write's run has already ended (succeeded or
	// dead-lettered), or, for a cancel, the task has ended.
	CodeEnded Code = 3
	// CodeCanceled: the task has been canceled.
	CodeCanceled Code = 4
	// CodeSeed: the record is missing (or was not written by Create) and
	// the write brought no seed fields: send it again with them.
	CodeSeed Code = 5
	// CodeMissing: there is no record.
	CodeMissing Code = 6
	// CodeExists: the task or run to create exists already.
	CodeExists Code = 7
)

var codeNames = map[string]Code{
	"applied": CodeApplied, "again": CodeRepeat, "stale": CodeStale, "ended": CodeEnded,
	"canceled": CodeCanceled, "seed": CodeSeed, "missing": CodeMissing, "exists": CodeExists,
}

//go:embed lua/*.lua
var luaFiles embed.FS

// prelude is what every record script starts with: the schema rendered
// from the Go constants (F: field names, S: states, R: reply codes,
// TERMINAL, HEAD and TAIL), then lua/prelude.lua's functions.
var prelude = renderSchema() + mustLua("prelude.lua")

// renderSchema renders the schema's Go constants as Lua tables.
func renderSchema() string {
	fields := map[string]string{}
	for _, f := range []string{FieldID, FieldAgent, FieldAction, FieldQueue, FieldCorrelationID, FieldEnqueuedAt,
		FieldState, FieldRun, FieldRestarts, FieldAttempts, FieldAttemptsBase, FieldErrorClass, FieldError, FieldResult,
		FieldNextAttemptAt, FieldUpdatedAt, FieldCanceledAt, FieldCancelReason, FieldCanceledFrom, FieldReason, FieldOutputN, FieldOutputBytes, FieldDeadline, FieldNotify, FieldSeq, FieldWriteID} {
		fields[f] = f
	}
	states := map[string]string{}
	terminal := map[string]string{}
	for _, s := range States {
		states[string(s)] = string(s)
		if s.Terminal() {
			terminal[string(s)] = "true"
		}
	}
	events := map[string]string{}
	for _, e := range []string{EventQueued, EventScheduled, EventSucceeded, EventFailed, EventRetrying, EventDeferred,
		EventRestarting, EventDeadLettered, EventRequeued, EventInterrupted, EventTaskCanceled, EventElided, EventProgress, EventOutput, EventOutputTruncated} {
		events[e] = e
	}
	codes := map[string]string{}
	for name, c := range codeNames {
		codes[name] = fmt.Sprint(int64(c))
	}
	var b strings.Builder
	b.WriteString("-- rendered from internal/record's Go constants\n")
	luaTable(&b, "F", fields, true)
	luaTable(&b, "S", states, true)
	luaTable(&b, "E", events, true)
	luaTable(&b, "R", codes, false)
	luaTable(&b, "TERMINAL", terminal, false)
	fmt.Fprintf(&b, "local HEAD, TAIL = %d, %d\n", HistoryHead, HistoryTail)
	return b.String()
}

// luaTable writes `local name = {k = v, …}` in key order; quote makes
// the values strings.
func luaTable(b *strings.Builder, name string, m map[string]string, quote bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(b, "local %s = {", name)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		v := m[k]
		if quote {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(b, "%s = %s", k, v)
	}
	b.WriteString("}\n")
}

// mustLua returns the embedded lua/name.
func mustLua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic("record: " + err.Error())
	}
	return string(b)
}

// newScript is the script whose body is lua/name after the prelude and
// the fragments extra (other definitions the body calls).
func newScript(name string, extra ...string) *redis.Script {
	return redis.NewScript(prelude + strings.Join(extra, "") + mustLua(name))
}
