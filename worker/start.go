package worker

import (
	"context"
	"time"

	"github.com/agentq/agentq/tasks"
)

// beginGrace is how long a first delivery's call may run before its start
// is written to the task record. A call that ends sooner has its start
// written together with its outcome (one write instead of two); a longer
// one shows as "active" from beginGrace on.
const beginGrace = 50 * time.Millisecond

// attemptStart records the start of one attempt in the task record.
//
// A redelivery (asynq retry count > 0) may belong to a superseded run, so
// its start is written, and fenced, before its agent runs (begin). A first
// delivery is not fenced first: the only stale first delivery is one
// asynq put back at a shutdown deadline after its worker had recorded the
// next run, and the fence still stops its outcome from being recorded. Its
// start is written beginGrace into the call (deferred), or together with
// the attempt's first transition if the call ends sooner.
//
// Its methods run on the handler's goroutine; the deferred Begin runs on a
// timer's, and closing fired orders its err before settle reads it.
type attemptStart struct {
	store *tasks.Store
	env   *tasks.Envelope

	timer   *time.Timer   // the deferred Begin; nil once settled or when begun synchronously
	fired   chan struct{} // closed when the deferred Begin has returned
	err     error         // the Begin's error (tasks.ErrStale: the run is superseded; tasks.ErrCanceled: the task is)
	written bool          // the start is in the record
}

// begin writes the start now (a redelivery): ErrStale means drop the delivery.
func (p *pipeline) begin(ctx context.Context, env *tasks.Envelope) (*attemptStart, error) {
	_, err := p.store.Begin(ctx, env)
	if err != nil {
		return nil, err
	}
	return &attemptStart{store: p.store, env: env, written: true}, nil
}

// deferBegin schedules the start's write beginGrace from now (a first
// delivery); Transition writes it with the outcome if that comes first.
// When the deferred Begin finds the task canceled (a cancel that came as
// the delivery was dequeued, whose stop message the worker missed), it
// calls stop, which ends the attempt's context: the agent is stopped.
func (p *pipeline) deferBegin(ctx context.Context, env *tasks.Envelope, stop func()) *attemptStart {
	a := &attemptStart{store: p.store, env: env, fired: make(chan struct{})}
	bg := context.WithoutCancel(ctx)
	a.timer = time.AfterFunc(beginGrace, func() {
		defer close(a.fired)
		_, a.err = a.store.Begin(bg, env)
		if isCanceled(a.err) && stop != nil {
			stop()
		}
	})
	return a
}

// settle ends the deferred Begin: it stops it if it has not fired, or
// waits for it, and reports whether the start is in the record and the
// Begin's error.
func (a *attemptStart) settle() (bool, error) {
	if a.timer != nil {
		if !a.timer.Stop() { // fired: wait for its Begin
			<-a.fired
			a.written = a.err == nil
		}
		a.timer = nil
	}
	return a.written, a.err
}

// unwritten reports whether the start is still to be written with the
// outcome (BeginTransition): the deferred Begin was stopped before it
// fired. It settles the deferred Begin.
func (a *attemptStart) unwritten() bool {
	written, err := a.settle()
	return !written && err == nil
}

// ensure makes sure the start is in the record before a step that must
// not follow a superseded run (scheduling a restart, dead-lettering):
// tasks.ErrStale or tasks.ErrCanceled means drop the delivery.
func (a *attemptStart) ensure(ctx context.Context) error {
	if written, err := a.settle(); written || dropped(err) {
		return err
	}
	_, err := a.store.Begin(ctx, a.env)
	a.written, a.err = err == nil, err
	return err
}

// apply records a state change of the attempt, with its start when that
// is not in the record yet. tasks.ErrStale means the run is superseded,
// tasks.ErrCanceled that the task is canceled; nothing was written.
func (a *attemptStart) apply(ctx context.Context, c tasks.Change) error {
	written, err := a.settle()
	if written {
		return a.store.Apply(ctx, a.env.ID, c)
	}
	if dropped(err) {
		return err
	}
	_, err = a.store.BeginTransition(ctx, a.env, c.Patch, c.Event)
	if err == nil {
		a.written, a.err = true, nil
	}
	return err
}
