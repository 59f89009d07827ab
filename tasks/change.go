package tasks

import (
	"context"
	"encoding/json"
	"time"
)

// Change is one state change of a task record: the record fields to set
// (Patch) and the history event that says why (Event). The Set*
// constructors below are the only ways the worker changes a task's state,
// one per step of a task's life, so that each step's fields are decided in
// one place.
type Change struct {
	Patch Patch
	Event Event
}

// Outcome is what the events of an attempt carry: which attempt of which
// run, the agent that served it, the worker, how it failed and how long
// the call took.
type Outcome struct {
	Attempt    int
	Restart    int
	Agent      string
	Worker     string
	ErrorClass string
	Error      string
	Duration   time.Duration
}

func (o Outcome) event(kind string) Event {
	return Event{Event: kind, Attempt: o.Attempt, Restart: o.Restart, Agent: o.Agent, Worker: o.Worker,
		ErrorClass: o.ErrorClass, Error: o.Error, DurationMS: o.Duration.Milliseconds()}
}

// SetSucceeded: the attempt succeeded with result (kept in the record).
func SetSucceeded(o Outcome, result json.RawMessage) Change {
	return Change{Patch{State: StateSucceeded, ClearError: true, Result: result}, o.event(EventSucceeded)}
}

// SetRetrying: the attempt failed and the next one is due after delay (at due).
func SetRetrying(o Outcome, delay time.Duration, due time.Time) Change {
	ev := o.event(EventRetrying)
	ev.DelayMS = delay.Milliseconds()
	return Change{Patch{State: StateRetrying, ErrorClass: o.ErrorClass, Error: o.Error, NextAttemptAt: due}, ev}
}

// SetCallFailed: one call of an attempt failed and the attempt goes on
// with a fallback agent (the task stays active).
func SetCallFailed(o Outcome) Change {
	return Change{Patch{State: StateActive, ErrorClass: o.ErrorClass, Error: o.Error}, o.event(EventFailed)}
}

// SetCanceled: the worker's shutdown cut the attempt; the task is back on
// its queue without using an attempt.
func SetCanceled(o Outcome) Change {
	return Change{Patch{State: StatePending}, o.event(EventCanceled)}
}

// SetRestarting: the run ended with a restartable class and next (its
// restart) is scheduled after delay. The event belongs to the run that
// ended (o.Restart); the record moves on to next's run.
func SetRestarting(o Outcome, next *Envelope, delay time.Duration) Change {
	ev := o.event(EventRestarting)
	ev.DelayMS = delay.Milliseconds()
	return Change{Patch{State: StateRestarting, Run: &next.Run, Restarts: &next.Restarts, ErrorClass: o.ErrorClass, Error: o.Error}, ev}
}

// SetRestartRecovered: a worker scheduled next (a restart) and stopped
// before recording it; the redelivery of the old run records it.
func SetRestartRecovered(o Outcome, next *Envelope) Change {
	ev := o.event(EventRestarting)
	ev.Error = "restart scheduled by a worker that stopped before recording it"
	return Change{Patch{State: StateRestarting, Run: &next.Run, Restarts: &next.Restarts}, ev}
}

// SetDeadLettered: the task is in the dead letters with o's class and error.
func SetDeadLettered(o Outcome) Change {
	return Change{Patch{State: StateDeadLettered, ErrorClass: o.ErrorClass, Error: o.Error}, o.event(EventDeadLettered)}
}

// SetDeferred: the task waits delay for its breaker (no attempt used);
// why says which breaker and its state.
func SetDeferred(o Outcome, why string, delay time.Duration) Change {
	ev := o.event(EventDeferred)
	ev.Error, ev.DelayMS = why, delay.Milliseconds()
	return Change{Patch{State: StateDeferred}, ev}
}

// Apply records c for task id (Transition).
func (s *Store) Apply(ctx context.Context, id string, c Change) error {
	return s.Transition(ctx, id, c.Patch, c.Event)
}

// ApplyIfRun records c for task id only while its record is at run
// (TransitionIfRun); it reports whether it did.
func (s *Store) ApplyIfRun(ctx context.Context, id string, run int, c Change) (bool, error) {
	return s.TransitionIfRun(ctx, id, run, c.Patch, c.Event)
}
