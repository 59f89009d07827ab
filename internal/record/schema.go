package record

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/amount"
)

// State is a task's lifecycle state (stable names, docs/DESIGN.md §3).
type State string

// Task states.
const (
	StatePending    State = "pending"
	StateScheduled  State = "scheduled"
	StateActive     State = "active"
	StateRetrying   State = "retrying"
	StateDeferred   State = "deferred"
	StateRestarting State = "restarting"
	// StateWaiting: the task's agent suspended the run (a sleep, a time,
	// a signal): its next run waits in asynq's scheduled set until the
	// wait ends (Waiting).
	StateWaiting      State = "waiting"
	StateSucceeded    State = "succeeded"
	StateDeadLettered State = "dead_lettered"
	// StateCanceled: the task was canceled on request. It is final: no run
	// of the task runs, retries, restarts or is dead-lettered after it.
	StateCanceled State = "canceled"
)

// States lists every task state, in lifecycle order (stable names).
var States = []State{StatePending, StateScheduled, StateActive, StateRetrying, StateDeferred,
	StateRestarting, StateWaiting, StateSucceeded, StateDeadLettered, StateCanceled}

// Terminal reports whether s is an end state.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateDeadLettered || s == StateCanceled
}

// Event kinds recorded in a task's history (stable names).
const (
	EventQueued       = "queued"
	EventScheduled    = "scheduled"
	EventSucceeded    = "succeeded"
	EventFailed       = "failed" // one call of an attempt failed and the attempt goes on with a fallback agent
	EventRetrying     = "retrying"
	EventDeferred     = "deferred"
	EventRestarting   = "restarting"
	EventDeadLettered = "dead_lettered"
	EventRequeued     = "requeued"
	// EventInterrupted: the worker's shutdown cut the attempt and put the
	// task back on its queue without using an attempt (the state goes back
	// to pending). Named so that it cannot be taken for the state canceled.
	// The same event with Lost set (and Reason ReasonWorkerLost) says that
	// an attempt was lost with its worker (killed, frozen, cut off from
	// Redis): a delivery of the run found the attempt still active, never
	// reported, on another delivery (rec_apply); Worker is the lost
	// worker and Attempt the lost attempt. It is recorded before the new
	// attempt starts.
	EventInterrupted = "interrupted"
	// EventTaskCanceled: the task was canceled on request: state canceled,
	// for good. Reason holds the caller's reason ("" when none was given)
	// and Error says "canceled: <reason>".
	EventTaskCanceled = "task_canceled"
	// EventProgress and EventOutput are live output of a task's agent
	// (an exec agent's AGENTQ_EVENTS_FD lines, an HTTP backend's
	// server-sent events), kept in the task's output list, not its history;
	// Data holds what the agent sent. EventOutputTruncated says a task went
	// over its output caps (MaxOutputEvents, MaxOutputBytes): what came
	// after was dropped.
	EventProgress        = "progress"
	EventOutput          = "output"
	EventOutputTruncated = "output_truncated"
	// EventStep: the task's agent recorded a step (Store.Step): Name is
	// the step's name, Bytes the size of its data, Usage what it used.
	// The data itself is in the task's steps hash (rkeys.TaskSteps).
	EventStep = "step"
	// EventWaiting: the agent suspended the run (Waiting): Wait is the
	// wait's JSON, DelayMS how long until its run is due at the latest.
	// EventResumed: a run that waited started (Resume: how many times the
	// task has resumed; By: "timer", "signal", "timeout" or "children").
	// EventSignal: a signal was sent to the task (Store.Signal), waited
	// for or not: Name and Bytes.
	EventWaiting = "waiting"
	EventResumed = "resumed"
	EventSignal  = "signal"
	// EventElided stands, in a long history, for the events between the
	// first HistoryHead and the last HistoryTail: Count says how many,
	// Attempts how many attempt outcomes were among them.
	EventElided = "history_elided"
)

// ReasonWorkerLost is the Reason of an EventInterrupted whose attempt was
// lost with its worker (Event.Lost).
const ReasonWorkerLost = "worker lost"

// TerminalEvents are the events that end a task, one per state that does.
var TerminalEvents = map[string]State{
	EventSucceeded: StateSucceeded, EventDeadLettered: StateDeadLettered, EventTaskCanceled: StateCanceled,
}

// A history keeps its first HistoryHead events and its last HistoryTail;
// the events between are replaced by one EventElided event.
const (
	HistoryHead = 20
	HistoryTail = 80
)

// The record's fields (a Redis hash per task). The scripts get these names
// rendered (F.state, …), so a field is named here only.
const (
	FieldID            = "id"
	FieldAgent         = "agent"
	FieldAction        = "action"
	FieldQueue         = "queue"
	FieldCorrelationID = "correlation_id"
	FieldEnqueuedAt    = "enqueued_at"
	FieldState         = "state"
	FieldRun           = "run"
	FieldRestarts      = "restarts"
	// FieldAttempts is the task's total attempt count: FieldAttemptsBase
	// (the attempts of its earlier runs) plus the current run's attempt
	// number.
	FieldAttempts     = "attempts"
	FieldAttemptsBase = "attempts_base"
	FieldErrorClass   = "error_class"
	FieldError        = "error"
	// FieldClassifiedBy is the kind of evidence that decided
	// FieldErrorClass (resilience.Evidence: rule, structure, status, text,
	// model, default); written with it, cleared with it.
	FieldClassifiedBy = "classified_by"
	FieldResult       = "result"
	// FieldNextAttemptAt is when a retry's next attempt is due (Unix ms).
	FieldNextAttemptAt = "next_attempt_at"
	FieldUpdatedAt     = "updated_at"
	FieldCanceledAt    = "canceled_at"
	FieldCancelReason  = "cancel_reason"
	// FieldReason is why a dead-lettered task was (not_retryable,
	// restarts_exhausted, …).
	FieldReason = "reason"
	// FieldCanceledFrom is the state a canceled task was canceled in.
	FieldCanceledFrom = "canceled_from"
	// FieldDeadline is when the task gives up (RFC 3339; "" for never).
	FieldDeadline = "deadline"
	// FieldNotify names the webhooks told of the task's events
	// (comma-separated; "" for none).
	FieldNotify = "notify"
	// FieldTenant is who the task is for (absent: the default tenant) and
	// FieldPriority its priority ("high", "low"; absent: normal).
	FieldTenant   = "tenant"
	FieldPriority = "priority"
	// PriorityNormal is the priority View shows for a record without one.
	PriorityNormal = "normal"
	// FieldWatch is set once someone waits for the task or follows its
	// events (Store.Watch): from then on its events are announced.
	FieldWatch = "watch"
	// FieldSeq is the sequence number of the record's last event.
	FieldSeq = "seq"
	// FieldFirstEvent holds, for a task enqueued with a generated ID
	// outside a Cluster, its first event (seq 1), compact (firstEvent):
	// its history list starts at the second. Readers put it first
	// (withFirst); the history's bounds count it (hist_trim).
	FieldFirstEvent = "first"
	// FieldOutputN and FieldOutputBytes count a task's live output events
	// and their bytes (its caps: MaxOutputEvents, MaxOutputBytes).
	FieldOutputN     = "out_n"
	FieldOutputBytes = "out_bytes"
	// FieldWriteID is the ID of the last write applied (see Change).
	FieldWriteID = "write_id"
	// FieldWorker is the worker (its events' worker, "host:pid") whose
	// delivery last started an attempt of the task: while the task is
	// active, the worker running it. Absent until a start names one.
	FieldWorker = "worker"
	// FieldUsage is the task's usage, summed over its attempts (every
	// run), in one field (FormatUsageSum, ParseUsageSum): its input,
	// output, cached and total tokens, then — once a priced attempt's
	// cost is in it — the cost in nano-dollars, as decimal integers
	// separated by commas ("1200,80,1024,1280" or "1200,80,1024,1280,1240000").
	// Absent until an attempt reports usage.
	FieldUsage = "usage"
	// FieldSteps is how many steps the task's agents recorded (absent:
	// none) and FieldStepsBytes the bytes of their data (its caps:
	// MaxSteps, MaxStepsBytes).
	FieldSteps      = "steps"
	FieldStepsBytes = "steps_bytes"
	// FieldResumes is how many times the task's runs suspended (absent:
	// never); FieldWait the JSON of the current or last wait (Wait.JSON)
	// and FieldWaitSignal the signal it waits for ("" for none);
	// FieldWaitOutcome what ended it ("timer", "signal", "timeout",
	// "children"; "" until the resumed run starts). FieldSignals counts
	// the signals sent to the task (absent: none; Store.Signals reads them).
	FieldResumes     = "resumes"
	FieldWait        = "wait"
	FieldWaitSignal  = "wait_signal"
	FieldWaitOutcome = "wait_outcome"
	FieldSignals     = "signals"
	// FieldParent and FieldRoot are, on a child task's record, the task
	// that spawned it and the first task of its tree.
	FieldParent = "parent"
	FieldRoot   = "root"
	// The parent's fields of its last children wait (Store.SetChildren):
	// FieldChildrenRun is the run that waits for them (the run the
	// Waiting write moves the record to), FieldChildrenMode "all" or
	// "any", FieldChildrenN how many, FieldChildrenEnded how many ended
	// (child_ends), FieldChildrenResumed the run their end resumed (set
	// once: a resume happens once per wait).
	FieldChildrenRun     = "children_run"
	FieldChildrenMode    = "children_mode"
	FieldChildrenN       = "children_n"
	FieldChildrenEnded   = "children_ended"
	FieldChildrenResumed = "children_resumed"
)

// What ended a wait (FieldWaitOutcome, EventResumed's By).
const (
	WaitTimer    = "timer"
	WaitSignal   = "signal"
	WaitTimeout  = "timeout"
	WaitChildren = "children"
)

// Event is one entry of a task's history (stable JSON).
type Event struct {
	// Seq is the event's sequence number within its task's history: 1 for
	// the first, one more for each event after; never changed once given.
	// Zero for an event not (yet) recorded.
	Seq        int64     `json:"seq,omitempty"`
	At         time.Time `json:"at"`
	Event      string    `json:"event"`
	Attempt    int       `json:"attempt"`
	Restart    int       `json:"restart"`
	Agent      string    `json:"agent,omitempty"`
	ErrorClass string    `json:"error_class"`
	// ClassifiedBy is, for an event with an error class, the kind of
	// evidence that decided it (resilience.Evidence); omitted when empty.
	ClassifiedBy string `json:"classified_by,omitempty"`
	Error        string `json:"error"`
	DelayMS      int64  `json:"delay_ms"`
	DurationMS   int64  `json:"duration_ms,omitempty"`
	Worker       string `json:"worker,omitempty"`
	// Count is how many events this one stands for: repeated deferrals in
	// a row are one "deferred" event (the last one's fields, counted;
	// Since is the first one's time), and EventElided counts the events it
	// replaces. Zero means one.
	Count int       `json:"count,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Attempts is, for EventElided, how many attempt outcomes it replaces.
	Attempts int `json:"attempts,omitempty"`
	// Reason is, for EventTaskCanceled, the reason the cancel gave; for
	// EventDeadLettered, why the task was dead-lettered.
	Reason string `json:"reason,omitempty"`
	// Lost is, for EventInterrupted, true when the attempt was lost with
	// its worker (Reason ReasonWorkerLost) rather than cut by its worker's
	// shutdown.
	Lost bool `json:"lost,omitempty"`
	// Data is, for EventProgress and EventOutput, what the agent sent.
	Data json.RawMessage `json:"data,omitempty"`
	// Usage is what the attempt's call used (an attempt's outcome or a
	// failed call), when it reported usage; its cost when its model is
	// priced.
	Usage *amount.Usage `json:"usage,omitempty"`
	// Fallback is, for an event of a call served by a fallback agent (Agent),
	// why the call went to it: the failed call's class (provider_error, …),
	// breaker_open, over_limit, or "over_budget: " and the task's agent's
	// budget that had no room (budget.fallback).
	Fallback string `json:"fallback,omitempty"`
	// Name is, for EventStep, the step's name, and Bytes the size of its
	// data.
	Name  string `json:"name,omitempty"`
	Bytes int    `json:"bytes,omitempty"`
	// Wait is, for EventWaiting, the wait (Wait.JSON).
	Wait json.RawMessage `json:"wait,omitempty"`
	// Resume and By are, for EventResumed, how many times the task has
	// resumed and what resumed it.
	Resume int    `json:"resume,omitempty"`
	By     string `json:"by,omitempty"`
}

// AttemptOutcome reports whether ev ends an attempt (and so counts one):
// succeeded, retrying, restarting or dead_lettered with an attempt number.
func (ev Event) AttemptOutcome() bool {
	switch ev.Event {
	case EventSucceeded, EventRetrying, EventRestarting, EventDeadLettered:
		return ev.Attempt > 0
	}
	return false
}

// Marshal is json.Marshal(ev) (the history's stable JSON shape), written
// directly for the events the worker writes on every task: UTC times in
// years 0–9999, strings of printable ASCII that JSON does not escape, and
// a usage whose cost JSON writes without an exponent (plainUsage).
// Any other event goes through encoding/json (FuzzEventMarshal holds the
// two to the same bytes).
func (ev Event) Marshal() []byte {
	if !ev.plain() {
		b, _ := json.Marshal(ev)
		return b
	}
	size := 196 + len(ev.Agent) + len(ev.ErrorClass) + len(ev.ClassifiedBy) + len(ev.Error) + len(ev.Worker) + len(ev.Reason) + len(ev.Fallback)
	if ev.Usage != nil {
		size += 160 + len(ev.Usage.Model)
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	if ev.Seq != 0 {
		b = append(b, `"seq":`...)
		b = strconv.AppendInt(b, ev.Seq, 10)
		b = append(b, ',')
	}
	b = append(b, `"at":"`...)
	b = ev.At.AppendFormat(b, time.RFC3339Nano)
	b = appendStr(b, "event", ev.Event)
	b = appendInt(b, "attempt", int64(ev.Attempt))
	b = appendInt(b, "restart", int64(ev.Restart))
	if ev.Agent != "" {
		b = appendStr(b, "agent", ev.Agent)
	}
	b = appendStr(b, "error_class", ev.ErrorClass)
	if ev.ClassifiedBy != "" {
		b = appendStr(b, "classified_by", ev.ClassifiedBy)
	}
	b = appendStr(b, "error", ev.Error)
	b = appendInt(b, "delay_ms", ev.DelayMS)
	if ev.DurationMS != 0 {
		b = appendInt(b, "duration_ms", ev.DurationMS)
	}
	if ev.Worker != "" {
		b = appendStr(b, "worker", ev.Worker)
	}
	if ev.Count != 0 {
		b = appendInt(b, "count", int64(ev.Count))
	}
	if !ev.Since.IsZero() {
		b = append(b, `,"since":"`...)
		b = ev.Since.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if ev.Attempts != 0 {
		b = appendInt(b, "attempts", int64(ev.Attempts))
	}
	if ev.Reason != "" {
		b = appendStr(b, "reason", ev.Reason)
	}
	if ev.Lost {
		b = append(b, `,"lost":true`...)
	}
	if ev.Usage != nil {
		b = appendUsage(b, ev.Usage)
	}
	if ev.Fallback != "" {
		b = appendStr(b, "fallback", ev.Fallback)
	}
	return append(b, '}')
}

// appendUsage appends `,"usage":{…}`, u as encoding/json writes it (see
// plainUsage).
func appendUsage(b []byte, u *amount.Usage) []byte {
	b = append(b, `,"usage":{`...)
	if u.Model != "" {
		b = append(b, `"model":"`...)
		b = append(b, u.Model...)
		b = append(b, `",`...)
	}
	b = append(b, `"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = appendInt(b, "output_tokens", u.OutputTokens)
	if u.CachedTokens != 0 {
		b = appendInt(b, "cached_tokens", u.CachedTokens)
	}
	b = appendInt(b, "total_tokens", u.TotalTokens)
	if u.CostUSD != 0 {
		b = append(b, `,"cost_usd":`...)
		b = strconv.AppendFloat(b, u.CostUSD, 'f', -1, 64)
	}
	if u.Priced {
		b = append(b, `,"priced":true`...)
	}
	return append(b, '}')
}

// plainUsage reports whether appendUsage writes u as encoding/json does:
// its model needs no escaping and its cost is 0 or written without an
// exponent (encoding/json's 'f' format: 1e-6 ≤ |cost| < 1e21).
func plainUsage(u *amount.Usage) bool {
	if u == nil {
		return true
	}
	abs := math.Abs(u.CostUSD)
	return PlainText(u.Model) && (abs == 0 || (abs >= 1e-6 && abs < 1e21))
}

// appendStr appends `,"key":"s"` (s needs no escaping, see plain; the
// opening quote of the first string follows "at").
func appendStr(b []byte, key, s string) []byte {
	if key == "event" {
		b = append(b, `","event":"`...)
	} else {
		b = append(b, `,"`...)
		b = append(b, key...)
		b = append(b, `":"`...)
	}
	b = append(b, s...)
	return append(b, '"')
}

func appendInt(b []byte, key string, n int64) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, n, 10)
}

// plain reports whether Marshal may write ev itself.
func (ev Event) plain() bool {
	return len(ev.Data) == 0 && len(ev.Wait) == 0 && ev.Resume == 0 && ev.By == "" && ev.Name == "" && ev.Bytes == 0 && plainUsage(ev.Usage) && PlainTime(ev.At) && (ev.Since.IsZero() || PlainTime(ev.Since)) &&
		PlainText(ev.Event) && PlainText(ev.Agent) && PlainText(ev.ErrorClass) && PlainText(ev.ClassifiedBy) && PlainText(ev.Error) &&
		PlainText(ev.Worker) && PlainText(ev.Reason) && PlainText(ev.Fallback)
}

// PlainTime reports whether t is written by Marshal itself (UTC, years 0–9999).
func PlainTime(t time.Time) bool {
	return t.Location() == time.UTC && t.Year() >= 0 && t.Year() <= 9999
}

// PlainText reports whether JSON writes s as it is (no escape, no HTML escape).
func PlainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// firstEvent is ev, a task's first event (seq 1: queued or scheduled,
// its delay, its time), as FieldFirstEvent holds it: "queued 0
// 2026-11-29T07:18:11.274930568Z", short enough for Redis's compact hash
// encoding (at most 64 bytes a value).
func firstEvent(ev Event) string {
	return ev.Event + " " + strconv.FormatInt(ev.DelayMS, 10) + " " + ev.At.UTC().Format(time.RFC3339Nano)
}

// parseFirstEvent reads FieldFirstEvent's value back (firstEvent).
func parseFirstEvent(s string) (Event, bool) {
	kind, rest, ok := strings.Cut(s, " ")
	delay, at, ok2 := strings.Cut(rest, " ")
	if !ok || !ok2 {
		return Event{}, false
	}
	ms, err := strconv.ParseInt(delay, 10, 64)
	if err != nil {
		return Event{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return Event{}, false
	}
	return Event{Seq: 1, At: t, Event: kind, DelayMS: ms}, true
}

// withFirst is a history: the first event a record holds (first, its
// FieldFirstEvent: "" for none), then the events of its list raw.
func withFirst(first string, raw []string) []Event {
	ev, ok := parseFirstEvent(first)
	if !ok {
		return ParseEvents(raw)
	}
	out := make([]Event, 0, len(raw)+1)
	return append(append(out, ev), ParseEvents(raw)...)
}

// ParseEvents decodes a history's raw entries, oldest first, skipping any
// that are not JSON events.
func ParseEvents(raw []string) []Event {
	out := make([]Event, 0, len(raw))
	for _, r := range raw {
		var ev Event
		if json.Unmarshal([]byte(r), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}
