package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/restart"
	"github.com/agentq/agentq/tasks"
)

// Dead-letter reasons the pipeline itself gives (stable strings).
const (
	ReasonInvalidPayload    = "invalid_payload"
	ReasonUnknownAgent      = "unknown_agent"
	ReasonNotRetryable      = "not_retryable"
	ReasonAttemptsExhausted = "attempts_exhausted"
)

// pipeline is the asynq handler: decode → resolve agent → breaker gate →
// run under timeout → classify → record → decide.
type pipeline struct {
	log      *slog.Logger
	specs    map[string]*spec
	store    *tasks.Store
	dlq      *deadletter.Store
	restarts *restart.Scheduler
	breakers *resilience.Breakers
	metrics  *metrics
	alerts   *alerter
	workerID string
	insp     *asynq.Inspector // nil: no superseded-run check (tests)
	classify func(error) resilience.Verdict
	noGate   bool // WithoutBreaker: skip Allow and Record
}

// delayed is returned to asynq to put the task back after a delay.
// failure=false (deferral, cancellation) uses no attempt.
type delayed struct {
	delay   time.Duration
	failure bool
	cause   string
}

func (d *delayed) Error() string { return d.cause }

// retryDelay is asynq's RetryDelayFunc: the delay the pipeline chose.
func retryDelay(_ int, err error, _ *asynq.Task) time.Duration {
	var d *delayed
	if errors.As(err, &d) {
		if !d.failure && d.delay > 0 {
			return ceilToSecond(time.Now(), d.delay)
		}
		return d.delay
	}
	return time.Second
}

// ceilToSecond stretches delay so that now+delay falls on a whole second.
// asynq keeps a retry's due time in whole Unix seconds (it truncates), so a
// deferral of 700ms could come due at once and spin every forwarder tick
// until the breaker may admit; rounded up, it wakes at most 1s late instead.
func ceilToSecond(now time.Time, delay time.Duration) time.Duration {
	at := now.Add(delay)
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	return at.Sub(now)
}

// isFailure is asynq's IsFailure: only real attempts count.
func isFailure(err error) bool {
	var d *delayed
	if errors.As(err, &d) {
		return d.failure
	}
	return err != nil
}

// ProcessTask implements asynq.Handler. It never panics on a task and
// returns an error only to ask asynq for a (possibly free) retry.
func (p *pipeline) ProcessTask(ctx context.Context, t *asynq.Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("pipeline panic; task put back", "panic", fmt.Sprint(r))
			err = &delayed{delay: time.Second, failure: true, cause: fmt.Sprintf("panic: %v", r)}
		}
	}()
	env, derr := tasks.Decode(t.Payload())
	if derr != nil {
		return p.deadLetterPayload(ctx, t, env, derr)
	}
	if env.Restarts > 0 && env.Run > 0 {
		// A restart run has come due: free its slot in the restart index
		// now, whatever becomes of the run (see restart.Scheduler.Started).
		_ = p.restarts.Started(ctx, env.ID)
	}
	sp, ok := p.specs[env.Agent]
	if !ok {
		return p.deadLetter(ctx, env, nil, resilience.NotSupported,
			fmt.Sprintf("unknown agent %q: no runner is configured or registered for it", env.Agent),
			ReasonUnknownAgent, 0)
	}
	log := &taskLog{base: p.log, env: env}

	// A retry is scheduled by asynq in whole seconds, so it may arrive up to a
	// second early: wait for the rest of its computed delay here.
	if n, ok := asynq.GetRetryCount(ctx); ok && n > 0 {
		if p.superseded(ctx, env) {
			log.Warn("dropping a redelivered run whose restart was already scheduled", "run", env.Run)
			return nil
		}
		rs, ended := p.ended(ctx, log, env)
		if ended {
			return nil
		}
		if err := waitUntilDue(ctx, rs.NextAttemptAt); err != nil {
			return &delayed{delay: 0, failure: false, cause: "canceled by worker shutdown"}
		}
	}

	// Breaker gate: an open breaker defers the task without using an
	// attempt, unless the breaker of one of its fallback agents admits it.
	cur := sp // the agent that serves this call
	adm, berr := p.admit(ctx, sp)
	if berr != nil {
		log.Warn("breaker state unavailable; using the last state seen", "err", berr)
	}
	p.metrics.breakerState.WithLabelValues(sp.breakerKey).Set(stateValue(adm.State))
	next := 0 // index in sp.fallback of the next agent to fall back to
	if !adm.Allowed {
		alt, aadm, n, soonest := p.fallBack(ctx, log, sp, 0, fallbackBreakerOpen)
		if alt == nil {
			if soonest > 0 && soonest < adm.RetryIn {
				adm.RetryIn = soonest // a fallback may admit before the primary does
			}
			return p.defer_(ctx, log, env, sp, adm)
		}
		cur, adm, next = alt, aadm, n
	}

	attempt := 1
	if n, ok := asynq.GetRetryCount(ctx); ok {
		attempt = n + 1
	}
	var start *attemptStart
	if attempt == 1 {
		start = p.deferBegin(ctx, env)
	} else if start, err = p.begin(ctx, env); errors.Is(err, tasks.ErrStale) {
		p.release(ctx, cur, adm)
		log.Info("dropping stale delivery of a superseded run", "run", env.Run)
		return nil
	} else if errors.Is(err, tasks.ErrEnded) {
		p.release(ctx, cur, adm)
		log.Warn("acking a redelivery of a run that has already ended; the agent is not called again", "run", env.Run)
		return nil
	} else if err != nil {
		p.release(ctx, cur, adm)
		p.awaitRedis(ctx, env.ID) // so that asynq takes the task back (see untilRedis)
		return &delayed{delay: time.Second, failure: false, cause: err.Error()}
	}
	bg := context.WithoutCancel(ctx)

	// Call the agent; a failure whose class falls back (by the primary's
	// table) goes at once to the next fallback agent whose breaker admits
	// it, within this attempt. Each call is its own history event.
	var c callResult
	for {
		c = p.call(ctx, log, env, cur, adm, attempt)
		if c.verdict.Class == "" || next >= len(sp.fallback) || ctx.Err() != nil || !sp.policy.FallsBack(c.verdict.Class) {
			break
		}
		alt, aadm, n, _ := p.fallBack(ctx, log, sp, next, string(c.verdict.Class))
		if alt == nil {
			break
		}
		if err := start.transition(bg, tasks.Patch{State: tasks.StateActive, ErrorClass: string(c.verdict.Class), Error: c.errText},
			tasks.Event{Event: tasks.EventFailed, Attempt: attempt, Restart: env.Restarts, Agent: cur.name,
				ErrorClass: string(c.verdict.Class), Error: c.errText, DurationMS: c.elapsed.Milliseconds(), Worker: p.workerID}); errors.Is(err, tasks.ErrStale) {
			p.release(ctx, alt, aadm)
			return ranStale(log, env)
		}
		log.Warn("falling back", "event", "fallback", "from", cur.name, "to", alt.name, "class", c.verdict.Class,
			"attempt", attempt, "error", c.errText)
		cur, adm, next = alt, aadm, n
	}
	v, data, errText := c.verdict, c.data, c.errText

	d := sp.policy.Decide(resilience.DecideInput{
		Verdict: v, Attempt: attempt, MaxAttempts: sp.maxAttempts,
		Backoff: sp.backoff, MaxRetryAfter: sp.maxRetryAfter,
	})
	ev := tasks.Event{Attempt: attempt, Restart: env.Restarts, Agent: cur.name,
		ErrorClass: string(v.Class), Error: errText, DurationMS: c.elapsed.Milliseconds(), Worker: p.workerID}

	switch d.Action {
	case resilience.ActionSucceed:
		ev.Event = tasks.EventSucceeded
		if err := untilRedis(ctx, func() error {
			return start.transition(bg, tasks.Patch{State: tasks.StateSucceeded, ClearError: true, Result: data}, ev)
		}); errors.Is(err, tasks.ErrStale) {
			return ranStale(log, env)
		} else if err != nil {
			log.Error("could not record success", "err", err)
		}
		failpoint("after_success_recorded") // test hook: crash before asynq acks a success
		if env.Restarts > 0 {
			p.metrics.restartResults.WithLabelValues(env.Agent, "succeeded").Inc()
		}
		return nil

	case resilience.ActionRetry:
		ev.Event, ev.DelayMS = tasks.EventRetrying, d.Delay.Milliseconds()
		if err := untilRedis(ctx, func() error {
			return start.transition(bg, tasks.Patch{State: tasks.StateRetrying, ErrorClass: string(v.Class), Error: errText,
				NextAttemptAt: time.Now().Add(d.Delay)}, ev)
		}); errors.Is(err, tasks.ErrStale) {
			return ranStale(log, env)
		}
		p.metrics.retries.WithLabelValues(env.Agent, string(v.Class)).Inc()
		log.Warn("retrying", "event", "retry", "class", v.Class, "attempt", attempt,
			"max_attempts", sp.maxAttempts, "delay_ms", d.Delay.Milliseconds(), "error", errText)
		return &delayed{delay: d.Delay, failure: true, cause: errText}

	case resilience.ActionRequeue:
		ev.Event = tasks.EventCanceled
		if err := start.transition(bg, tasks.Patch{State: tasks.StatePending}, ev); errors.Is(err, tasks.ErrStale) {
			return ranStale(log, env)
		}
		log.Info("attempt canceled by shutdown; task put back without using an attempt", "attempt", attempt)
		return &delayed{delay: 0, failure: false, cause: "canceled by worker shutdown"}

	case resilience.ActionRestart:
		if ok, err := p.ensureStarted(ctx, log, start); !ok {
			return err
		}
		// A backend that asked for a longer wait (Retry-After) than the next
		// restart delay gets it.
		next, delay, err := p.restarts.ScheduleAfter(bg, env, sp.restart, v.RetryAfter)
		if err == nil {
			// ev.Restart stays env.Restarts: the event is the outcome of this
			// run's attempt; (restart, attempt) identifies every attempt.
			ev.Event, ev.DelayMS = tasks.EventRestarting, delay.Milliseconds()
			failpoint("before_restart_recorded") // test hook: crash between scheduling and recording
			_ = untilRedis(ctx, func() error {
				return p.store.Transition(bg, env.ID, tasks.Patch{State: tasks.StateRestarting, Run: &next.Run,
					Restarts: &next.Restarts, ErrorClass: string(v.Class), Error: errText}, ev)
			})
			p.metrics.restarts.WithLabelValues(env.Agent, string(v.Class)).Inc()
			if env.Restarts > 0 {
				p.metrics.restartResults.WithLabelValues(env.Agent, "restarted").Inc()
			}
			log.Warn("restarting later", "event", "restart", "class", v.Class, "attempt", attempt,
				"restart", next.Restarts, "delay_ms", delay.Milliseconds(), "error", errText)
			failpoint("after_restart_scheduled") // test hook: crash before asynq acks this run
			return nil
		}
		reason := restart.Reason(err)
		if reason == "" {
			// Redis trouble: keep the task (a free retry) rather than lose it.
			log.Error("could not schedule restart; retrying the hand-off", "err", err)
			p.awaitRedis(ctx, env.ID)
			return &delayed{delay: time.Second, failure: false, cause: err.Error()}
		}
		return p.deadLetter(bg, env, &ev, v.Class, errText, reason, attempt)

	default: // dead letter
		if ok, err := p.ensureStarted(ctx, log, start); !ok {
			return err
		}
		return p.deadLetter(bg, env, &ev, v.Class, errText, d.Reason, attempt)
	}
}

// ensureStarted writes an attempt's start, if it is not in the record yet,
// before a step that must not follow a superseded run (scheduling a
// restart, dead-lettering). When it reports false, err is ProcessTask's
// answer: nil for a superseded run (drop it), a free retry when Redis
// stayed unreachable.
func (p *pipeline) ensureStarted(ctx context.Context, log *taskLog, start *attemptStart) (ok bool, err error) {
	err = untilRedis(ctx, func() error { return start.ensure(context.WithoutCancel(ctx)) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, tasks.ErrStale):
		return false, ranStale(log, start.env)
	default:
		return false, &delayed{delay: time.Second, failure: false, cause: err.Error()}
	}
}

// taskLog is a task's logger: p.log with the task's agent and ID, built
// on first use (most tasks log nothing, and slog's With allocates).
type taskLog struct {
	base *slog.Logger
	env  *tasks.Envelope
	l    *slog.Logger
}

func (t *taskLog) get() *slog.Logger {
	if t.l == nil {
		t.l = t.base.With("agent", t.env.Agent, "task_id", t.env.ID)
	}
	return t.l
}

func (t *taskLog) Debug(msg string, args ...any) { t.get().Debug(msg, args...) }
func (t *taskLog) Info(msg string, args ...any)  { t.get().Info(msg, args...) }
func (t *taskLog) Warn(msg string, args ...any)  { t.get().Warn(msg, args...) }
func (t *taskLog) Error(msg string, args ...any) { t.get().Error(msg, args...) }

// ranStale is ProcessTask's answer for a delivery found superseded only
// after its agent ran (a first delivery, see attemptStart): its outcome is
// not recorded and asynq drops it.
func ranStale(log *taskLog, env *tasks.Envelope) error {
	log.Warn("dropping a superseded run that ran; its outcome is not recorded", "run", env.Run)
	return nil
}

// fallbackBreakerOpen is the class label of agentq_fallbacks_total when the
// primary's breaker did not admit the call.
const fallbackBreakerOpen = "breaker_open"

// admit asks sp's breaker for a call: Allow, or AllowTask for an agent
// with a health probe (its tasks are never half-open trials).
func (p *pipeline) admit(ctx context.Context, sp *spec) (resilience.Admission, error) {
	if p.noGate {
		return resilience.Admission{Allowed: true, State: resilience.StateClosed}, nil
	}
	if sp.probe != nil {
		return p.breakers.AllowTask(ctx, sp.breakerKey, sp.breaker)
	}
	return p.breakers.Allow(ctx, sp.breakerKey, sp.breaker)
}

// release gives back an admission whose call was never made.
func (p *pipeline) release(ctx context.Context, sp *spec, adm resilience.Admission) {
	if !p.noGate {
		_, _ = p.breakers.Record(ctx, sp.breakerKey, sp.breaker, adm, resilience.OutcomeIgnore)
	}
}

// fallBack returns the first agent of primary's fallback list, from index
// from on, whose breaker admits a call, with its admission and the index
// after it; why labels agentq_fallbacks_total. alt is nil when none
// admits; soonest is then the shortest RetryIn the denials gave (0: none).
func (p *pipeline) fallBack(ctx context.Context, log *taskLog, primary *spec, from int, why string) (alt *spec, adm resilience.Admission, next int, soonest time.Duration) {
	for i := from; i < len(primary.fallback); i++ {
		fs := primary.fallback[i]
		a, err := p.admit(ctx, fs)
		if err != nil {
			log.Warn("fallback breaker state unavailable; using the last state seen", "fallback", fs.name, "err", err)
		}
		p.metrics.breakerState.WithLabelValues(fs.breakerKey).Set(stateValue(a.State))
		if a.Allowed {
			p.metrics.fallbacks.WithLabelValues(primary.name, fs.name, why).Inc()
			return fs, a, i + 1, 0
		}
		p.metrics.rejections.WithLabelValues(fs.breakerKey).Inc()
		if a.RetryIn > 0 && (soonest == 0 || a.RetryIn < soonest) {
			soonest = a.RetryIn
		}
	}
	return nil, resilience.Admission{}, len(primary.fallback), soonest
}

// callResult is the outcome of one call of an agent.
type callResult struct {
	data    json.RawMessage
	verdict resilience.Verdict
	errText string
	elapsed time.Duration
}

// call runs one call of agent sp (admitted by adm) under sp's timeout,
// classifies its outcome and records it in sp's own breaker, the metrics
// and the alerter. The Request names the agent called (sp), which for a
// fallback is not the task's agent.
func (p *pipeline) call(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *spec, adm resilience.Admission, attempt int) callResult {
	timeout := callTimeout(ctx, sp.timeout, time.Now())
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	started := time.Now()
	data, runErr := sp.runner.Run(runCtx, agent.Request{
		TaskID: env.ID, Agent: sp.name, Action: env.Action, Params: env.Params,
		CorrelationID: env.CorrelationID, Attempt: attempt, Restart: env.Restarts,
	})
	elapsed := time.Since(started)
	// Only the worker's shutdown cancels ctx (context.Canceled); asynq's
	// deadline on ctx (DeadlineExceeded) is a timeout like the agent's own.
	timedOut := runCtx.Err() == context.DeadlineExceeded && ctx.Err() != context.Canceled
	cancel()
	p.metrics.duration.WithLabelValues(sp.name).Observe(elapsed.Seconds())

	var v resilience.Verdict
	switch {
	case runErr == nil:
	case ctx.Err() == context.Canceled:
		v.Class = resilience.Canceled
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
	out := resilience.OutcomeSuccess
	switch {
	case v.Class == resilience.Canceled:
		out = resilience.OutcomeIgnore
	case v.Class != "" && sp.policy.Rule(v.Class).CountsForBreaker:
		out = resilience.OutcomeFailure
	}
	if p.noGate {
		// Gate off (WithoutBreaker): nothing to record.
	} else if st, err := p.breakers.Record(ctx, sp.breakerKey, sp.breaker, adm, out); errors.Is(err, resilience.ErrStaleAdmission) {
		log.Debug("breaker result from an older generation ignored", "err", err)
	} else if err != nil {
		log.Warn("breaker record failed", "err", err)
	} else if st != adm.State {
		p.metrics.breakerState.WithLabelValues(sp.breakerKey).Set(stateValue(st))
		log.Info("breaker changed state", "breaker_key", sp.breakerKey, "state", st)
	}

	outcome := "success"
	if v.Class != "" {
		outcome = "failure"
		if v.Class == resilience.Canceled {
			outcome = "canceled"
		}
	}
	p.metrics.attempts.WithLabelValues(sp.name, string(v.Class), outcome).Inc()
	if out == resilience.OutcomeFailure || (v.Class != "" && v.Class != resilience.Canceled) {
		p.alerts.failure(sp.name)
	}
	errText := ""
	if runErr != nil {
		errText = truncate(runErr.Error(), 2000)
	}
	return callResult{data: data, verdict: v, errText: errText, elapsed: elapsed}
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

// superseded reports whether env's next run already exists in asynq: a
// worker that scheduled a restart and died before recording it leaves the
// record at this run, so Begin's fence cannot tell, and asynq's lease
// recovery redelivers this run. Only redeliveries (retries) are checked,
// at one lookup each; an error counts as "not superseded" (run it rather
// than lose it).
func (p *pipeline) superseded(ctx context.Context, env *tasks.Envelope) bool {
	if p.insp == nil {
		return false
	}
	q, _ := asynq.GetQueueName(ctx)
	next := *env
	next.Run++
	info, err := p.insp.GetTaskInfo(q, next.AsynqID())
	if err != nil {
		return false
	}
	// Record the restart the dead worker did not, unless the next run has
	// moved the record on already.
	if n, err := tasks.Decode(info.Payload); err == nil {
		_, _ = p.store.TransitionIfRun(context.WithoutCancel(ctx), env.ID, env.Run,
			tasks.Patch{State: tasks.StateRestarting, Run: &n.Run, Restarts: &n.Restarts},
			tasks.Event{Event: tasks.EventRestarting, Restart: env.Restarts, Agent: env.Agent, Worker: p.workerID,
				Error: "restart scheduled by a worker that stopped before recording it"})
	}
	return true
}

// ended reports whether a redelivery's run has already ended: its outcome
// was recorded (succeeded, or dead-lettered: the dead letter is written
// before the record, so a dead letter of this run counts too) but asynq
// never got the ack — the worker died in between, or Redis was out longer
// than asynq's lease. Such a delivery is acked without calling the agent;
// a dead letter whose record was not yet marked is marked now. It also
// returns the record's state (zero when unreadable: run the delivery
// rather than lose it).
func (p *pipeline) ended(ctx context.Context, log *taskLog, env *tasks.Envelope) (tasks.RunState, bool) {
	rs, err := p.store.RunState(ctx, env.ID)
	if err != nil {
		return tasks.RunState{}, false
	}
	if rs.Ended(env.Run) {
		log.Warn("acking a redelivery of a run that has already ended; the agent is not called again",
			"run", env.Run, "state", rs.State)
		return rs, true
	}
	if rs.Exists && rs.Run != env.Run {
		return rs, false // another run: Begin's fence decides
	}
	e, err := p.dlq.Get(ctx, env.ID)
	if err != nil || e.Run != env.Run || e.Agent != env.Agent {
		return rs, false
	}
	ev := tasks.Event{Event: tasks.EventDeadLettered, Restart: env.Restarts, Agent: env.Agent, Worker: p.workerID,
		ErrorClass: e.ErrorClass, Error: e.Error}
	bg := context.WithoutCancel(ctx)
	patch := tasks.Patch{State: tasks.StateDeadLettered, ErrorClass: e.ErrorClass, Error: e.Error}
	if rs.Exists {
		_, _ = p.store.TransitionIfRun(bg, env.ID, env.Run, patch, ev)
	} else {
		_ = p.store.Transition(bg, env.ID, patch, ev)
	}
	log.Warn("acking a redelivery of a run that was dead-lettered; the agent is not called again", "run", env.Run)
	return rs, true
}

// maxDueWait bounds the in-handler wait for an early retry: asynq's
// whole-second rounding plus its forwarder tick.
const maxDueWait = 2 * time.Second

// waitUntilDue sleeps until due (a retry's next attempt time), at most
// maxDueWait; it returns ctx's error when the worker shuts down meanwhile.
// A zero due (no record of it) runs now rather than not at all.
func waitUntilDue(ctx context.Context, due time.Time) error {
	if due.IsZero() {
		return nil
	}
	wait := time.Until(due)
	if wait <= 0 {
		return nil
	}
	if wait > maxDueWait {
		wait = maxDueWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// defer_ puts a task back until its breaker may admit a trial. Deferred
// tasks wake spread out (jitter) so they do not stampede; those not admitted
// defer again.
func (p *pipeline) defer_(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *spec, adm resilience.Admission) error {
	wait := adm.RetryIn
	if wait < 50*time.Millisecond {
		wait = 50 * time.Millisecond
	}
	if adm.State == resilience.StateHalfOpen && wait > time.Second {
		// A trial is in flight: look again soon rather than at its lease expiry.
		wait = time.Second
	}
	wait += time.Duration(rand.Int64N(int64(wait/5) + 1))
	p.metrics.deferrals.WithLabelValues(env.Agent).Inc()
	p.metrics.rejections.WithLabelValues(sp.breakerKey).Inc()
	_ = p.store.Transition(context.WithoutCancel(ctx), env.ID, tasks.Patch{State: tasks.StateDeferred},
		tasks.Event{Event: tasks.EventDeferred, Restart: env.Restarts, Agent: env.Agent, DelayMS: wait.Milliseconds(),
			Error: fmt.Sprintf("breaker %q is %s", sp.breakerKey, adm.State), Worker: p.workerID})
	log.Info("deferred: breaker open", "event", "defer", "breaker_key", sp.breakerKey, "state", adm.State, "delay_ms", wait.Milliseconds())
	return &delayed{delay: wait, failure: false, cause: deferCause}
}

// deadLetter stores the dead letter (with the full history) and then marks
// the task. The dead letter is written first: a crash in between redelivers
// the task, and Put is idempotent per task ID.
func (p *pipeline) deadLetter(ctx context.Context, env *tasks.Envelope, ev *tasks.Event, class resilience.Class, errText, reason string, attempt int) error {
	ctx = context.WithoutCancel(ctx)
	if ev == nil {
		ev = &tasks.Event{Agent: env.Agent, Restart: env.Restarts, Attempt: attempt, Worker: p.workerID}
	}
	ev.Event, ev.ErrorClass, ev.Error = tasks.EventDeadLettered, string(class), errText
	ev.At = p.store.Now().UTC()
	hist, err := p.store.History(ctx, env.ID)
	if err != nil {
		p.awaitRedis(ctx, env.ID)
		return &delayed{delay: time.Second, failure: false, cause: err.Error()}
	}
	hist = append(hist, *ev)
	// An attempt is a (restart, attempt) pair: the calls of one attempt
	// that fell back to other agents are several events but one attempt.
	type attemptID struct{ restart, attempt int }
	seen := map[attemptID]bool{}
	attempts := 0
	for _, h := range hist {
		if h.Event == tasks.EventElided {
			attempts += h.Attempts // attempts in the elided middle of a long history
			continue
		}
		id := attemptID{h.Restart, h.Attempt}
		if h.Attempt > 0 && h.Event != tasks.EventDeferred && h.Event != tasks.EventCanceled && !seen[id] {
			seen[id] = true
			attempts++
		}
	}
	e := &deadletter.Entry{
		ID: env.ID, Agent: env.Agent, Action: env.Action, Params: env.Params, CorrelationID: env.CorrelationID,
		ErrorClass: string(class), Error: errText, Reason: reason, Attempts: attempts, Restarts: env.Restarts,
		DeadLetteredAt: ev.At, History: hist, Queue: env.Queue, Run: env.Run, EnqueuedAt: env.EnqueuedAt,
	}
	if err := untilRedis(ctx, func() error { _, err := p.dlq.Put(ctx, e); return err }); err != nil {
		return p.putFailed(env.ID, err)
	}
	failpoint("before_dead_letter_recorded") // test hook: crash between the dead letter and its record
	if err := untilRedis(ctx, func() error {
		return p.store.Transition(ctx, env.ID, tasks.Patch{State: tasks.StateDeadLettered, ErrorClass: string(class), Error: errText}, *ev)
	}); err != nil {
		p.log.Error("could not record dead letter in task history", "task_id", env.ID, "err", err)
	}
	p.metrics.deadLetters.WithLabelValues(env.Agent, string(class), reason).Inc()
	if env.Restarts > 0 {
		p.metrics.restartResults.WithLabelValues(env.Agent, "dead_lettered").Inc()
	}
	p.log.Error("dead-lettered", "event", "dead_letter", "agent", env.Agent, "task_id", env.ID,
		"class", class, "reason", reason, "attempt", attempt, "restarts", env.Restarts, "error", errText)
	failpoint("after_dead_letter_recorded") // test hook: crash before asynq acks a dead letter
	return nil
}

// putFailed handles a dead letter the store did not take: Redis trouble puts
// the task back (a free retry, nothing lost); an entry the store can never
// accept goes to asynq's archive instead, where `asynq` tools still see it.
func (p *pipeline) putFailed(id string, err error) error {
	if errors.Is(err, deadletter.ErrInvalidEntry) {
		p.log.Error("dead letter rejected by the store; task archived in asynq instead", "task_id", id, "err", err)
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	p.log.Error("could not store dead letter; task put back", "task_id", id, "err", err)
	return &delayed{delay: time.Second, failure: false, cause: err.Error()}
}

// deadLetterPayload keeps an undecodable payload as a dead letter
// (invalid_request): nothing is lost, and the worker goes on.
func (p *pipeline) deadLetterPayload(ctx context.Context, t *asynq.Task, env *tasks.Envelope, derr error) error {
	// The asynq task ID is the only trustworthy identity of a payload that
	// failed its checks: the payload's own ID may be the reason it failed,
	// or name another task whose record must not be touched.
	id, _ := asynq.GetTaskID(ctx)
	e := &tasks.Envelope{ID: id}
	if env != nil {
		e.Agent, e.Action, e.CorrelationID, e.Queue = env.Agent, env.Action, env.CorrelationID, env.Queue
		if json.Valid(env.Params) {
			e.Params = env.Params
		}
	}
	if e.ID == "" {
		e.ID = "payload-" + tasks.NewID()
	}
	q, _ := asynq.GetQueueName(ctx)
	if e.Queue == "" {
		e.Queue = q
	}
	if base, run, ok := tasks.ParseAsynqID(id); ok && run > 0 {
		// A later run (a restart, or a requeue) that cannot run: free its
		// slot in the restart index, if it has one.
		_ = p.restarts.Started(context.WithoutCancel(ctx), base)
	}
	now := p.store.Now().UTC()
	msg := "malformed task payload: " + derr.Error()
	ev := tasks.Event{At: now, Event: tasks.EventDeadLettered, ErrorClass: string(resilience.InvalidRequest), Error: msg, Worker: p.workerID}
	entry := &deadletter.Entry{
		ID: e.ID, Agent: e.Agent, Action: e.Action, Params: e.Params, CorrelationID: e.CorrelationID,
		ErrorClass: string(resilience.InvalidRequest), Error: msg, Reason: ReasonInvalidPayload,
		DeadLetteredAt: now, History: []tasks.Event{ev}, Queue: e.Queue, Payload: t.Payload(),
	}
	bg := context.WithoutCancel(ctx)
	if _, err := p.dlq.Put(bg, entry); err != nil {
		return p.putFailed(e.ID, err)
	}
	_ = p.store.Transition(bg, e.ID, tasks.Patch{State: tasks.StateDeadLettered, ErrorClass: string(resilience.InvalidRequest), Error: msg}, ev)
	p.metrics.deadLetters.WithLabelValues(e.Agent, string(resilience.InvalidRequest), ReasonInvalidPayload).Inc()
	p.log.Error("dead-lettered", "event", "dead_letter", "task_id", e.ID, "class", resilience.InvalidRequest,
		"reason", ReasonInvalidPayload, "error", msg)
	return nil
}

func stateValue(s resilience.BreakerState) float64 {
	switch s {
	case resilience.StateHalfOpen:
		return 1
	case resilience.StateOpen:
		return 2
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
