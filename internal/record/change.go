package record

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/amount"
)

// Delivery is what a write knows of the delivery it comes from: the task,
// the run and restart the delivery belongs to, its attempt number within
// the run, and the fields that seed a record Create did not write (a
// Cluster's enqueue records after it queues; a record that expired).
type Delivery struct {
	ID       string
	Run      int
	Restarts int
	// Attempt is the delivery's attempt number within its run: asynq's
	// count of the run's failed deliveries plus one. A change that starts
	// an attempt (Change.Start) sets the record's attempts from it.
	Attempt int
	// Worker is the worker making the delivery (its events' worker,
	// "host:pid"; "" for a write that is not a worker's delivery). A
	// change that starts an attempt (Change.Start) records it (the
	// record's FieldWorker) and, when the record shows the run's attempt
	// active on another delivery, records that attempt lost first (see
	// EventInterrupted).
	Worker string
	Seed   Seed
}

// Seed is the part of a record that Create writes: the fields of the
// producer's envelope (tasks.Envelope.Seed) the record keeps, an adapter.
type Seed struct {
	Agent, Action, Queue, CorrelationID string
	EnqueuedAt                          time.Time
	// Deadline is when the task gives up (zero: never).
	Deadline time.Time
	// Notify names the webhooks told of the task's events.
	Notify []string
	// Tenant is who the task is for ("": the default tenant) and Priority
	// its priority ("high", "low"; "" for normal). Only those that are set
	// are written.
	Tenant, Priority string
	// Parent and Root are, for a child task, the task that spawned it and
	// the first task of its tree ("" for a task a producer enqueued).
	Parent, Root string
}

func (s Seed) pairs(id string) []any {
	return append([]any{FieldID, id, FieldAgent, s.Agent, FieldAction, s.Action, FieldQueue, s.Queue,
		FieldCorrelationID, s.CorrelationID, FieldEnqueuedAt, s.EnqueuedAt.UTC().Format(time.RFC3339Nano)}, s.extra()...)
}

// extra are the seed's optional fields, as field/value pairs: only those
// that are set, so that a task without them costs nothing.
func (s Seed) extra() []any {
	var out []any
	if !s.Deadline.IsZero() {
		out = append(out, FieldDeadline, s.Deadline.UTC().Format(time.RFC3339Nano))
	}
	if len(s.Notify) > 0 {
		out = append(out, FieldNotify, strings.Join(s.Notify, ","))
	}
	if s.Tenant != "" {
		out = append(out, FieldTenant, s.Tenant)
	}
	if s.Priority != "" {
		out = append(out, FieldPriority, s.Priority)
	}
	if s.Parent != "" {
		out = append(out, FieldParent, s.Parent, FieldRoot, s.Root)
	}
	return out
}

// Outcome is what Apply did.
type Outcome int

// Apply's outcomes. Nothing is written unless it is Applied.
const (
	// Applied: the change is in the record (now, or by an earlier send of
	// the same write whose reply was lost).
	Applied Outcome = iota
	// Stale: the record is at a newer run (a restart or requeue superseded
	// the delivery's run): drop the delivery.
	Stale
	// Ended: the delivery's run has already ended (succeeded or
	// dead-lettered): ack the delivery.
	Ended
	// Canceled: the task has been canceled: stop, and ack the delivery.
	Canceled
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Stale:
		return "stale"
	case Ended:
		return "ended"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}

// Attempt is what the events of an attempt carry: which attempt of which
// restart, the agent that served it, the worker, how it failed and how
// long the call took, and what it used.
type Attempt struct {
	Attempt    int
	Restart    int
	Agent      string
	Worker     string
	ErrorClass string
	// ClassifiedBy is the kind of evidence that decided ErrorClass
	// (resilience.Evidence; "" for none).
	ClassifiedBy string
	Error        string
	Duration     time.Duration
	// Usage is what the attempt's call used, priced (zero: none reported).
	// The change that ends the attempt puts it on its event and adds it
	// to the task's sum.
	Usage amount.Usage
	// Fallback, for a call served by a fallback agent, says why it went
	// there (Event.Fallback); "" for the task's own agent.
	Fallback string
}

func (a Attempt) event(kind string) *Event {
	ev := &Event{Event: kind, Attempt: a.Attempt, Restart: a.Restart, Agent: a.Agent, Worker: a.Worker,
		ErrorClass: a.ErrorClass, ClassifiedBy: a.ClassifiedBy, Error: a.Error, DurationMS: a.Duration.Milliseconds(), Fallback: a.Fallback}
	if !a.Usage.IsZero() {
		u := a.Usage
		ev.Usage = &u
	}
	return ev
}

// used is the usage a change ending attempt a adds to the task's sum.
func (a Attempt) used() amount.Usage { return a.Usage }

// Change is one state change of a task record: the fields it sets, the
// one event it appends (none for a bare start), and its write ID. Make
// Changes with the constructors below, one per step of a task's life; a
// Change sent again is the same write (the same ID): a no-op once applied.
type Change struct {
	State State
	// Start: the change records the start of the delivery's attempt too
	// (its attempt count, and the run when it is new).
	Start      bool
	ErrorClass string
	// ClassifiedBy is what decided ErrorClass (written with it).
	ClassifiedBy string
	Error        string
	ClearError   bool
	// NextRun, when set, moves the record to that run (a restart).
	NextRun *NextRun
	// NextAttemptAt, when set, is when the next attempt is due (a retry).
	NextAttemptAt time.Time
	// Result is the agent's result data (a success); kept when it is at
	// most MaxStoredResult bytes, otherwise replaced by a note saying so.
	Result json.RawMessage
	// Reason is a dead letter's reason.
	Reason string
	Event  *Event
	// Usage is added to the task's usage sum (the record's FieldUsage)
	// when the change is applied; zero adds nothing.
	Usage amount.Usage
	// Wait, when set, is the wait a suspend records (Waiting).
	Wait *Wait
	// WriteID identifies the write (see the package doc).
	WriteID string
}

// Wait is what a suspended run waits for, as the record keeps it: JSON is
// the wait's JSON ({"kind", "sleep"?, "until"?, "signal"?, "timeout"?,
// "due"}), Signal the signal it waits for ("" for none), Resumes the
// task's resume count once this wait ends (the record's FieldResumes).
type Wait struct {
	JSON    json.RawMessage
	Signal  string
	Resumes int
}

// NextRun is the run a restart moves the record to.
type NextRun struct{ Run, Restarts int }

// MaxStoredResult bounds the result data kept in a task record.
const MaxStoredResult = 64 << 10

// newWriteID returns a random write ID (64 bits: unique among one task's
// writes for any practical purpose).
func newWriteID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

func change(c Change) Change {
	c.WriteID = newWriteID()
	return c
}

// Started: the delivery's attempt starts (state active; no event: its
// outcome's event carries the attempt).
func Started() Change { return change(Change{State: StateActive, Start: true}) }

// Succeeded: the attempt succeeded with result (kept in the record).
func Succeeded(a Attempt, result json.RawMessage) Change {
	return change(Change{State: StateSucceeded, Start: true, ClearError: true, Result: result, Event: a.event(EventSucceeded),
		Usage: a.used()})
}

// Retrying: the attempt failed and the next one is due after delay (at due).
func Retrying(a Attempt, delay time.Duration, due time.Time) Change {
	ev := a.event(EventRetrying)
	ev.DelayMS = delay.Milliseconds()
	return change(Change{State: StateRetrying, Start: true, ErrorClass: a.ErrorClass, ClassifiedBy: a.ClassifiedBy, Error: a.Error,
		NextAttemptAt: due, Event: ev, Usage: a.used()})
}

// CallFailed: one call of an attempt failed and the attempt goes on with a
// fallback agent (the task stays active).
func CallFailed(a Attempt) Change {
	return change(Change{State: StateActive, Start: true, ErrorClass: a.ErrorClass, ClassifiedBy: a.ClassifiedBy, Error: a.Error, Event: a.event(EventFailed),
		Usage: a.used()})
}

// Interrupted: the worker's shutdown cut the attempt; the task is back on
// its queue without using an attempt.
func Interrupted(a Attempt) Change {
	return change(Change{State: StatePending, Start: true, Event: a.event(EventInterrupted), Usage: a.used()})
}

// Restarting: the run ended with a restartable class and its restart
// (next) is scheduled after delay. The event belongs to the run that
// ended; the record moves on to next's run.
func Restarting(a Attempt, next NextRun, delay time.Duration) Change {
	ev := a.event(EventRestarting)
	ev.DelayMS = delay.Milliseconds()
	return change(Change{State: StateRestarting, Start: true, ErrorClass: a.ErrorClass, ClassifiedBy: a.ClassifiedBy, Error: a.Error, NextRun: &next, Event: ev,
		Usage: a.used()})
}

// Waiting: the agent suspended the run (attempt a) with wait w; the
// task's next run (next, the same restarts) is scheduled after delay, when
// the wait ends at the latest. The event belongs to the run that
// suspended; the record moves on to next's run, in state waiting, with
// the wait kept (and its outcome cleared: the resumed run's start decides
// it). Store.ApplyStart's reply (StartInfo.SignalReady) says whether the
// signal w waits for has been sent already.
func Waiting(a Attempt, next NextRun, w Wait, delay time.Duration) Change {
	ev := a.event(EventWaiting)
	ev.DelayMS, ev.Wait = delay.Milliseconds(), w.JSON
	return change(Change{State: StateWaiting, Start: true, NextRun: &next, Event: ev, Wait: &w, Usage: a.used()})
}

// RestartRecovered: a worker scheduled next (a restart) and stopped before
// recording it; the redelivery of the old run records it.
func RestartRecovered(a Attempt, next NextRun) Change {
	ev := a.event(EventRestarting)
	ev.Error = "restart scheduled by a worker that stopped before recording it"
	return change(Change{State: StateRestarting, NextRun: &next, Event: ev})
}

// DeadLettered: the task is in the dead letters with a's class and error,
// for reason.
func DeadLettered(a Attempt, reason string) Change {
	ev := a.event(EventDeadLettered)
	ev.Reason = reason
	return change(Change{State: StateDeadLettered, Start: a.Attempt > 0, ErrorClass: a.ErrorClass, ClassifiedBy: a.ClassifiedBy, Error: a.Error,
		Reason: reason, Event: ev, Usage: a.used()})
}

// Deferred: the task waits delay for what kind names (WaitingBudget,
// WaitingBreaker, WaitingLimit: the event's Reason; no attempt used); why
// says which and its state.
func Deferred(a Attempt, kind, why string, delay time.Duration) Change {
	ev := a.event(EventDeferred)
	ev.Reason, ev.Error, ev.DelayMS = kind, why, delay.Milliseconds()
	return change(Change{State: StateDeferred, Event: ev})
}

// fields are the record fields c writes at time at.
func (c Change) fields(at time.Time) []any {
	fields := make([]any, 0, 16) // every field below but a wait's
	fields = append(fields, FieldState, string(c.State), FieldUpdatedAt, at.UTC().Format(time.RFC3339Nano))
	if c.NextRun != nil {
		fields = append(fields, FieldRestarts, c.NextRun.Restarts)
	}
	if c.Wait != nil {
		fields = append(fields, FieldResumes, c.Wait.Resumes, FieldWait, []byte(c.Wait.JSON), FieldWaitSignal, c.Wait.Signal,
			FieldWaitOutcome, "")
	}
	if res := c.storedResult(); res != nil {
		fields = append(fields, FieldResult, res) // not copied: go-redis sends a []byte as a string
	}
	if !c.NextAttemptAt.IsZero() {
		fields = append(fields, FieldNextAttemptAt, c.NextAttemptAt.UnixMilli())
	}
	if c.ErrorClass != "" {
		fields = append(fields, FieldErrorClass, c.ErrorClass, FieldClassifiedBy, c.ClassifiedBy, FieldError, c.Error)
	}
	if c.Reason != "" {
		fields = append(fields, FieldReason, c.Reason)
	}
	return fields
}

// storedResult is c's result data as the record keeps it (nil: none): a
// result over MaxStoredResult bytes is replaced by a note saying so.
func (c Change) storedResult() []byte {
	if len(c.Result) == 0 {
		return nil
	}
	if len(c.Result) > MaxStoredResult {
		res, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(c.Result)})
		return res
	}
	return c.Result
}

// plainSuccess: c is a success as Succeeded makes it (no run to move to,
// no wait, no error to record, no deferral to merge): the change
// succeed_acked.lua writes lean.
func (c Change) plainSuccess() bool {
	return c.State == StateSucceeded && c.Start && c.ClearError && c.ErrorClass == "" && c.Reason == "" &&
		c.NextRun == nil && c.Wait == nil && c.NextAttemptAt.IsZero() && c.Event != nil && c.Event.Event == EventSucceeded
}
