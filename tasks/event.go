package tasks

import (
	"encoding/json"
	"strconv"
	"time"
)

// State is a task's lifecycle state (stable names, DESIGN.md §3).
type State string

// Task states.
const (
	StatePending      State = "pending"
	StateScheduled    State = "scheduled"
	StateActive       State = "active"
	StateRetrying     State = "retrying"
	StateDeferred     State = "deferred"
	StateRestarting   State = "restarting"
	StateSucceeded    State = "succeeded"
	StateDeadLettered State = "dead_lettered"
	// StateCanceled: the task was canceled (Client.Cancel, `inspector task
	// cancel`, POST /api/v1/tasks/{id}/cancel). It is final: no run of the
	// task runs, retries, restarts or is dead-lettered after it.
	StateCanceled State = "canceled"
)

// States lists every task state, in lifecycle order (stable names).
var States = []State{StatePending, StateScheduled, StateActive, StateRetrying, StateDeferred,
	StateRestarting, StateSucceeded, StateDeadLettered, StateCanceled}

// Terminal reports whether s is an end state.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateDeadLettered || s == StateCanceled
}

// Event kinds recorded in a task's history.
const (
	EventQueued       = "queued"
	EventScheduled    = "scheduled"
	EventStarted      = "started"
	EventSucceeded    = "succeeded"
	EventFailed       = "failed" // an attempt failed (followed by retrying/restarting/dead_lettered)
	EventRetrying     = "retrying"
	EventDeferred     = "deferred"
	EventRestarting   = "restarting"
	EventRestarted    = "restarted"
	EventDeadLettered = "dead_lettered"
	EventRequeued     = "requeued"
	EventCanceled     = "canceled" // put back on shutdown; no attempt used
	// EventTaskCanceled: the task was canceled on request (Client.Cancel):
	// state canceled, for good. Reason holds the caller's reason ("" when
	// none was given) and Error says "canceled: <reason>". Not to be
	// confused with EventCanceled, a worker's shutdown putting the task back.
	EventTaskCanceled = "task_canceled"
	// EventElided stands, in a long history, for the events between the
	// first HistoryHead and the last HistoryTail: Count says how many,
	// Attempts how many attempt outcomes were among them.
	EventElided = "history_elided"
)

// A history keeps its first HistoryHead events and its last HistoryTail;
// the events between are replaced by one EventElided event. Repeated
// deferrals are one event already (Event.Count), so only a task that
// makes very many attempts (many requeues) is elided.
const (
	HistoryHead = 20
	HistoryTail = 80
)

// Event is one entry of a task's history.
type Event struct {
	At         time.Time `json:"at"`
	Event      string    `json:"event"`
	Attempt    int       `json:"attempt"`
	Restart    int       `json:"restart"`
	Agent      string    `json:"agent,omitempty"`
	ErrorClass string    `json:"error_class"`
	Error      string    `json:"error"`
	DelayMS    int64     `json:"delay_ms"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	Worker     string    `json:"worker,omitempty"`
	// Count is how many events this one stands for: repeated deferrals
	// in a row are one "deferred" event (the last one's fields, counted;
	// Since is the first one's time), and EventElided counts the events
	// it replaces. Zero means one.
	Count int       `json:"count,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Attempts is, for EventElided, how many attempt outcomes it replaces.
	Attempts int `json:"attempts,omitempty"`
	// Reason is, for EventTaskCanceled, the reason the cancel gave.
	Reason string `json:"reason,omitempty"`
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

// marshal is json.Marshal(ev) (the history's stable JSON shape), written
// directly for the events the worker writes on every task: UTC times in
// years 0–9999 and strings of printable ASCII that JSON does not escape.
// Any other event goes through encoding/json (FuzzEventMarshal holds the
// two to the same bytes).
func (ev Event) marshal() []byte {
	if !ev.plain() {
		b, _ := json.Marshal(ev)
		return b
	}
	b := make([]byte, 0, 160+len(ev.Agent)+len(ev.ErrorClass)+len(ev.Error)+len(ev.Worker))
	b = append(b, `{"at":"`...)
	b = ev.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","event":"`...)
	b = append(b, ev.Event...)
	b = append(b, `","attempt":`...)
	b = strconv.AppendInt(b, int64(ev.Attempt), 10)
	b = append(b, `,"restart":`...)
	b = strconv.AppendInt(b, int64(ev.Restart), 10)
	if ev.Agent != "" {
		b = append(b, `,"agent":"`...)
		b = append(b, ev.Agent...)
		b = append(b, '"')
	}
	b = append(b, `,"error_class":"`...)
	b = append(b, ev.ErrorClass...)
	b = append(b, `","error":"`...)
	b = append(b, ev.Error...)
	b = append(b, `","delay_ms":`...)
	b = strconv.AppendInt(b, ev.DelayMS, 10)
	if ev.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendInt(b, ev.DurationMS, 10)
	}
	if ev.Worker != "" {
		b = append(b, `,"worker":"`...)
		b = append(b, ev.Worker...)
		b = append(b, '"')
	}
	if ev.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(ev.Count), 10)
	}
	if !ev.Since.IsZero() {
		b = append(b, `,"since":"`...)
		b = ev.Since.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if ev.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(ev.Attempts), 10)
	}
	if ev.Reason != "" {
		b = append(b, `,"reason":"`...)
		b = append(b, ev.Reason...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// plain reports whether marshal may write ev itself.
func (ev Event) plain() bool {
	return plainTime(ev.At) && (ev.Since.IsZero() || plainTime(ev.Since)) &&
		plainText(ev.Event) && plainText(ev.Agent) && plainText(ev.ErrorClass) && plainText(ev.Error) && plainText(ev.Worker) && plainText(ev.Reason)
}

func plainTime(t time.Time) bool {
	return t.Location() == time.UTC && t.Year() >= 0 && t.Year() <= 9999
}

// plainText: JSON writes s as it is (no escape, no HTML escape).
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
