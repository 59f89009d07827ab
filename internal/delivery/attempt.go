package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/internal/unmatched"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// attempt makes one attempt of env with the agent g admitted, in its
// span (the attempt's span, under the run's: endRunSpan).
func (p *Executor) attempt(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, g *admitted) *attemptResult {
	actx, span := p.startAttemptSpan(ctx, env, sp, g)
	a := p.calls(actx, log, env, sp, g)
	p.endAttemptSpan(span, env, sp, a.called())
	return a
}

// calls makes one attempt of env with the agent g admitted: it records
// the attempt's start (see attemptStart) and calls the agent; a failure
// whose class falls back (by the task's agent sp's table) goes at once to
// the next fallback agent whose breaker admits it, within this attempt,
// each call its own history event. An attempt that must not run (stale,
// already ended, canceled, Redis away) is attemptNotRun.
func (p *Executor) calls(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, g *admitted) *attemptResult {
	n := metaOf(ctx).attemptNumber()
	// The attempt's own context, which a lazy start that finds the task
	// canceled ends (see beginLazy).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	start, answer := p.startAttempt(ctx, log, env, g, n, stop)
	if start == nil {
		return notRun(answer)
	}
	cur := g
	for {
		c := p.call(ctx, log, env, cur, n, start)
		a := &attemptResult{kind: attemptCalled, n: n, start: start, served: cur.sp, why: cur.why, call: c}
		if c.verdict.Class == "" || cur.next >= len(sp.fallback) || ctx.Err() != nil || !sp.policy.FallsBack(c.verdict.Class) ||
			env.PastDeadline(time.Now()) {
			return a
		}
		alt, _ := p.fallBack(ctx, log, sp, cur.next, string(c.verdict.Class))
		if alt == nil {
			return a
		}
		if out, err := start.apply(ctx, record.CallFailed(a.report(p, env))); !applied(out, err) {
			p.releaseAdmitted(ctx, alt)
			answer := p.answer(ctx, log, env, out, err)
			if out == record.Canceled {
				// The agent ran (its attempt span points to the run's): the
				// run ended canceled.
				p.endRunSpan(env, a, runCanceled, string(c.verdict.Class))
			}
			return notRun(answer)
		}
		log.Warn("falling back", "event", "fallback", "from", cur.sp.name, "to", alt.sp.name, "class", c.verdict.Class,
			"attempt", n, "error", c.errText)
		cur = alt
	}
}

// notRun is an attempt that must not run, answered with answer.
func notRun(answer error) *attemptResult { return &attemptResult{kind: attemptNotRun, answer: answer} }

// startAttempt records the start of attempt n: lazily for a first
// delivery of a task's first run (beginLazy; stop ends the attempt if the
// task turns out canceled), fenced before the call for a redelivery or a
// later run (beginNow: a restart or requeue, whose task may have been
// canceled while it waited). A nil start means the delivery must not run;
// the answer is then ProcessTask's.
func (p *Executor) startAttempt(ctx context.Context, log *taskLog, env *tasks.Envelope, g *admitted, n int, stop func()) (*attemptStart, error) {
	d := delivery(env, n)
	d.Worker = p.workerID // a start that finds another delivery's attempt active records it lost
	if n == 1 && env.Run == 0 {
		return beginLazy(ctx, p.rec, d, stop), nil
	}
	start, got, out, err := beginNow(ctx, p.rec, d)
	if applied(out, err) {
		if got.resumed {
			p.metrics.resumes.WithLabelValues(got.outcome).Inc()
		}
		return start, nil
	}
	p.releaseAdmitted(ctx, g)
	return nil, p.answer(ctx, log, env, out, err)
}

// call runs one call of agent g.sp (admitted by g) under its timeout,
// classifies its outcome and records it in its own breaker, its limits,
// the metrics and the alerter. The Request names the agent called (sp), which for a
// fallback is not the task's agent, and carries the steps known to the
// attempt (start); the steps the call records are written as they come
// (stepWriter), and one that is refused fails the call.
func (p *Executor) call(ctx context.Context, log *taskLog, env *tasks.Envelope, g *admitted, attempt int, start *attemptStart) callResult {
	sp, adm := g.sp, g.adm
	timeout, cut := callDeadline(env, callTimeout(ctx, sp.timeout, time.Now()), time.Now())
	got := &agent.Reply{}
	obsCtx, reply := p.observeReply(agent.WithQuickStop(ctx, p.quick), log, sp, got)
	stamp := p.newStamper(ctx, sp, g.lim)
	stamp.late() // the call leaves now: restamp its start if the worker stalled since its admission
	// agent.WithTimeout: a runner's timeout failure names timeout itself.
	runCtx, cancel := agent.WithTimeout(stamp.trace(obsCtx), timeout)
	started := time.Now()
	failpoint("call_started") // test hook: die as the call starts, before a first delivery's lazy start
	// The call's live output, written for this delivery (outputWriter).
	output := newOutput(ctx, p.rec, log, delivery(env, attempt))
	steps := &stepWriter{p: p, log: log, env: env, sp: sp, out: output, start: start, stop: cancel}
	data, runErr := sp.runner.Run(agent.WithLogger(runCtx, log.base), request(ctx, env, sp, attempt, output.emit, steps))
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
	label := p.metrics.agent(sp.name)
	series := p.metrics.byAgent.get(label, func() agentSeries {
		return agentSeries{duration: p.metrics.duration.WithLabelValues(label),
			succeeded: p.metrics.attempts.WithLabelValues(label, "", outcomeSuccess)}
	})
	series.duration.Observe(elapsed.Seconds())

	wait, runErr := suspended(runErr, time.Now())
	v, runErr := p.verdict(ctx, env, runErr, steps.failed(), timedOut, cut, timeout)

	// Breaker bookkeeping, in the breaker of the agent called.
	out := breakerOutcome(sp.policy, v.Class, reply)
	deadlineCut := timedOut && cut
	if deadlineCut {
		out = breaker.OutcomeIgnore // the caller's deadline says nothing of the agent's health
	}
	p.recordBreaker(ctx, log, env, sp, adm, out)
	if v.Class == "" {
		series.succeeded.Inc()
	} else {
		p.metrics.attempts.WithLabelValues(label, string(v.Class), callOutcome(v.Class)).Inc()
	}
	p.chartAttempt(v.Class)
	if out == breaker.OutcomeFailure || (v.Class != "" && v.Class != resilience.Canceled && !deadlineCut) {
		p.onFailure(sp.name)
	}
	errText := ""
	if runErr != nil {
		errText = Truncate(runErr.Error(), 2000)
	}
	c := callResult{data: data, verdict: v, errText: errText, elapsed: elapsed, deadline: deadlineCut, usage: used, system: system,
		wait: wait}
	if v.Weak && v.Class != "" {
		c.status = failureStatus(runErr)
		p.noteWeak(ctx, log, env, sp, attempt, c)
	}
	return c
}

// failureStatus is err's HTTP status or exec code (resilience.Failure's
// Status), 0 when it has none.
func failureStatus(err error) int {
	var f *resilience.Failure
	if errors.As(err, &f) {
		return f.Status
	}
	return 0
}

// weakWriteTimeout bounds noteWeak's write: it is best effort.
const weakWriteTimeout = 2 * time.Second

// noteWeak counts a failed call whose verdict was weak, c, of attempt n
// of env by agent sp (agentq_classify_weak_total) and keeps it in the
// unmatched stream for `inspector classify --unmatched`, best effort: a
// write Redis refused is logged and the delivery goes on. A success or a
// failure decided by stronger evidence never gets here: it costs nothing.
func (p *Executor) noteWeak(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, n int, c callResult) {
	p.metrics.classifyWeak.WithLabelValues(p.metrics.agent(sp.name), string(c.verdict.By)).Inc()
	if p.unmatched == nil {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), weakWriteTimeout)
	defer cancel()
	err := p.unmatched.Add(wctx, unmatched.Entry{At: p.now(), TaskID: env.ID, Agent: sp.name, Attempt: n,
		ErrorClass: string(c.verdict.Class), ClassifiedBy: string(c.verdict.By), Status: c.status, Error: c.errText})
	if err != nil {
		log.Warn("could not keep a weak verdict for inspector classify --unmatched", "class", c.verdict.Class,
			"classified_by", c.verdict.By, "err", err)
	}
}

// suspended reads a call's suspend (runErr an *agent.SuspendError) at
// now: its wait, checked (agent.Wait.Validate), and no error; a wait
// refused is a logic_error failure. Any other runErr is returned as it is.
func suspended(runErr error, now time.Time) (*agent.Wait, error) {
	var se *agent.SuspendError
	if !errors.As(runErr, &se) {
		return nil, runErr
	}
	if err := se.Wait.Validate(now); err != nil {
		return nil, &resilience.Failure{Err: err, Class: resilience.LogicError, Text: err.Error()}
	}
	w := se.Wait
	return &w, nil
}

// verdict classifies a call's outcome: runErr, the run's error; stepErr,
// a step the call recorded that was refused (a cap, a run no longer
// live: logic_error, whatever the call answered); timedOut and cut, the
// call timed out (cut: by the task's deadline) after timeout. It returns
// the error text's error, with what it adds. A verdict the worker makes
// itself (a refused step, a cancel, a timeout) is decided by structure;
// a failure the classifier left without a class falls to the default.
func (p *Executor) verdict(ctx context.Context, env *tasks.Envelope, runErr, stepErr error, timedOut, cut bool, timeout time.Duration) (resilience.Verdict, error) {
	var v resilience.Verdict
	switch {
	case stepErr != nil:
		v.Class, runErr = resilience.LogicError, stepErr
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
			v.Class, v.By, v.Weak = resilience.ProviderError, resilience.ByDefault, true
		}
		return v, runErr
	}
	if v.Class != "" {
		v.By = resilience.ByStructure
	}
	return v, runErr
}

// request is what agent sp is asked for attempt n of env: the one place
// an agent.Request is built. emit takes the call's live output, steps its
// steps (and has those known to the attempt).
func request(ctx context.Context, env *tasks.Envelope, sp *Spec, n int, emit func(string, json.RawMessage), steps *stepWriter) agent.Request {
	traceparent, tracestate := agentTrace(ctx, env)
	return agent.Request{
		TaskID: env.ID, Agent: sp.name, Action: env.Action, Params: env.Params,
		CorrelationID: env.CorrelationID, Attempt: n, Restart: env.Restarts,
		Traceparent: traceparent, Tracestate: tracestate, Emit: emit,
		Steps: steps.start.known(), RecordStep: steps.record,
		Resume: env.Resumes, Wait: steps.start.wait, Signals: steps.start.signals, Children: steps.start.children,
	}
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

// callDeadline is the timeout of a call of env's agent whose own timeout
// (after callTimeout) is timeout, at now: the time left to env's deadline
// when that is shorter (cut is then true).
func callDeadline(env *tasks.Envelope, timeout time.Duration, now time.Time) (time.Duration, bool) {
	if env.Deadline == 0 {
		return timeout, false
	}
	if left := env.DeadlineTime().Sub(now); left < timeout {
		return max(left, 0), true
	}
	return timeout, false
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
		p.metrics.breakerState.Set(sp.breakerKey, st)
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
		return outcomeSuccess
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
// resets (back-pressure: it paused the key, see pauseView; reply is the
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

// Provider limits in the delivery (config agents.NAME.limits; the limiter
// is limit.Limiter). After its breaker admits a call, the agent's
// limits must admit it too, in one Redis script for the whole fleet. A
// call over a limit is not made:
//
//   - a fallback agent whose breaker and limits admit it serves the call;
//   - else the task waits in its worker, at most limitWaitMax, for
//     capacity: the tasks of one limits key wait in a line per worker
//     process, whose head alone asks Redis, when the limiter said a slot
//     frees (plus a little jitter), or as soon as a call of the key ends in
//     this process; the others wait their turn without asking Redis;
//   - a task that would wait longer is deferred (state deferred, no
//     attempt used, a history event naming the limit) until about when the
//     limiter says capacity frees, spread out by jitter.
//
// After the call its concurrency lease is released, the tokens of its
// reply's usage are debited, and a reply saying the key is exhausted
// (limit.ExhaustedFor) pauses the key fleet-wide.

// restampAfter is how late a limited call may leave after its admission
// before its start is moved to when it really left (limit.Limiter.
// Restamp): a worker process that stalls (CPU starvation, a long GC)
// between admitting a call and sending it would otherwise let it reach the
// provider in a later window than the limiter counted it in.
const restampAfter = 10 * time.Millisecond

// stamper restamps a limited call's start when it leaves late; its late
// method may run on the HTTP transport's goroutine (httptrace).
type stamper struct {
	p    *Executor
	ctx  context.Context
	sp   *Spec
	adm  limit.Admission
	mu   sync.Mutex
	last time.Time
}

// newStamper returns the stamper of a call admitted by a (nil when the
// call's start is not logged: no request limit).
func (p *Executor) newStamper(ctx context.Context, sp *Spec, a limit.Admission) *stamper {
	if sp.limits == nil || p.limiter == nil || a.Start == "" {
		return nil
	}
	return &stamper{p: p, ctx: context.WithoutCancel(ctx), sp: sp, adm: a, last: a.At}
}

// late restamps the start if the call leaves more than restampAfter after
// its admission (or its last restamp).
func (s *stamper) late() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.last) <= restampAfter {
		return
	}
	s.last = now
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	_ = s.p.limiter.Restamp(ctx, s.sp.limits.key, s.sp.limits.cfg, s.adm)
}

// trace returns ctx with an HTTP client trace that restamps the call's
// start when its request is written late (nil stamper: ctx).
func (s *stamper) trace(ctx context.Context) context.Context {
	if s == nil {
		return ctx
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { s.late() }})
}

// observeReply returns ctx with an observer of the call's reply, which
// it keeps in got (an exec agent's usage is read from it), and got again
// when sp has limits (nil otherwise: the limits' view of the reply). With
// limits, a reply saying the key is exhausted pauses it at once, as soon
// as its headers are in (before its body is read), so that the fleet
// stops calling as early as it can.
func (p *Executor) observeReply(ctx context.Context, log *taskLog, sp *Spec, got *agent.Reply) (context.Context, *agent.Reply) {
	if sp.limits == nil || p.limiter == nil {
		return agent.WithReplyObserver(ctx, func(r agent.Reply) { *got = r }), nil
	}
	return agent.WithReplyObserver(ctx, func(r agent.Reply) {
		*got = r
		p.pauseIfExhausted(ctx, log, sp, r)
	}), got
}

// pauseIfExhausted pauses sp's limits key fleet-wide when the reply says
// the key is exhausted (limit.ExhaustedFor).
func (p *Executor) pauseIfExhausted(ctx context.Context, log *taskLog, sp *Spec, r agent.Reply) {
	d, why, ok := limit.ExhaustedFor(r.Status, r.Header, time.Now())
	if !ok {
		return
	}
	until, extended, err := p.limiter.Pause(context.WithoutCancel(ctx), sp.limits.key, d, why)
	switch {
	case err != nil:
		log.Warn("could not pause the limits key", "limit_key", sp.limits.key, "err", err)
	case extended:
		p.pauses.paused(sp.limits.key, d)
		p.metrics.limitPauses.WithLabelValues(sp.limits.key).Inc()
		log.Info("provider says the key is exhausted: paused fleet-wide", "limit_key", sp.limits.key,
			"paused_until", until.Format(time.RFC3339Nano), "reason", why)
	}
}

// afterLimitedCall does a limited call's bookkeeping once it has ended:
// releases its lease and debits the tokens its reply used (tokens: the
// call's usage, meter.read; a pause was written when the reply came in:
// observeReply).
func (p *Executor) afterLimitedCall(ctx context.Context, log *taskLog, sp *Spec, a limit.Admission, tokens int64, reply *agent.Reply) {
	if sp.limits == nil || p.limiter == nil {
		return
	}
	bg := context.WithoutCancel(ctx)
	p.releaseLimit(bg, sp, a)
	if reply == nil || sp.limits.pauseOnly {
		return
	}
	if n := tokens; n > 0 {
		if _, err := p.limiter.Debit(bg, sp.limits.key, sp.limits.cfg, n); err != nil {
			log.Warn("could not debit tokens", "limit_key", sp.limits.key, "tokens", n, "err", err)
		}
	}
}

// debitBudgets debits one call's usage u — the call of env served by sp —
// from the tenant's budget and sp's. It is called once per call (in
// call, with the usage the meter read), as soon as the call has ended,
// before its outcome is recorded: a later admission anywhere in the fleet
// sees it. A debit Redis does not take is tried again while Redis is
// unavailable (untilRedis, as the outcome's write is): a Redis restart
// must not lose usage a cap counts on (a debit whose reply was lost may
// count twice: a cap errs on the safe side).
func (p *Executor) debitBudgets(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, u usage.Usage) {
	if p.budgets == nil || u.IsZero() {
		return
	}
	bg := context.WithoutCancel(ctx)
	if env.Root != "" && (env.TreeMaxTokens > 0 || env.TreeMaxCostUSD > 0) {
		if err := untilRedis(bg, func() error { return p.budgets.keeper.DebitTree(bg, env.Root, u) }); err != nil {
			log.Warn("could not debit the tree's usage", "root", env.Root, "tokens", u.TotalTokens, "err", err)
		}
	}
	if bs := p.budgets.of(env, sp); len(bs) > 0 {
		if err := untilRedis(bg, func() error { return p.budgets.keeper.Debit(bg, u, bs...) }); err != nil {
			log.Warn("could not debit budgets", "tokens", u.TotalTokens, "err", err)
		}
	}
}

// Tracing (package tracing): every attempt is a span (tracing.SpanAttempt)
// whose parent is its run's span (tracing.SpanRun, kind Consumer), and
// the run's span is a child of the producer's enqueue span, whose W3C
// context the envelope carries (env.Traceparent). The attempts of a run
// are separate asynq deliveries, maybe on other workers, so the run span
// has IDs every delivery can compute (tracing.RunSpanContext) and is
// written once, by the delivery that ends the run (succeeded, restarting,
// dead-lettered). Restarts copy the envelope, so every run of a task is a
// child of the same enqueue span, in the same trace. With the no-op
// tracer (tracing off) spans cost a no-op Start and no attribute is
// built; the agent then gets the producer's traceparent as it came.
// A worker whose provider is not Active (tracing off) skips all of it:
// no span, no allocation; the agent gets the envelope's context as is.

// startAttemptSpan starts the span of the attempt about to be made of env
// by the admitted agent g (the task's agent sp, or a fallback) as a child
// of the run's span; the returned context carries it to call (which passes
// its context to the agent).
func (p *Executor) startAttemptSpan(ctx context.Context, env *tasks.Envelope, sp *Spec, g *admitted) (context.Context, trace.Span) {
	if !p.traced {
		return ctx, nil
	}
	parent := tracing.Parse(env.Traceparent, env.Tracestate)
	run := tracing.RunSpanContext(parent, env.ID, env.EnqueuedAt, env.Run)
	ctx, span := p.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, run), tracing.SpanAttempt)
	if span.IsRecording() {
		n := metaOf(ctx).attemptNumber()
		span.SetAttributes(attribute.String(tracing.AttrTaskID, env.ID), attribute.String(tracing.AttrAgent, env.Agent),
			attribute.String(tracing.AttrAction, env.Action), attribute.Int(tracing.AttrAttempt, n),
			attribute.Int(tracing.AttrRestart, env.Restarts), attribute.Int(tracing.AttrRun, env.Run),
			attribute.String(tracing.AttrBreakerState, string(g.adm.State)))
		if g.sp != sp {
			span.SetAttributes(attribute.String(tracing.AttrFallbackAgent, g.sp.name))
		}
	}
	return ctx, span
}

// endAttemptSpan ends an attempt's span with its outcome (a nil: the
// delivery did not run, see attempt) and the usage its last call reported
// (spanUsage); a nil span (not traced) is none.
func (p *Executor) endAttemptSpan(span trace.Span, env *tasks.Envelope, sp *Spec, a *attemptResult) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		switch {
		case a == nil:
			span.SetAttributes(attribute.String(tracing.AttrOutcome, "not_run"))
		default:
			class := a.call.verdict.Class
			span.SetAttributes(attribute.Int(tracing.AttrAttempt, a.n), attribute.String(tracing.AttrErrorClass, string(class)))
			if a.served != sp {
				span.SetAttributes(attribute.String(tracing.AttrFallbackAgent, a.served.name))
			}
			if class != "" {
				span.SetStatus(codes.Error, a.call.errText)
			}
			spanUsage(span, env, a.call)
		}
	}
	span.End()
}

// agentTrace is the W3C trace context handed to the agent: the attempt
// span's (on ctx) when it records, else the producer's as the envelope
// carries it (the worker does not trace, or did not sample the task).
func agentTrace(ctx context.Context, env *tasks.Envelope) (traceparent, tracestate string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		return tracing.Format(span.SpanContext())
	}
	return env.Traceparent, env.Tracestate
}

// spanUsage sets the OpenTelemetry GenAI semantic-convention attributes of
// the call c that ended an attempt of env on its span: the tokens, the
// model the task's params asked for (gen_ai.request.model; the reply's
// when they name none) and the one the reply named (gen_ai.response.model),
// the provider when the reply's shape tells (gen_ai.system), and the cost
// when the model is priced (agentq.usage.cost_usd).
func spanUsage(span trace.Span, env *tasks.Envelope, c callResult) {
	u := c.usage
	if u.IsZero() {
		return
	}
	span.SetAttributes(attribute.Int64(tracing.AttrGenAIInputTokens, u.InputTokens),
		attribute.Int64(tracing.AttrGenAIOutputTokens, u.OutputTokens))
	if req := cmp.Or(usage.ModelOf(env.Params), u.Model); req != "" {
		span.SetAttributes(attribute.String(tracing.AttrGenAIRequestModel, req))
	}
	if u.Model != "" {
		span.SetAttributes(attribute.String(tracing.AttrGenAIResponseModel, u.Model))
	}
	if c.system != "" {
		span.SetAttributes(attribute.String(tracing.AttrGenAISystem, c.system))
	}
	if u.Priced {
		span.SetAttributes(attribute.Float64(tracing.AttrCostUSD, u.CostUSD))
	}
}

// Truncate cuts s to n bytes, marking the cut with an ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// attemptNumber is the delivery's attempt number within its run.
func (m meta) attemptNumber() int { return m.retried + 1 }

// paused notes a pause of d this process just set on key.
func (v *pauseView) paused(key string, d time.Duration) {
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys == nil {
		v.keys = map[string]pauseEntry{}
	}
	e := v.keys[key]
	if until := now.Add(d); until.After(e.until) {
		e.until = until
	}
	v.keys[key] = e
}

// releaseAdmitted gives back what a call that was never made holds: its
// breaker admission and its concurrency lease.
func (p *Executor) releaseAdmitted(ctx context.Context, g *admitted) {
	p.release(ctx, g.sp, g.adm)
	p.releaseLimit(ctx, g.sp, g.lim)
}

// releaseLimit gives back a concurrency lease and wakes the key's line.
func (p *Executor) releaseLimit(ctx context.Context, sp *Spec, a limit.Admission) {
	if sp.limits == nil || p.limiter == nil || a.Lease == "" {
		return
	}
	_ = p.limiter.Release(context.WithoutCancel(ctx), sp.limits.key, a)
	select {
	case p.lines.get(sp.limits.key).freed <- struct{}{}:
	default:
	}
}

// read returns what the call used, priced, and the system its reply's
// shape names: the ActionResponse's usage (reply.Usage) or the result's
// (data: a provider's reply or an assembled stream), else a failed HTTP
// reply's body (f.Text) when it reports usage. The model is the reply's,
// else the one the task's params name (Bedrock's replies name none).
func (mt *meter) read(params, data json.RawMessage, runErr error, reply agent.Reply) (usage.Usage, string) {
	u, system := usage.Of(data, reply.Usage)
	if se := (*agent.SuspendError)(nil); u.IsZero() && errors.As(runErr, &se) {
		u, system = usage.Of(nil, se.Usage) // an HTTP agent's suspend body's
	}
	var f *resilience.Failure
	if u.IsZero() && errors.As(runErr, &f) && f.Text != "" {
		u, system = usage.Parse([]byte(f.Text))
	}
	if u.IsZero() {
		return usage.Usage{}, ""
	}
	if u.Model == "" {
		u.Model = usage.ModelOf(params)
	}
	return mt.prices.Price(u), system
}

// model is the model label of u: the priced model's name, else
// usage.Other (the labels stay bounded whatever the replies say).
func (mt *meter) model(u usage.Usage) string {
	if name, _, ok := mt.prices.Match(u.Model); ok {
		return name
	}
	return usage.Other
}

// tokenKinds are agentq_tokens_total's kind labels, in the order of
// Metrics.tokensBy's children.
var tokenKinds = [...]string{"input", "output", "cached"}

// used counts a call's usage u (served by agent, for env's tenant) in the
// metrics and hands it to sink (the worker's: withUsageSink, by default
// the fleet's totals; nil: none); nothing for a call without usage.
func (mt *meter) used(env *tasks.Envelope, agentLabel string, u usage.Usage, at time.Time, sink usage.Sink) {
	if u.IsZero() {
		return
	}
	tenant, model := mt.m.tenant(env.Tenant), mt.model(u)
	series := mt.m.tokensBy.get(agentLabel+"\x00"+tenant+"\x00"+model, func() (c [3]prometheus.Counter) {
		for i, kind := range tokenKinds {
			c[i] = mt.m.tokens.WithLabelValues(agentLabel, tenant, model, kind)
		}
		return c
	})
	for i, n := range [...]int64{u.InputTokens, u.OutputTokens, u.CachedTokens} {
		if n > 0 {
			series[i].Add(float64(n))
		}
	}
	if u.Priced {
		mt.m.cost.Add(u.CostUSD, agentLabel, tenant, model)
	}
	if sink != nil {
		sink.Add(usage.Entry{Agent: agentLabel, Tenant: env.Tenant, At: at, Usage: u})
	}
}

// called is a, when its agent was called, else nil (the attempt's span
// says nothing of an attempt that did not run).
func (a *attemptResult) called() *attemptResult {
	if a.kind == attemptCalled {
		return a
	}
	return nil
}

// Live output of a call (DESIGN.md "Live output from agents"): the events
// an agent emits (agent.Request.Emit) are batched, at most outputBatch
// events per write and at most outputWindow after the first of a batch,
// and written to the task's output with record.Store.Output for the
// call's delivery. A call that emits nothing starts nothing and writes
// nothing.
const (
	outputWindow       = 50 * time.Millisecond
	outputBatch        = 64
	outputWriteTimeout = 5 * time.Second
)

// outputWriter batches one call's live output events into the record.
// emit never blocks; close writes what is left and returns once it is
// written, so that a call's output precedes its outcome in the task's
// events. Once a write is refused (the run is no longer live: Stale,
// Ended, Canceled) or the task's caps are reached, the call's later
// events are dropped without a write. Events beyond what the caps could
// keep in any case are not buffered either, so a flooding agent costs
// bounded memory.
type outputWriter struct {
	rec completer
	d   record.Delivery
	// ctx is the call's; without its cancel once the loop starts (the
	// last flush outlives a stop), made then: most calls emit nothing.
	ctx context.Context
	log *taskLog

	// writing is held by each flush, so that the batches of the loop's
	// flush and a step's (stepWriter) are written in order.
	writing sync.Mutex
	mu      sync.Mutex
	pending []record.Event
	bytes   int
	running bool // the loop runs (the call emitted)
	closed  bool
	stopped bool // refused or capped: drop the rest
	dropped int

	kick   chan struct{} // events are pending
	full   chan struct{} // a batch is full
	done   chan struct{} // closed by close
	exited chan struct{} // closed by the loop
}

// newOutput returns the writer of a call of delivery d.
func newOutput(ctx context.Context, rec completer, log *taskLog, d record.Delivery) *outputWriter {
	return &outputWriter{rec: rec, d: d, ctx: ctx, log: log}
}

// emit takes one event (agent.Request.Emit); it never blocks.
func (w *outputWriter) emit(typ string, data json.RawMessage) {
	if typ != agent.EventProgress && typ != agent.EventOutput {
		return
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	// The attempt and restart that sent it, as the attempt's outcome
	// names them.
	ev := record.Event{At: time.Now().UTC(), Event: typ, Attempt: w.d.Attempt, Restart: w.d.Restarts,
		Data: append(json.RawMessage(nil), data...)}
	w.mu.Lock()
	if w.closed || w.stopped || len(w.pending) > record.MaxOutputEvents || w.bytes > record.MaxOutputBytes {
		w.dropped++
		w.mu.Unlock()
		return
	}
	w.pending = append(w.pending, ev)
	w.bytes += len(data)
	if !w.running {
		w.running = true
		w.kick, w.full = make(chan struct{}, 1), make(chan struct{}, 1)
		w.done, w.exited = make(chan struct{}), make(chan struct{})
		w.ctx = context.WithoutCancel(w.ctx)
		go w.loop()
	}
	n := len(w.pending)
	w.mu.Unlock()
	signal(w.kick)
	if n >= outputBatch {
		signal(w.full)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// close writes the events still pending and stops the writer; events
// emitted later are dropped.
func (w *outputWriter) close() {
	w.mu.Lock()
	running := w.running
	w.closed = true
	w.mu.Unlock()
	if !running {
		return
	}
	close(w.done)
	<-w.exited
	w.mu.Lock()
	dropped := w.dropped
	w.mu.Unlock()
	if dropped > 0 {
		w.log.Debug("dropped live output events of the call", "dropped", dropped)
	}
}

// loop writes the pending events: a batch once it is full or
// outputWindow after its first event, the rest when the writer closes.
func (w *outputWriter) loop() {
	defer close(w.exited)
	for {
		select {
		case <-w.kick:
		case <-w.done:
			w.flush()
			return
		}
		t := time.NewTimer(outputWindow)
		select {
		case <-w.full:
		case <-t.C:
		case <-w.done:
		}
		t.Stop()
		w.flush()
	}
}

// flush writes every pending event, outputBatch a write.
func (w *outputWriter) flush() {
	w.writing.Lock()
	defer w.writing.Unlock()
	for {
		w.mu.Lock()
		if w.stopped || len(w.pending) == 0 {
			w.pending, w.bytes = nil, 0
			w.mu.Unlock()
			return
		}
		n := min(len(w.pending), outputBatch)
		batch := w.pending[:n:n]
		w.pending = w.pending[n:]
		for _, ev := range batch {
			w.bytes -= len(ev.Data)
		}
		w.mu.Unlock()
		w.write(batch)
	}
}

// write writes one batch; a refusal or the caps stop the writer.
func (w *outputWriter) write(batch []record.Event) {
	ctx, cancel := context.WithTimeout(w.ctx, outputWriteTimeout)
	defer cancel()
	out, kept, err := w.rec.output(ctx, w.d, batch)
	stop := false
	switch {
	case err != nil:
		// Live output is not worth holding the call for Redis: the batch
		// is lost, later ones are tried.
		w.log.Warn("could not write the agent's live output; events dropped", "events", len(batch), "err", err)
	case out != record.Applied:
		w.log.Debug("live output refused: the run is no longer live", "outcome", out)
		stop = true
	case kept < len(batch):
		w.log.Debug("live output over the task's caps; the rest of the call's is dropped", "kept", kept)
		stop = true
	}
	if stop {
		w.mu.Lock()
		w.stopped = true
		w.dropped += len(w.pending)
		w.pending, w.bytes = nil, 0
		w.mu.Unlock()
	}
}

// known is a copy of the steps known to the attempt (nil when none), for
// a call's request.
func (a *attemptStart) known() map[string]json.RawMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.steps) == 0 {
		return nil
	}
	return maps.Clone(a.steps)
}

// recorded adds the step name recorded by a call of the attempt.
func (a *attemptStart) recorded(name string, data json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.steps == nil {
		a.steps = map[string]json.RawMessage{}
	}
	if _, ok := a.steps[name]; !ok {
		a.steps[name] = data
	}
}

// stepWriter records the steps of one call (agent.Request.RecordStep) for
// its delivery, each at once and synchronously: the call's live output
// emitted before it is written first (outputWriter.flush), then the step
// (record.Store.Step, waiting out a Redis outage), before the call goes
// on and long before the attempt's outcome. A step's usage is priced,
// counted and debited like a call's. A step refused (over a cap, or the
// run no longer live) stops the call and fails it (failed: logic_error).
type stepWriter struct {
	p     *Executor
	log   *taskLog
	env   *tasks.Envelope
	sp    *Spec
	out   *outputWriter
	start *attemptStart
	stop  func() // stops the call

	mu  sync.Mutex
	err error // the first refusal
}

// record writes one step of the call (see stepWriter).
func (w *stepWriter) record(ctx context.Context, s agent.StepEvent) error {
	if err := w.failed(); err != nil {
		return err
	}
	var err error
	switch {
	case s.TooLarge > 0:
		err = &record.StepCapError{Name: s.Name, Cap: "step_bytes", Limit: record.MaxStepBytes, Bytes: s.TooLarge}
	case s.Name == "":
		err = errors.New("a step without a name was recorded")
	default:
		err = w.write(ctx, s)
	}
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = fmt.Errorf("step %q: %w", s.Name, err)
		}
		err = w.err
		w.mu.Unlock()
		w.log.Warn("a step of the agent was refused; the call is stopped", "step", s.Name, "err", err)
		w.stop()
	}
	return err
}

// write prices and writes step s, then counts its usage.
func (w *stepWriter) write(ctx context.Context, s agent.StepEvent) error {
	p, env := w.p, w.env
	used, _ := p.meter.read(env.Params, nil, nil, agent.Reply{Usage: s.Usage})
	w.out.flush()
	bg := context.WithoutCancel(ctx) // a step the agent made is written even as its call ends
	ok, err := w.out.rec.step(bg, w.out.d, record.Step{Name: s.Name, Data: s.Data, Usage: used})
	if err != nil {
		return err
	}
	if ok {
		w.start.recorded(s.Name, s.Data)
	}
	// The tokens were spent even when a step of this name was recorded
	// already (an agent that redid it): the metrics and budgets count
	// them; the task's usage sum has the first only.
	p.meter.used(env, p.metrics.agent(w.sp.name), used, time.Now(), p.usage)
	p.debitBudgets(bg, w.log, env, w.sp, used)
	return nil
}

// failed is the call's first refused step (nil: none).
func (w *stepWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
