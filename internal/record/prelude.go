package record

import (
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/amount"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
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
	// CodeCap: a step went over one of its caps (MaxSteps, MaxStepBytes,
	// MaxStepsBytes): nothing was written.
	CodeCap Code = 9
	// CodeOutbox: the record names webhooks and the write came without
	// the webhook outbox's keys: nothing was written; send it again with
	// them (a write for a task without webhooks spares Redis the keys).
	CodeOutbox Code = 8
	// CodeFull: the lean write of a plain success (succeed_acked.lua)
	// found the record not in the common state: nothing was written;
	// send the write as the checked write.
	CodeFull Code = 10
)

var codeNames = map[string]Code{
	"applied": CodeApplied, "again": CodeRepeat, "stale": CodeStale, "ended": CodeEnded,
	"canceled": CodeCanceled, "seed": CodeSeed, "missing": CodeMissing, "exists": CodeExists,
	"outbox": CodeOutbox, "cap": CodeCap, "full": CodeFull,
}

//go:embed lua/*.lua
var luaFiles embed.FS

// base is what every record script starts with: lua/history.lua's
// functions. The schema's names in the scripts (F.state, S.canceled,
// E.deferred, R.stale, …) and the constants (HEAD, TAIL, …: consts) are
// replaced by their literal values when a script is built (render), so a
// call pays nothing for them (no local set on each call, no upvalue for
// each function that names one).
var base = mustLua("history.lua")

// prelude is what the record scripts other than the checked write start
// with: base, then lua/prelude.lua's functions. The checked write's
// scripts (newApplyScript) have only base and rec_apply: every function a
// script defines is a closure made on each call.
var prelude = base + mustLua("prelude.lua")

// schema maps each table the scripts name (F: fields, S: states, E: event
// kinds, R: reply codes) to its names and their Lua literals.
var schema = func() map[string]map[string]string {
	quoted := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = fmt.Sprintf("%q", n)
		}
		return m
	}
	states := make([]string, len(States))
	for i, st := range States {
		states[i] = string(st)
	}
	codes := map[string]string{}
	for name, c := range codeNames {
		codes[name] = fmt.Sprint(int64(c))
	}
	return map[string]map[string]string{
		"F": quoted(FieldID, FieldAgent, FieldAction, FieldQueue, FieldCorrelationID, FieldEnqueuedAt,
			FieldState, FieldRun, FieldRestarts, FieldAttempts, FieldAttemptsBase, FieldErrorClass, FieldError, FieldClassifiedBy, FieldResult,
			FieldNextAttemptAt, FieldUpdatedAt, FieldCanceledAt, FieldCancelReason, FieldCanceledFrom, FieldReason,
			FieldOutputN, FieldOutputBytes, FieldDeadline, FieldNotify, FieldWatch, FieldSeq, FieldFirstEvent, FieldWriteID, FieldWorker,
			FieldTenant, FieldPriority, FieldUsage, FieldSteps, FieldStepsBytes,
			FieldResumes, FieldWait, FieldWaitSignal, FieldWaitOutcome, FieldSignals,
			FieldParent, FieldRoot, FieldChildrenRun, FieldChildrenMode, FieldChildrenN, FieldChildrenEnded, FieldChildrenResumed),
		"S": quoted(states...),
		"E": quoted(EventQueued, EventScheduled, EventSucceeded, EventFailed, EventRetrying, EventDeferred,
			EventRestarting, EventDeadLettered, EventRequeued, EventInterrupted, EventTaskCanceled, EventElided,
			EventProgress, EventOutput, EventOutputTruncated, EventStep, EventWaiting, EventResumed, EventSignal),
		"R": codes,
	}
}()

// consts are the constants the record's scripts name, as Lua literals:
// the history's bounds, the webhook outbox's lifetime, where the task ID
// starts in a record's key, the usage sum's bound, a lost attempt's
// reason, the suffixes of a task's keys derived from its record's, and
// how a children wait names its kind.
var consts = map[string]string{
	"HEAD": fmt.Sprint(HistoryHead), "TAIL": fmt.Sprint(HistoryTail),
	"OUTBOX_LIFE": fmt.Sprint(int64(OutboxLifetime / time.Second)), "TASK_ID_AT": fmt.Sprint(strings.Index(rkeys.Task("\x00"), "\x00") + 1),
	"MAX_SUM": fmt.Sprint(int64(amount.MaxSum)), "WORKER_LOST": fmt.Sprintf("%q", ReasonWorkerLost),
	"STEPS_SUFFIX": fmt.Sprintf("%q", suffix(rkeys.TaskSteps)), "SIGNALS_SUFFIX": fmt.Sprintf("%q", suffix(rkeys.TaskSignals)),
	"CHILDREN_SUFFIXES": fmt.Sprintf("{%q, %q, %q}", suffix(rkeys.TaskChildren), suffix(rkeys.TaskChildSpecs), suffix(rkeys.TaskChildEnds)),
	"CHILDREN_KIND":     fmt.Sprintf("%q", childrenKind),
	"HIST_SUFFIX":       fmt.Sprintf("%q", suffix(rkeys.TaskHistory)),
}

// constRef is a constant named in a script (consts).
var constRef = regexp.MustCompile(`\b(HEAD|TAIL|OUTBOX_LIFE|TASK_ID_AT|MAX_SUM|WORKER_LOST|STEPS_SUFFIX|SIGNALS_SUFFIX|CHILDREN_SUFFIXES|CHILDREN_KIND|HIST_SUFFIX)\b`)

// suffix is what key(id) adds to the record's key rkeys.Task(id): a
// task's key a script derives from its record's (in the record's slot).
func suffix(key func(string) string) string {
	return strings.TrimPrefix(key("\x00"), rkeys.Task("\x00"))
}

// childrenKind is how a children wait's JSON (FieldWait, compact as
// json.Marshal writes it) names its kind.
const childrenKind = `"kind":"` + WaitChildren + `"`

// terminalRef is TERMINAL(x) in a script: whether the state x is terminal,
// rendered as comparisons with the terminal states.
var terminalRef = regexp.MustCompile(`TERMINAL\(([^()]*(?:\[[^\]]*\])?)\)`)

// terminalExpr is the Lua expression "x is a terminal state".
func terminalExpr(x string) string {
	var parts []string
	for _, s := range States {
		if s.Terminal() {
			parts = append(parts, fmt.Sprintf("%s == %q", x, string(s)))
		}
	}
	return "(" + strings.Join(parts, " or ") + ")"
}

// schemaRef is a reference to the schema in a script: F.state, R.stale, …
var schemaRef = regexp.MustCompile(`\b([FSER])\.([a-z_]+)\b`)

// render replaces every schema reference and constant (consts) in src by
// its literal, and SERVER_NOW_MS by the expression of the server's clock
// (redisx.LuaServerMS: no function is defined on the common path); a name
// the schema does not have is a bug in a script and panics when the
// package loads.
func render(src string) string {
	src = strings.ReplaceAll(src, "SERVER_NOW_MS", redisx.LuaServerMS)
	src = constRef.ReplaceAllStringFunc(src, func(name string) string { return consts[name] })
	src = terminalRef.ReplaceAllStringFunc(src, func(ref string) string {
		return terminalExpr(terminalRef.FindStringSubmatch(ref)[1])
	})
	return schemaRef.ReplaceAllStringFunc(src, func(ref string) string {
		m := schemaRef.FindStringSubmatch(ref)
		v, ok := schema[m[1]][m[2]]
		if !ok {
			panic("record: script names " + ref + ", which is not in the schema")
		}
		return v
	})
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
	return redis.NewScript(render(prelude + strings.Join(extra, "") + mustLua(name)))
}

// newBareScript is the script whose body is lua/name after the fragments
// extra, without the prelude (a script on a hot path that calls none of
// its functions: defining them costs every call).
func newBareScript(name string, extra ...string) *redis.Script {
	return redis.NewScript(render(strings.Join(extra, "") + mustLua(name)))
}

// newApplyScript is the script whose body is lua/name after base,
// lua/rec_apply.lua and the fragments extra.
func newApplyScript(name string, extra ...string) *redis.Script {
	return redis.NewScript(render(base + mustLua("rec_apply.lua") + strings.Join(extra, "") + mustLua(name)))
}

// newAckedScript is a script that writes the record and acknowledges
// asynq's delivery: base, the fragments extra, lua/name (the write), then
// lua/acked.lua (asynq's part, on name's locals).
func newAckedScript(name string, extra ...string) *redis.Script {
	return redis.NewScript(render(base + strings.Join(extra, "") + mustLua(name) + mustLua("acked.lua")))
}
