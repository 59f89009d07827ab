package delivery

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/record"
)

// beginGrace is how long a first delivery's call may run before its start
// is written to the task record. A call that ends sooner has its start
// written together with its outcome (one write instead of two); a longer
// one shows as "active" from beginGrace on.
const beginGrace = 50 * time.Millisecond

// attemptStart is the start of one attempt in the task record.
//
// A redelivery (asynq retry count > 0) may belong to a superseded run, so
// its start is written, and fenced, before its agent runs (beginNow). A
// first delivery is not fenced first: the only stale first delivery is one
// asynq put back at a shutdown deadline after its worker had recorded the
// next run, and the checked write of its outcome still refuses it. Its
// start is written beginGrace into the call (beginLazy), or with the
// attempt's outcome if the call ends sooner: every change of an attempt
// carries its start (record.Change.Start), so the outcome's write counts
// the attempt whether or not the start was written.
//
// Its methods run on the handler's goroutine; the lazy start runs on a
// timer's, and closing fired orders its outcome before settle reads it.
type attemptStart struct {
	rec completer
	d   record.Delivery

	timer *time.Timer   // the lazy start; nil once settled or when begun at once
	fired chan struct{} // closed when the lazy start has returned
	out   record.Outcome
	err   error
	// written: the start is in the record.
	written bool
}

// beginNow writes the start now (a redelivery, a later run); a start that
// is not Applied means the delivery must not run.
func (p *Executor) beginNow(ctx context.Context, d record.Delivery) (*attemptStart, record.Outcome, error) {
	out, err := p.rec.apply(ctx, d, record.Started())
	return &attemptStart{rec: p.rec, d: d, written: applied(out, err)}, out, err
}

// beginLazy schedules the start's write beginGrace from now (a first
// delivery). When it finds the task canceled (a cancel that came as the
// delivery was dequeued, whose stop message the worker missed), it calls
// stop, which ends the attempt's context: the agent is stopped.
func (p *Executor) beginLazy(ctx context.Context, d record.Delivery, stop func()) *attemptStart {
	a := &attemptStart{rec: p.rec, d: d, fired: make(chan struct{})}
	bg := context.WithoutCancel(ctx)
	a.timer = time.AfterFunc(beginGrace, func() {
		defer close(a.fired)
		a.out, a.err = a.rec.apply(bg, d, record.Started())
		a.written = applied(a.out, a.err)
		if a.out == record.Canceled && a.err == nil && stop != nil {
			stop()
		}
	})
	return a
}

// settle ends the lazy start: it stops it if it has not fired, or waits
// for it, and returns what its write found (Applied when it never ran).
// A lazy start that failed for Redis counts as not written: the outcome
// writes it.
func (a *attemptStart) settle() record.Outcome {
	if a.timer != nil {
		if !a.timer.Stop() { // fired: wait for its write
			<-a.fired
		}
		a.timer = nil
	}
	return a.out
}

// ensure makes sure the start is in the record before a step that must
// not follow a superseded run (scheduling a restart, dead-lettering).
func (a *attemptStart) ensure(ctx context.Context) (record.Outcome, error) {
	if out := a.settle(); out != record.Applied || a.written {
		return out, nil
	}
	out, err := a.rec.apply(ctx, a.d, record.Started())
	a.written = applied(out, err)
	return out, err
}

// apply records a change of the attempt (with its start).
func (a *attemptStart) apply(ctx context.Context, c record.Change) (record.Outcome, error) {
	if out := a.settle(); out != record.Applied {
		return out, nil
	}
	return a.rec.apply(ctx, a.d, c)
}
