package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// attemptResult is the outcome of one attempt, ready to settle.
type attemptResult struct {
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

// attempt makes one attempt of env with the agent g admitted: it records
// the attempt's start (see attemptStart) and calls the agent; a failure
// whose class falls back (by the task's agent sp's table) goes at once to
// the next fallback agent whose breaker admits it, within this attempt,
// each call its own history event. It returns nil and ProcessTask's answer
// when the delivery must not run (stale, already ended, canceled, Redis
// away).
func (p *Executor) attempt(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, g *admitted) (*attemptResult, error) {
	n := metaOf(ctx).attemptNumber()
	// The attempt's own context, which a lazy start that finds the task
	// canceled ends (see beginLazy).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	start, answer := p.startAttempt(ctx, log, env, g, n, stop)
	if start == nil {
		return nil, answer
	}
	cur := g
	for {
		c := p.call(ctx, log, env, cur, n)
		a := &attemptResult{n: n, start: start, served: cur.sp, why: cur.why, call: c}
		if c.verdict.Class == "" || cur.next >= len(sp.fallback) || ctx.Err() != nil || !sp.policy.FallsBack(c.verdict.Class) ||
			env.PastDeadline(time.Now()) {
			return a, nil
		}
		alt, _ := p.fallBack(ctx, log, sp, cur.next, string(c.verdict.Class))
		if alt == nil {
			return a, nil
		}
		if out, err := start.apply(ctx, record.CallFailed(a.report(p, env))); !applied(out, err) {
			p.releaseAdmitted(ctx, alt)
			answer := p.answer(ctx, log, env, out, err)
			if out == record.Canceled {
				// The agent ran (its attempt span points to the run's): the
				// run ended canceled.
				p.endRunSpan(env, a, runCanceled, string(c.verdict.Class))
			}
			return nil, answer
		}
		log.Warn("falling back", "event", "fallback", "from", cur.sp.name, "to", alt.sp.name, "class", c.verdict.Class,
			"attempt", n, "error", c.errText)
		cur = alt
	}
}

// startAttempt records the start of attempt n: lazily for a first
// delivery of a task's first run (beginLazy; stop ends the attempt if the
// task turns out canceled), fenced before the call for a redelivery or a
// later run (beginNow: a restart or requeue, whose task may have been
// canceled while it waited). A nil start means the delivery must not run;
// the answer is then ProcessTask's.
func (p *Executor) startAttempt(ctx context.Context, log *taskLog, env *tasks.Envelope, g *admitted, n int, stop func()) (*attemptStart, error) {
	d := delivery(env, n)
	if n == 1 && env.Run == 0 {
		return p.beginLazy(ctx, d, stop), nil
	}
	start, out, err := p.beginNow(ctx, d)
	if applied(out, err) {
		return start, nil
	}
	p.releaseAdmitted(ctx, g)
	return nil, p.answer(ctx, log, env, out, err)
}

// callResult is the outcome of one call of an agent.
type callResult struct {
	data    json.RawMessage
	verdict resilience.Verdict
	errText string
	elapsed time.Duration
	// deadline: the task's deadline cut the call (class timeout).
	deadline bool
	// usage is what the call reported it used, priced (zero: nothing
	// reported), and system the provider its reply's shape names.
	usage  usage.Usage
	system string
}

// report is what the events of the call, attempt n of env's run, served
// by agent served, say of it.
func (c callResult) report(env *tasks.Envelope, served *Spec, n int, worker string) record.Attempt {
	return record.Attempt{Attempt: n, Restart: env.Restarts, Agent: served.name, Worker: worker,
		ErrorClass: string(c.verdict.Class), Error: c.errText, Duration: c.elapsed, Usage: c.usage}
}

// call runs one call of agent g.sp (admitted by g) under its timeout,
// classifies its outcome and records it in its own breaker, its limits,
// the metrics and the alerter. The Request names the agent called (sp), which for a
// fallback is not the task's agent.
func (p *Executor) call(ctx context.Context, log *taskLog, env *tasks.Envelope, g *admitted, attempt int) callResult {
	sp, adm := g.sp, g.adm
	timeout, cut := callDeadline(env, callTimeout(ctx, sp.timeout, time.Now()), time.Now())
	got := &agent.Reply{}
	obsCtx, reply := p.observeReply(agent.WithQuickStop(ctx, p.quickStop), log, sp, got)
	stamp := p.newStamper(ctx, sp, g.lim)
	stamp.late() // the call leaves now: restamp its start if the worker stalled since its admission
	// agent.WithTimeout: a runner's timeout failure names timeout itself.
	runCtx, cancel := agent.WithTimeout(stamp.trace(obsCtx), timeout)
	started := time.Now()
	traceparent, tracestate := agentTrace(ctx, env)
	failpoint("call_started") // test hook: die as the call starts, before a first delivery's lazy start
	// The call's live output, written for this delivery (output.go).
	output := p.newOutput(ctx, log, delivery(env, attempt))
	data, runErr := sp.runner.Run(agent.WithLogger(runCtx, log.base), agent.Request{
		TaskID: env.ID, Agent: sp.name, Action: env.Action, Params: env.Params,
		CorrelationID: env.CorrelationID, Attempt: attempt, Restart: env.Restarts,
		Traceparent: traceparent, Tracestate: tracestate, Emit: output.emit,
	})
	elapsed := time.Since(started)
	output.close() // before the outcome is written: output precedes it
	// Only the worker's shutdown cancels ctx (context.Canceled); asynq's
	// deadline on ctx (DeadlineExceeded) is a timeout like the agent's own.
	timedOut := runCtx.Err() == context.DeadlineExceeded && ctx.Err() != context.Canceled
	cancel()
	used, system := p.meter.read(env.Params, data, runErr, *got)
	p.afterLimitedCall(ctx, log, sp, g.lim, used.TotalTokens, reply)
	p.meter.used(env, p.metrics.agent(sp.name), used, time.Now(), p.usage)
	p.debitBudgets(ctx, log, env, sp, used)
	p.metrics.duration.WithLabelValues(p.metrics.agent(sp.name)).Observe(elapsed.Seconds())

	var v resilience.Verdict
	switch {
	case runErr == nil:
	case ctx.Err() == context.Canceled:
		v.Class = resilience.Canceled
	case timedOut && cut:
		v.Class = resilience.Timeout
		runErr = fmt.Errorf("%s: %w", deadlineText(env, "while its attempt was running: the call was stopped"), runErr)
	case timedOut:
		v.Class = resilience.Timeout
		if !strings.Contains(runErr.Error(), "timed out") {
			runErr = fmt.Errorf("agent timed out after %s: %w", timeout.Round(time.Millisecond), runErr)
		}
	default:
		v = p.classify(runErr)
		if v.Class == "" {
			v.Class = resilience.ProviderError
		}
	}

	// Breaker bookkeeping, in the breaker of the agent called.
	out := breakerOutcome(sp.policy, v.Class, reply)
	deadlineCut := timedOut && cut
	if deadlineCut {
		out = breaker.OutcomeIgnore // the caller's deadline says nothing of the agent's health
	}
	p.recordBreaker(ctx, log, env, sp, adm, out)
	p.metrics.attempts.WithLabelValues(p.metrics.agent(sp.name), string(v.Class), callOutcome(v.Class)).Inc()
	p.chartAttempt(v.Class)
	if out == breaker.OutcomeFailure || (v.Class != "" && v.Class != resilience.Canceled && !deadlineCut) {
		p.onFailure(sp.name)
	}
	errText := ""
	if runErr != nil {
		errText = Truncate(runErr.Error(), 2000)
	}
	return callResult{data: data, verdict: v, errText: errText, elapsed: elapsed, deadline: deadlineCut, usage: used, system: system}
}

// recordBreaker records a call's outcome out in the breaker of the agent
// called (sp, admitted by adm), unless the gate is off (WithoutBreaker).
func (p *Executor) recordBreaker(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, adm breaker.Admission, out breaker.Outcome) {
	if p.noGate {
		return
	}
	st, err := p.breakers.Record(ctx, sp.breakerKey, sp.breaker, adm, out, breaker.ForTask(env.ID))
	switch {
	case errors.Is(err, breaker.ErrStaleAdmission):
		log.Debug("breaker result from an older generation ignored", "err", err)
	case err != nil:
		log.Warn("breaker record failed", "err", err)
	case st != adm.State:
		p.metrics.breakerState.WithLabelValues(sp.breakerKey).Set(StateValue(st))
		log.Info("breaker changed state", "breaker_key", sp.breakerKey, "state", st)
	}
}

// chartAttempt counts an attempt whose failure class is class (""
// succeeded) in the console's per-minute charts; a canceled one is not
// counted.
func (p *Executor) chartAttempt(class resilience.Class) {
	switch callOutcome(class) {
	case "success":
		p.charts.Succeeded()
	case "failure":
		p.charts.Failed()
	}
}

// callOutcome is the outcome label of a call whose failure class is class
// ("" succeeded): success, failure or canceled.
func callOutcome(class resilience.Class) string {
	switch class {
	case "":
		return "success"
	case resilience.Canceled:
		return "canceled"
	}
	return "failure"
}

// breakerOutcome is what a call whose failure class is class (""
// succeeded) tells the breaker: a success; a counted failure when the
// policy counts the class; and nothing (OutcomeIgnore) for a canceled
// call, a failure the policy does not count (a caller's error:
// invalid_request, context_length, … — it says nothing of the backend's
// health either way), or a rate_limited reply that said when the key
// resets (back-pressure: it paused the key, see pauses.go; reply is the
// call's observed reply, nil when none was observed).
func breakerOutcome(pol resilience.Policy, class resilience.Class, reply *agent.Reply) breaker.Outcome {
	switch {
	case class == "":
		return breaker.OutcomeSuccess
	case class == resilience.Canceled:
		return breaker.OutcomeIgnore
	case class == resilience.RateLimited && reply != nil && backPressure(*reply):
		return breaker.OutcomeIgnore
	case pol.Rule(class).CountsForBreaker:
		return breaker.OutcomeFailure
	}
	return breaker.OutcomeIgnore
}

// backPressure reports whether a reply says when its key resets.
func backPressure(r agent.Reply) bool {
	_, _, ok := limit.ExhaustedFor(r.Status, r.Header, time.Now())
	return ok
}

// callTimeout is the timeout of one call of an agent whose own timeout is
// own, at now: own, shortened when the delivery's deadline (asynq's, on ctx)
// leaves less than that plus tasks.HandoffGrace, so that the call times out
// as an attempt (class timeout) and the worker still records its outcome
// before asynq gives up on the delivery. Runs agentq enqueues have a
// deadline of tasks.RunTimeout, which the config keeps above every chain;
// only tasks enqueued otherwise (asynq's 30-minute default) are shortened.
func callTimeout(ctx context.Context, own time.Duration, now time.Time) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return own
	}
	left := dl.Sub(now) - tasks.HandoffGrace
	if left < own {
		return max(left, 0)
	}
	return own
}
