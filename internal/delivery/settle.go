package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/restart"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// settle decides what the attempt a leads to, under the task's agent sp's
// policy, and takes that step: one method per decision.
func (p *Executor) settle(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, a *attemptResult) (answer error) {
	d := sp.policy.Decide(resilience.DecideInput{
		Verdict: a.call.verdict, Attempt: a.n, MaxAttempts: sp.maxAttempts,
		Backoff: sp.backoff, MaxRetryAfter: sp.maxRetryAfter,
	})
	overDeadline(env, sp, a, &d, time.Now())
	outcome := runOutcome(d.Action)
	defer func() { p.endRunSpan(env, a, cmp.Or(runEnd(answer), outcome), string(a.call.verdict.Class)) }()
	switch d.Action {
	case resilience.ActionSucceed:
		return p.succeed(ctx, log, env, a)
	case resilience.ActionRetry:
		return p.retry(ctx, log, env, sp, a, d.Delay)
	case resilience.ActionRequeue:
		return p.requeue(ctx, log, env, a)
	case resilience.ActionRestart:
		return p.restart(ctx, log, env, sp, a)
	default:
		if out, err := a.start.ensure(ctx); !applied(out, err) {
			return p.answer(ctx, log, env, out, err)
		}
		return p.deadLetter(ctx, log, env, a.report(p, env), d.Reason)
	}
}

// succeed records the attempt's success and acks the task; the write may
// ride asynq's ack (ack.go).
func (p *Executor) succeed(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult) error {
	if out := a.start.settle(); out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	out, rode, err := p.rec.succeed(ctx, a.start.d, record.Succeeded(a.report(p, env), a.call.data))
	if !applied(out, err) {
		return p.answer(ctx, log, env, out, err)
	}
	if !rode {
		p.succeeded(a.start.d, out)
	}
	p.metrics.ended(env, "succeeded")
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

// deadLetter stores the dead letter (with the full history) and then marks
// the task, with rep (the attempt's, or one without an attempt) and the
// reason. The dead letter is written first: a crash in between redelivers
// the task, and the redelivery finds the dead letter (see ended); Put is
// idempotent per task ID. The dead letter's attempts are the record's.
func (p *Executor) deadLetter(ctx context.Context, log *taskLog, env *tasks.Envelope, rep record.Attempt, reason string) error {
	ctx = context.WithoutCancel(ctx)
	c := record.DeadLettered(rep, reason)
	c.Event.At = p.now().UTC()
	v, err := p.rec.view(ctx, env.ID)
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		p.awaitRedis(ctx, env.ID)
		return handBack(err)
	}
	if v == nil {
		v = &record.View{}
	}
	// The dead letter's copy of the event gets the number the record will
	// give it: the task's writes come one after another.
	copied := *c.Event
	copied.Seq = v.Seq + 1
	e := &deadletter.Entry{
		ID: env.ID, Agent: env.Agent, Action: env.Action, Params: env.Params, CorrelationID: env.CorrelationID,
		ErrorClass: rep.ErrorClass, Error: rep.Error, Reason: reason, Attempts: max(v.Attempts, rep.Attempt), Restarts: env.Restarts,
		DeadLetteredAt: c.Event.At, History: append(v.History, copied), Queue: env.Queue, Run: env.Run, EnqueuedAt: env.EnqueuedAt,
		Tenant: env.Tenant, Priority: env.Priority,
	}
	if err := untilRedis(ctx, func() error { _, err := p.dlq.Put(ctx, e); return err }); err != nil {
		return p.putFailed(env.ID, err)
	}
	failpoint("before_dead_letter_recorded") // test hook: crash between the dead letter and its record
	out, err := p.rec.apply(ctx, delivery(env, rep.Attempt), c)
	if err == nil && out != record.Applied {
		p.dropDeadLetter(ctx, env)
		return p.answer(ctx, log, env, out, nil)
	} else if err != nil {
		p.log.Error("could not record dead letter in task history", "task_id", env.ID, "err", err)
	}
	p.metrics.deadLetters.WithLabelValues(p.metrics.agent(env.Agent), rep.ErrorClass, reason).Inc()
	p.metrics.ended(env, "dead_lettered")
	if env.Restarts > 0 {
		p.metrics.restartResults.WithLabelValues(p.metrics.agent(env.Agent), "dead_lettered").Inc()
	}
	p.log.Error("dead-lettered", "event", "dead_letter", "agent", env.Agent, "task_id", env.ID,
		"class", rep.ErrorClass, "reason", reason, "attempt", rep.Attempt, "restarts", env.Restarts, "error", rep.Error)
	failpoint("after_dead_letter_recorded") // test hook: crash before asynq acks a dead letter
	return nil
}

// dropDeadLetter deletes the dead letter a delivery stored when its record
// refused the mark: the task was canceled (a canceled task is not
// dead-lettered), or the run ended otherwise meanwhile (a duplicate
// delivery's success). A run that ended dead-lettered keeps it.
func (p *Executor) dropDeadLetter(ctx context.Context, env *tasks.Envelope) {
	if rs, err := p.rec.runState(ctx, env.ID); err == nil && rs.State == record.StateDeadLettered {
		return
	}
	_, _ = p.dlq.Delete(ctx, env.ID)
}

// putFailed handles a dead letter the store did not take: Redis trouble puts
// the task back (a free retry, nothing lost); an entry the store can never
// accept goes to asynq's archive instead, where `asynq` tools still see it.
func (p *Executor) putFailed(id string, err error) error {
	if errors.Is(err, deadletter.ErrInvalidEntry) {
		p.log.Error("dead letter rejected by the store; task archived in asynq instead", "task_id", id, "err", err)
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	p.log.Error("could not store dead letter; task put back", "task_id", id, "err", err)
	return handBack(err)
}

// deadLetterPayload keeps an undecodable payload as a dead letter
// (invalid_request): nothing is lost, and the worker goes on.
func (p *Executor) deadLetterPayload(ctx context.Context, t *asynq.Task, env *tasks.Envelope, derr error) error {
	// The asynq task ID is the only trustworthy identity of a payload that
	// failed its checks: the payload's own ID may be the reason it failed,
	// or name another task whose record must not be touched.
	id := metaOf(ctx).id
	e := &tasks.Envelope{ID: id}
	if env != nil {
		e.Agent, e.Action, e.CorrelationID, e.Queue = env.Agent, env.Action, env.CorrelationID, env.Queue
		if tasks.CheckTenant(env.Tenant) == nil && tasks.CheckPriority(env.Priority) == nil {
			e.Tenant, e.Priority = env.Tenant, env.Priority
		}
		if json.Valid(env.Params) {
			e.Params = env.Params
		}
	}
	if e.ID == "" {
		e.ID = "payload-" + tasks.NewID()
	}
	q := metaOf(ctx).queue
	if e.Queue == "" {
		e.Queue = q
	}
	if base, run, ok := tasks.ParseAsynqID(id); ok && run > 0 {
		// A later run (a restart, or a requeue) that cannot run: free its
		// slot in the restart index, if it has one.
		_ = p.restarts.Started(context.WithoutCancel(ctx), base)
	}
	now := p.now().UTC()
	msg := "malformed task payload: " + derr.Error()
	c := record.DeadLettered(record.Attempt{ErrorClass: string(resilience.InvalidRequest), Error: msg, Worker: p.workerID},
		ReasonInvalidPayload)
	c.Event.At = now
	entry := &deadletter.Entry{
		ID: e.ID, Agent: e.Agent, Action: e.Action, Params: e.Params, CorrelationID: e.CorrelationID,
		ErrorClass: string(resilience.InvalidRequest), Error: msg, Reason: ReasonInvalidPayload,
		DeadLetteredAt: now, History: []tasks.Event{*c.Event}, Queue: e.Queue, Payload: t.Payload(),
		Tenant: e.Tenant, Priority: e.Priority,
	}
	bg := context.WithoutCancel(ctx)
	if _, err := p.dlq.Put(bg, entry); err != nil {
		return p.putFailed(e.ID, err)
	}
	_, _ = p.rec.apply(bg, delivery(e, 0), c)
	p.metrics.deadLetters.WithLabelValues(p.metrics.agent(e.Agent), string(resilience.InvalidRequest), ReasonInvalidPayload).Inc()
	p.metrics.ended(env, "dead_lettered")
	p.log.Error("dead-lettered", "event", "dead_letter", "task_id", e.ID, "class", resilience.InvalidRequest,
		"reason", ReasonInvalidPayload, "error", msg)
	return nil
}
