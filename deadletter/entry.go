package deadletter

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/tasks"
)

// Reasons a task is dead-lettered (Entry.Reason). The list is open: a
// caller may record another reason, and readers must accept unknown ones.
const (
	ReasonNotRetryable      = "not_retryable"       // the class is never retried (invalid_request, …)
	ReasonAttemptsExhausted = "attempts_exhausted"  // the run used every attempt and the class does not restart
	ReasonRestartsExhausted = "restarts_exhausted"  // every restart of the budget was used
	ReasonRestartNotEnabled = "restart_not_enabled" // the class would restart, but restarts are off (max_restarts 0)
	ReasonRestartQueueFull  = "restart_queue_full"  // the restart queue was over restart.max_pending
	ReasonInvalidPayload    = "invalid_payload"     // the asynq payload could not be decoded (see Entry.Payload)
	ReasonUnknownAgent      = "unknown_agent"       // no agent of that name is configured
)

// Entry is a dead letter: everything needed to understand and replay the
// task. Its JSON shape is stable (DESIGN.md §3): fields may be added, never
// renamed.
type Entry struct {
	ID            string          `json:"id"`
	Agent         string          `json:"agent"`
	Action        string          `json:"action"`
	Params        json.RawMessage `json:"params"`
	CorrelationID string          `json:"correlation_id"`
	ErrorClass    string          `json:"error_class"`
	// ClassifiedBy is the kind of evidence that decided ErrorClass, the
	// class of the failure that ended the task (resilience.Evidence: rule,
	// structure, status, text, model, default); omitted when empty.
	ClassifiedBy string `json:"classified_by,omitempty"`
	Error        string `json:"error"`
	// Reason says why the task was dead-lettered (see the Reason… constants).
	Reason   string `json:"reason"`
	Attempts int    `json:"attempts"`
	Restarts int    `json:"restarts"`
	// DeadLetteredAt orders the store (newest first). Put sets it from the
	// store's clock when it is zero.
	DeadLetteredAt time.Time     `json:"dead_lettered_at"`
	History        []tasks.Event `json:"history"`
	Queue          string        `json:"queue"`
	Run            int           `json:"run"`
	EnqueuedAt     time.Time     `json:"enqueued_at"`
	// Tenant and Priority are the task's (absent: the default tenant,
	// normal priority); a requeue keeps them.
	Tenant   string `json:"tenant,omitempty"`
	Priority string `json:"priority,omitempty"`
	// Requeues counts how often the task was requeued from the store.
	Requeues int `json:"requeues"`
	// Payload is the raw asynq payload when it could not be decoded
	// (invalid_request): kept so nothing is lost. Empty otherwise.
	Payload []byte `json:"payload,omitempty"`
}

// ErrNotFound is returned (wrapped with the ID) when no dead letter has the
// requested ID.
var ErrNotFound = errors.New("dead letter not found")

// ErrInvalidEntry is returned (wrapped) by Put for an entry that cannot be
// stored, such as one without an ID.
var ErrInvalidEntry = errors.New("invalid dead letter")

// Validate reports whether e can be stored: it needs an ID, and Params, when
// present, must be valid JSON (it is embedded verbatim in the entry's JSON).
func (e *Entry) Validate() error {
	switch {
	case e == nil:
		return fmt.Errorf("%w: nil entry", ErrInvalidEntry)
	case e.ID == "":
		return fmt.Errorf("%w: empty id", ErrInvalidEntry)
	case len(e.Params) > 0 && !json.Valid(e.Params):
		return fmt.Errorf("%w: %s: params are not valid JSON", ErrInvalidEntry, e.ID)
	}
	return nil
}

// TaskView shows the dead letter as a task (tasks.View), for when the
// task's record has expired and the dead letter is what is left of it.
func (e *Entry) TaskView() *tasks.View {
	v := &tasks.View{
		ID: e.ID, Agent: e.Agent, Action: e.Action, State: tasks.StateDeadLettered,
		Attempts: e.Attempts, Restarts: e.Restarts, ErrorClass: e.ErrorClass, ClassifiedBy: e.ClassifiedBy, Error: e.Error,
		Queue: e.Queue, CorrelationID: e.CorrelationID, Run: e.Run, History: e.History,
		Tenant: e.Tenant, Priority: tasks.PriorityOf(e.Priority),
	}
	if !e.EnqueuedAt.IsZero() {
		v.EnqueuedAt = e.EnqueuedAt.UTC().Format(time.RFC3339Nano)
	}
	if !e.DeadLetteredAt.IsZero() {
		v.UpdatedAt = e.DeadLetteredAt.UTC().Format(time.RFC3339Nano)
	}
	if v.History == nil {
		v.History = []tasks.Event{}
	}
	return v
}
