package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// attempt makes one attempt of env with the agent g admitted, in its
// span (trace.go's spans: the attempt's, under the run's).
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
		c := p.call(ctx, log, env, cur, n)
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

// startAttempt records the start of attempt n: lazily for a first
// delivery of a task's first run (beginLazy; stop ends the attempt if the
// task turns out canceled), fenced before the call for a redelivery or a
// later run (beginNow: a restart or requeue, whose task may have been
// canceled while it waited). A nil start means the delivery must not run;
// the answer is then ProcessTask's.
func (p *Executor) startAttempt(ctx context.Context, log *taskLog, env *tasks.Envelope, g *admitted, n int, stop func()) (*attemptStart, error) {
	d := delivery(env, n)
	if n == 1 && env.Run == 0 {
		return beginLazy(ctx, p.rec, d, stop), nil
	}
	start, out, err := beginNow(ctx, p.rec, d)
	if applied(out, err) {
		return start, nil
	}
	p.releaseAdmitted(ctx, g)
	return nil, p.answer(ctx, log, env, out, err)
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
	failpoint("call_started") // test hook: die as the call starts, before a first delivery's lazy start
	// The call's live output, written for this delivery (record.go).
	output := newOutput(ctx, p.rec, log, delivery(env, attempt))
	data, runErr := sp.runner.Run(agent.WithLogger(runCtx, log.base), request(ctx, env, sp, attempt, output.emit))
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

// request is what agent sp is asked for attempt n of env: the one place
// an agent.Request is built. emit takes the call's live output.
func request(ctx context.Context, env *tasks.Envelope, sp *Spec, n int, emit func(string, json.RawMessage)) agent.Request {
	traceparent, tracestate := agentTrace(ctx, env)
	return agent.Request{
		TaskID: env.ID, Agent: sp.name, Action: env.Action, Params: env.Params,
		CorrelationID: env.CorrelationID, Attempt: n, Restart: env.Restarts,
		Traceparent: traceparent, Tracestate: tracestate, Emit: emit,
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

// quickStop reports whether a call whose context was canceled was stopped
// because its task was canceled (asynq's CancelProcessing) rather than by
// the worker's shutdown: its exec agent then gets SIGKILL sooner
// (agent.WithQuickStop).
func (p *Executor) quickStop() bool { return !p.stopping.Load() }

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
// sees it.
func (p *Executor) debitBudgets(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, u usage.Usage) {
	if p.budgets == nil || u.IsZero() {
		return
	}
	bg := context.WithoutCancel(ctx)
	if bs := p.budgets.of(env, sp); len(bs) > 0 {
		if err := p.budgets.keeper.Debit(bg, u, bs...); err != nil {
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
