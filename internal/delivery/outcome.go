package delivery

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// What an attempt leaves for settle: its result (attemptResult, the
// kinds of attempt) and its start in the task record (attemptStart), which
// the attempt writes and settle's steps settle.

// attemptKind is what became of an attempt.
type attemptKind int

const (
	// attemptNotRun: the delivery must not run (stale, already ended,
	// canceled, Redis away): answer is ProcessTask's.
	attemptNotRun attemptKind = iota
	// attemptCalled: the agent was called and answered (a result or a
	// failure, in call): settle decides what follows.
	attemptCalled
)

// attemptResult is the outcome of one attempt: its kind, and for a called
// attempt what settle needs.
type attemptResult struct {
	kind   attemptKind
	answer error         // attemptNotRun: ProcessTask's answer
	n      int           // the attempt's number within its run
	start  *attemptStart // the attempt's start in the record
	served *Spec         // the agent that served the attempt's last call
	why    string        // why the call went to served, a fallback agent ("": the task's agent)
	call   callResult
}

// report is what the attempt's events say of its last call.
func (a *attemptResult) report(p *Executor, env *tasks.Envelope) record.Attempt {
	rep := a.call.report(env, a.served, a.n, p.workerID)
	rep.Fallback = a.why
	return rep
}

// callResult is the outcome of one call of an agent.
type callResult struct {
	data    json.RawMessage
	verdict resilience.Verdict
	errText string
	elapsed time.Duration
	// deadline: the task's deadline cut the call (class timeout).
	deadline bool
	// wait: the agent suspended the run with this wait (checked: a wait
	// refused is a logic_error verdict instead).
	wait *agent.Wait
	// usage is what the call reported it used, priced (zero: nothing
	// reported), and system the provider its reply's shape names.
	usage  usage.Usage
	system string
	// status is the failure's HTTP status or exec code (0: none), read
	// only for a weak verdict (noteWeak).
	status int
}

// report is what the events of the call, attempt n of env's run, served
// by agent served, say of it.
func (c callResult) report(env *tasks.Envelope, served *Spec, n int, worker string) record.Attempt {
	return record.Attempt{Attempt: n, Restart: env.Restarts, Agent: served.name, Worker: worker,
		ErrorClass: string(c.verdict.Class), ClassifiedBy: string(c.verdict.By), Error: c.errText, Duration: c.elapsed, Usage: c.usage}
}

// applied reports whether a write was applied.
func applied(out record.Outcome, err error) bool { return err == nil && out == record.Applied }

// beginGrace is how long a first delivery's call may run before its start
// is written to the task record. A call that ends sooner has its start
// written together with its outcome (one write instead of two); a longer
// one shows as "active" from beginGrace on. 100 ms: a quick tool or a
// 50 ms HTTP call (a cached or small model's answer) ends within it and
// costs one write; a model's call of a second or more shows active a
// tenth of a second in (#40: at 50 ms, a 50 ms call paid the second
// write every time).
const beginGrace = 100 * time.Millisecond

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
// Its methods run on the handler's goroutine; the lazy start (fire) runs
// on a timer's, and fired orders its outcome before settle reads it.
type attemptStart struct {
	rec completer
	d   record.Delivery

	// The lazy start: the delivery's context (its values: the write
	// outlives its cancellation) and what stops the attempt's agent.
	ctx  context.Context
	stop func()

	timer *time.Timer    // the lazy start; nil once settled or when begun at once
	fired sync.WaitGroup // done when the lazy start has returned
	out   record.Outcome
	err   error
	// written: the start is in the record.
	written bool

	// steps are the task's steps: those read at the start (beginNow) and
	// those the attempt's calls recorded since (a fallback call of the
	// attempt gets them too); under mu, which the calls' step writers
	// share.
	mu    sync.Mutex
	steps map[string]json.RawMessage

	// signals, wait and children are what a later run's start read
	// (started): the task's signals, the wait that ended and a children
	// wait's children, handed to every call.
	signals  map[string]json.RawMessage
	wait     *agent.WaitResult
	children []agent.ChildEnd
}

// beginNow writes the start now (a redelivery, a later run); a start that
// is not Applied means the delivery must not run. It reads the task's
// steps when the record counts some (completer.start): a first delivery
// (beginLazy) has none.
func beginNow(ctx context.Context, rec completer, d record.Delivery) (*attemptStart, started, record.Outcome, error) {
	out, got, err := rec.start(ctx, d)
	return &attemptStart{rec: rec, d: d, written: applied(out, err), steps: got.steps, signals: got.signals, wait: got.wait,
			children: got.children},
		got, out, err
}

// beginLazy schedules the start's write beginGrace from now (a first
// delivery). When it finds the task canceled (a cancel that came as the
// delivery was dequeued, whose stop message the worker missed), it calls
// stop, which ends the attempt's context: the agent is stopped.
//
// Its write is record.Store.Apply's like every change's, and the worker's
// store runs it through the worker's group-committing redisx.Batcher (the
// store's runner, worker.New): the starts of concurrent deliveries share
// pipelined round trips (measured at 50 ms calls, concurrency 200: one
// EVALSHA a task, about 0.2 round trips a task), without waiting for one
// another beyond the Batcher's linger.
func beginLazy(ctx context.Context, rec completer, d record.Delivery, stop func()) *attemptStart {
	a := &attemptStart{rec: rec, d: d, ctx: ctx, stop: stop}
	a.fired.Add(1)
	a.timer = time.AfterFunc(beginGrace, a.fire)
	return a
}

// fire is the lazy start's write, on its timer's goroutine.
func (a *attemptStart) fire() {
	growStack() // a timer's goroutine, new
	defer a.fired.Done()
	a.out, a.err = a.rec.apply(context.WithoutCancel(a.ctx), a.d, record.Started())
	a.written = applied(a.out, a.err)
	if a.out == record.Canceled && a.err == nil && a.stop != nil {
		a.stop()
	}
}

// settle ends the lazy start: it stops it if it has not fired, or waits
// for it, and returns what its write found (Applied when it never ran).
// A lazy start that failed for Redis counts as not written: the outcome
// writes it.
func (a *attemptStart) settle() record.Outcome {
	if a.timer != nil {
		if !a.timer.Stop() { // fired: wait for its write
			a.fired.Wait()
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
