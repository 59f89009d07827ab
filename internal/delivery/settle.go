package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// settle decides what the attempt a leads to, under the task's agent sp's
// policy, and takes that step: one method per decision.
func (p *Executor) settle(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, a *attemptResult) (answer error) {
	if err := p.prepareChildren(ctx, log, env, a); err != nil {
		return err
	}
	d := sp.policy.Decide(resilience.DecideInput{
		Verdict: a.call.verdict, Attempt: a.n, MaxAttempts: sp.maxAttempts,
		Backoff: sp.backoff, MaxRetryAfter: sp.maxRetryAfter,
	})
	overDeadline(env, sp, a, &d, time.Now())
	outcome := runOutcome(d.Action)
	defer func() { p.endRunSpan(env, a, cmp.Or(runEnd(answer), outcome), string(a.call.verdict.Class)) }()
	switch d.Action {
	case resilience.ActionRetry:
		return p.retry(ctx, log, env, sp, a, d.Delay)
	case resilience.ActionRequeue:
		return p.requeue(ctx, log, env, a)
	case resilience.ActionRestart:
		return p.restart(ctx, log, env, sp, a)
	case resilience.ActionSucceed:
		if a.call.wait != nil { // the agent suspended the run: not a failure
			outcome = runSuspended
			return p.suspend(ctx, log, env, a)
		}
		return p.succeed(ctx, log, env, a)
	default:
		if out, err := a.start.ensure(ctx); !applied(out, err) {
			return p.answer(ctx, log, env, out, err)
		}
		return p.deadLetter(ctx, log, env, a.report(p, env), d.Reason)
	}
}

// overDeadline reports whether the decision d for attempt a of env (by
// its agent sp's policy) gives way to the task's deadline at now: the
// deadline cut the attempt's call, or has passed, or the retry or the
// restart d would make would be due at or after it. It then turns d and
// a into the dead letter: reason deadline_exceeded, class timeout, the
// attempt's own failure kept in the error text.
func overDeadline(env *tasks.Envelope, sp *Spec, a *attemptResult, d *resilience.Decision, now time.Time) bool {
	if env.Deadline == 0 || d.Action == resilience.ActionSucceed || d.Action == resilience.ActionRequeue {
		return false
	}
	why := ""
	switch {
	case a.call.deadline:
		why = "while its attempt was running"
	case env.PastDeadline(now):
		why = "before its attempt ended"
	case d.Action == resilience.ActionRetry && env.PastDeadline(now.Add(d.Delay)):
		why = fmt.Sprintf("before its next attempt would be due (in %s)", d.Delay.Round(time.Millisecond))
	case d.Action == resilience.ActionRestart:
		delay, err := sp.restart.Delay(env.Restarts)
		if err != nil || !env.PastDeadline(now.Add(max(delay, d.Delay))) {
			return false
		}
		why = fmt.Sprintf("before its restart would be due (in %s)", max(delay, d.Delay).Round(time.Millisecond))
	default:
		return false
	}
	if !a.call.deadline {
		a.call.errText = Truncate(fmt.Sprintf("%s; the attempt failed with class %s: %s", deadlineText(env, why), a.call.verdict.Class, a.call.errText), 2000)
	}
	a.call.verdict.Class, a.call.verdict.By, a.call.verdict.Weak = resilience.Timeout, resilience.ByStructure, false
	*d = resilience.Decision{Action: resilience.ActionDeadLetter, Class: resilience.Timeout, Reason: ReasonDeadlineExceeded}
	return true
}

// suspend schedules the task's next run for when the agent's wait ends
// at the latest (waitDelay), records the suspend (the task waiting, the
// record moved to that run) and acks this run. The verdict is not a
// failure: no retry, no restart, no breaker count. A wait for a signal
// sent already resumes at once: its run is made pending (broker.Resume)
// right after the record says so. A children wait, stored before
// (prepareChildren, in settle), spawns its children once the record
// waits (spawnChildren).
func (p *Executor) suspend(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult) error {
	if out, err := a.start.ensure(ctx); !applied(out, err) {
		return p.answer(ctx, log, env, out, err)
	}
	bg := context.WithoutCancel(ctx)
	w, now := *a.call.wait, time.Now()
	delay := waitDelay(env, w, now)
	wj := waitJSON(w, now.Add(delay))
	next, err := p.restarts.ScheduleResume(bg, env, delay, wj)
	if err != nil {
		// Redis trouble: keep the task (a free retry) rather than lose it.
		log.Error("could not schedule the resume; retrying the hand-off", "err", err)
		p.awaitRedis(ctx, env.ID)
		return handBack(err)
	}
	failpoint("before_waiting_recorded") // test hook: crash between scheduling the resume and recording it (superseded)
	rw := record.Wait{JSON: wj, Signal: w.Signal, Resumes: next.Resumes}
	rep := a.report(p, env)
	out, ready, err := a.start.rec.wait(ctx, a.start.d, record.Waiting(rep, record.NextRun{Run: next.Run, Restarts: next.Restarts}, rw, delay))
	if err == nil && out != record.Applied {
		// Canceled (or superseded) between the schedule and its record:
		// the resumed run must not run.
		p.dropRun(ctx, next)
		return p.answer(ctx, log, env, out, nil)
	}
	p.resumeIfReady(bg, log, next, ready)
	if w.Children != nil {
		p.spawnChildren(bg, log, env, w)
	}
	p.metrics.suspends.WithLabelValues(p.metrics.agent(env.Agent), w.Kind()).Inc()
	log.Info("suspended", "event", "suspend", "kind", w.Kind(), "attempt", a.n, "resume", next.Resumes,
		"delay_ms", delay.Milliseconds(), "signal_sent", ready)
	return nil
}

// prepareChildren stores attempt a's children wait, when its call
// suspended with one, for the run the suspend's Waiting write moves the
// record to (tasks.Client.PrepareChildren: before that write, so that
// the children exist only for a parent that waits for them, and the
// children repair finds them). Specs the children check refuses turn
// the attempt into a logic_error failure ("invalid suspend: …"); a
// parent the store refuses (canceled, ended, superseded) is left to the
// Waiting write, which refuses it too. Redis trouble hands the delivery
// back.
func (p *Executor) prepareChildren(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult) error {
	w := a.call.wait
	if w == nil || w.Children == nil {
		return nil
	}
	err := errNoChildren
	if p.children != nil {
		_, err = p.children.PrepareChildren(context.WithoutCancel(ctx), env, env.Run+1, cmp.Or(w.Mode, record.ModeAll), childSpecs(w.Children))
	}
	switch {
	case err == nil || errors.Is(err, record.ErrChildrenRefused):
		return nil
	case errors.Is(err, tasks.ErrInvalidChildren):
		a.call.wait, a.call.verdict = nil, resilience.Verdict{Class: resilience.LogicError, By: resilience.ByStructure}
		a.call.errText = Truncate(fmt.Sprintf("%v: %v", agent.ErrInvalidSuspend, err), 2000)
		return nil
	}
	log.Error("could not store the children wait; retrying the hand-off", "err", err)
	p.awaitRedis(ctx, env.ID)
	return handBack(err)
}

// errNoChildren refuses a children wait of a worker built without child
// tasks (Deps.Children nil).
var errNoChildren = fmt.Errorf("%w: this worker makes no child tasks", tasks.ErrInvalidChildren)

// spawnChildren enqueues the children of env's wait w once its Waiting
// write is in (tasks.Client.SpawnChildren: idempotent by child ID). A
// child it could not enqueue is left to the children repair, which
// enqueues the children of a waiting parent that do not exist.
func (p *Executor) spawnChildren(ctx context.Context, log *taskLog, env *tasks.Envelope, w agent.Wait) {
	ids, err := p.children.SpawnChildren(ctx, env, childSpecs(w.Children))
	if err != nil {
		log.Warn("could not enqueue every child; the children repair will", "spawned", len(ids), "children", len(w.Children), "err", err)
	}
}

// childSpecs are a children wait's children as package tasks takes them
// (agent.Child has tasks.Request's shape, with Name; Wait.Validate
// refused In and FailIfUnavailable).
func childSpecs(kids []agent.Child) []tasks.ChildSpec {
	out := make([]tasks.ChildSpec, len(kids))
	for i, c := range kids {
		out[i] = tasks.ChildSpec{ID: c.ID, Name: c.Name, Agent: c.Agent, Action: c.Action, Params: c.Params,
			CorrelationID: c.CorrelationID, Queue: c.Queue, Tenant: c.Tenant, Priority: c.Priority,
			Deadline: c.Deadline, Notify: c.Notify, MaxTokens: c.MaxTokens, MaxCostUSD: c.MaxCostUSD}
	}
	return out
}

// waitDelay is how long the run suspended at now with wait w waits at
// the latest (agent.Wait.Delay), cut to the time left to env's deadline:
// the resumed run then finds the deadline passed and dead-letters.
func waitDelay(env *tasks.Envelope, w agent.Wait, now time.Time) time.Duration {
	delay := w.Delay(now)
	if env.Deadline != 0 {
		delay = min(delay, max(env.DeadlineTime().Sub(now), 0))
	}
	return delay
}

// waitJSON is the record's wait (record.Wait.JSON): w's kind and fields
// on the wire (a children wait's children as their count, and its mode),
// and when its run is due.
func waitJSON(w agent.Wait, due time.Time) json.RawMessage {
	b, _ := json.Marshal(w)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["kind"], m["due"] = w.Kind(), due.UTC().Format(time.RFC3339Nano)
	if w.Children != nil { // the record keeps the children (record.Store.SetChildren): here their count
		m["children"], m["mode"] = len(w.Children), cmp.Or(w.Mode, record.ModeAll)
	}
	out, _ := json.Marshal(m)
	return out
}

// runOutcome is the outcome of a run whose attempt was settled with
// action; "" when the run goes on (a retry, a requeue at shutdown).
func runOutcome(action resilience.Action) string {
	switch action {
	case resilience.ActionSucceed:
		return runSucceeded
	case resilience.ActionRestart:
		return runRestarting
	case resilience.ActionRetry, resilience.ActionRequeue:
		return ""
	}
	return runDeadLettered
}

// succeed records the attempt's success and acks the task; the write may
// ride asynq's ack (record.go).
func (p *Executor) succeed(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult) error {
	if out := a.start.settle(); out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	out, rode, err := p.rec.succeed(ctx, a.start.d, record.Succeeded(a.report(p, env), a.call.data))
	if !applied(out, err) {
		return p.answer(ctx, log, env, out, err)
	}
	if !rode {
		p.successes.count(a.start.d, out)
	}
	p.metrics.ended(env, "succeeded")
	p.childEnded(ctx, log, env, tasks.ChildEnd{State: record.StateSucceeded, Result: a.call.data})
	failpoint("after_success_recorded") // test hook: crash before asynq acks a success
	return nil
}

// retry records that the attempt failed and the next is due after delay,
// and asks asynq to retry the task then. A retry whose write Redis did not
// take is still a retry: asynq counts the failed delivery, and the next
// delivery's attempt number counts it in the record.
func (p *Executor) retry(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, a *attemptResult, delay time.Duration) error {
	rep := a.report(p, env)
	out, err := a.start.apply(ctx, record.Retrying(rep, delay, time.Now().Add(delay)))
	if err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	p.metrics.retries.WithLabelValues(p.metrics.agent(env.Agent), rep.ErrorClass).Inc()
	log.Warn("retrying", "event", "retry", "class", rep.ErrorClass, "attempt", a.n,
		"max_attempts", sp.maxAttempts, "delay_ms", delay.Milliseconds(), "error", rep.Error)
	return retryAfter(delay, rep.Error)
}

// requeue puts back an attempt the worker's shutdown cut, without using
// an attempt. An attempt cut because its task was canceled (the record
// refuses the put-back) is acked instead.
func (p *Executor) requeue(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult) error {
	if out, err := a.start.apply(ctx, record.Interrupted(a.report(p, env))); err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	log.Info("attempt interrupted by shutdown; task put back without using an attempt", "attempt", a.n)
	return putBack()
}

// restart schedules the task's next run after its restart delay (at least
// the backend's Retry-After), records it and acks this run; a task that
// cannot restart is dead-lettered with the reason.
func (p *Executor) restart(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, a *attemptResult) error {
	if out, err := a.start.ensure(ctx); !applied(out, err) {
		return p.answer(ctx, log, env, out, err)
	}
	bg := context.WithoutCancel(ctx)
	rep := a.report(p, env)
	next, delay, err := p.restarts.ScheduleAfter(bg, env, sp.restart, a.call.verdict.RetryAfter)
	if err != nil {
		reason := restart.Reason(err)
		if reason == "" {
			// Redis trouble: keep the task (a free retry) rather than lose it.
			log.Error("could not schedule restart; retrying the hand-off", "err", err)
			p.awaitRedis(ctx, env.ID)
			return handBack(err)
		}
		if answer := p.deadLetter(bg, log, env, rep, reason); answer != nil {
			return answer
		}
		return acked(runDeadLettered)
	}
	failpoint("before_restart_recorded") // test hook: crash between scheduling and recording
	out, err := a.start.apply(ctx, record.Restarting(rep, record.NextRun{Run: next.Run, Restarts: next.Restarts}, delay))
	if err == nil && out != record.Applied {
		// Canceled (or superseded) between the schedule and its record:
		// the restart must not run.
		p.dropRun(ctx, next)
		return p.answer(ctx, log, env, out, nil)
	}
	p.metrics.restarts.WithLabelValues(p.metrics.agent(env.Agent), rep.ErrorClass).Inc()
	p.metrics.ended(env, "restarted")
	if env.Restarts > 0 {
		p.metrics.restartResults.WithLabelValues(p.metrics.agent(env.Agent), "restarted").Inc()
	}
	log.Warn("restarting later", "event", "restart", "class", rep.ErrorClass, "attempt", a.n,
		"restart", next.Restarts, "delay_ms", delay.Milliseconds(), "error", rep.Error)
	failpoint("after_restart_scheduled") // test hook: crash before asynq acks this run
	return nil
}
