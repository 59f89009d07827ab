package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/restart"
	"github.com/agentq/agentq/tasks"
)

// settle decides what the attempt a leads to, under the task's agent sp's
// policy, and takes that step: one method per decision.
func (p *pipeline) settle(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *spec, a *attemptResult) error {
	d := sp.policy.Decide(resilience.DecideInput{
		Verdict: a.call.verdict, Attempt: a.n, MaxAttempts: sp.maxAttempts,
		Backoff: sp.backoff, MaxRetryAfter: sp.maxRetryAfter,
	})
	outcome := runOutcome(d.Action)
	defer func() { p.endRunSpan(env, a, cmp.Or(log.runEnd, outcome), string(a.call.verdict.Class)) }()
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
		if ok, err := p.ensureStarted(ctx, log, a.start); !ok {
			return err
		}
		return p.deadLetter(ctx, log, env, a.outcome(p, env), d.Reason)
	}
}

// succeed records the attempt's success (waiting out a Redis outage, see
// untilRedis) and acks the task.
// A quick first attempt's success instead rides asynq's ack (ack.go).
func (p *pipeline) succeed(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult) error {
	c := tasks.SetSucceeded(a.outcome(p, env), a.call.data)
	if p.ackSuccess(ctx, log, env, a, c) {
		return nil
	}
	err := untilRedis(ctx, func() error { return a.start.apply(context.WithoutCancel(ctx), c) })
	p.recorded(ctx, log, env, err)
	if !dropped(err) {
		failpoint("after_success_recorded") // test hook: crash before asynq acks a success
	}
	return nil
}

// retry records that the attempt failed and the next is due after delay,
// and asks asynq to retry the task then.
func (p *pipeline) retry(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *spec, a *attemptResult, delay time.Duration) error {
	o := a.outcome(p, env)
	err := untilRedis(ctx, func() error {
		return a.start.apply(context.WithoutCancel(ctx), tasks.SetRetrying(o, delay, time.Now().Add(delay)))
	})
	if errors.Is(err, tasks.ErrStale) {
		return ranStale(log, env)
	} else if isCanceled(err) {
		return p.canceled(ctx, log, env)
	}
	p.metrics.retries.WithLabelValues(p.metrics.agent(env.Agent), o.ErrorClass).Inc()
	log.Warn("retrying", "event", "retry", "class", o.ErrorClass, "attempt", a.n,
		"max_attempts", sp.maxAttempts, "delay_ms", delay.Milliseconds(), "error", o.Error)
	return retryAfter(delay, o.Error)
}

// requeue puts back an attempt the worker's shutdown cut, without using
// an attempt. An attempt cut because its task was canceled (the record
// refuses the put-back) is acked instead.
func (p *pipeline) requeue(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult) error {
	if err := a.start.apply(context.WithoutCancel(ctx), tasks.SetCanceled(a.outcome(p, env))); errors.Is(err, tasks.ErrStale) {
		return ranStale(log, env)
	} else if isCanceled(err) {
		return p.canceled(ctx, log, env)
	}
	log.Info("attempt canceled by shutdown; task put back without using an attempt", "attempt", a.n)
	return putBack()
}

// restart schedules the task's next run after its restart delay (at least
// the backend's Retry-After), records it and acks this run; a task that
// cannot restart is dead-lettered with the reason.
func (p *pipeline) restart(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *spec, a *attemptResult) error {
	if ok, err := p.ensureStarted(ctx, log, a.start); !ok {
		return err
	}
	bg := context.WithoutCancel(ctx)
	o := a.outcome(p, env)
	next, delay, err := p.restarts.ScheduleAfter(bg, env, sp.restart, a.call.verdict.RetryAfter)
	if err != nil {
		reason := restart.Reason(err)
		if reason == "" {
			// Redis trouble: keep the task (a free retry) rather than lose it.
			log.Error("could not schedule restart; retrying the hand-off", "err", err)
			p.awaitRedis(ctx, env.ID)
			return handBack(err)
		}
		log.runEnd = runDeadLettered
		return p.deadLetter(bg, log, env, o, reason)
	}
	failpoint("before_restart_recorded") // test hook: crash between scheduling and recording
	if err := untilRedis(ctx, func() error { return p.store.Apply(bg, env.ID, tasks.SetRestarting(o, next, delay)) }); isCanceled(err) {
		// Canceled between the schedule and its record: the restart must not run.
		p.dropRun(ctx, next)
		return p.canceled(ctx, log, env)
	}
	p.metrics.restarts.WithLabelValues(p.metrics.agent(env.Agent), o.ErrorClass).Inc()
	if env.Restarts > 0 {
		p.metrics.restartResults.WithLabelValues(p.metrics.agent(env.Agent), "restarted").Inc()
	}
	log.Warn("restarting later", "event", "restart", "class", o.ErrorClass, "attempt", a.n,
		"restart", next.Restarts, "delay_ms", delay.Milliseconds(), "error", o.Error)
	failpoint("after_restart_scheduled") // test hook: crash before asynq acks this run
	return nil
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
	case isCanceled(err):
		return false, p.canceled(ctx, log, start.env)
	default:
		return false, handBack(err)
	}
}

// deadLetter stores the dead letter (with the full history) and then marks
// the task, with outcome o (the attempt's, or one without an attempt) and
// the reason. The dead letter is written first: a crash in between
// redelivers the task, and the redelivery finds the dead letter (see
// ended); Put is idempotent per task ID.
func (p *pipeline) deadLetter(ctx context.Context, log *taskLog, env *tasks.Envelope, o tasks.Outcome, reason string) error {
	ctx = context.WithoutCancel(ctx)
	c := tasks.SetDeadLettered(o)
	c.Event.At = p.store.Now().UTC()
	hist, err := p.store.History(ctx, env.ID)
	if err != nil {
		p.awaitRedis(ctx, env.ID)
		return handBack(err)
	}
	hist = append(hist, c.Event)
	e := &deadletter.Entry{
		ID: env.ID, Agent: env.Agent, Action: env.Action, Params: env.Params, CorrelationID: env.CorrelationID,
		ErrorClass: o.ErrorClass, Error: o.Error, Reason: reason, Attempts: countAttempts(hist), Restarts: env.Restarts,
		DeadLetteredAt: c.Event.At, History: hist, Queue: env.Queue, Run: env.Run, EnqueuedAt: env.EnqueuedAt,
	}
	if err := untilRedis(ctx, func() error { _, err := p.dlq.Put(ctx, e); return err }); err != nil {
		return p.putFailed(env.ID, err)
	}
	failpoint("before_dead_letter_recorded") // test hook: crash between the dead letter and its record
	if err := untilRedis(ctx, func() error { return p.store.Apply(ctx, env.ID, c) }); isCanceled(err) {
		// Canceled while its dead letter was written: a canceled task is
		// not dead-lettered.
		_, _ = p.dlq.Delete(ctx, env.ID)
		return p.canceled(ctx, log, env)
	} else if err != nil {
		p.log.Error("could not record dead letter in task history", "task_id", env.ID, "err", err)
	}
	p.metrics.deadLetters.WithLabelValues(p.metrics.agent(env.Agent), o.ErrorClass, reason).Inc()
	if env.Restarts > 0 {
		p.metrics.restartResults.WithLabelValues(p.metrics.agent(env.Agent), "dead_lettered").Inc()
	}
	p.log.Error("dead-lettered", "event", "dead_letter", "agent", env.Agent, "task_id", env.ID,
		"class", o.ErrorClass, "reason", reason, "attempt", o.Attempt, "restarts", env.Restarts, "error", o.Error)
	failpoint("after_dead_letter_recorded") // test hook: crash before asynq acks a dead letter
	return nil
}

// countAttempts counts the attempts of a history. An attempt is a
// (restart, attempt) pair: the calls of one attempt that fell back to
// other agents are several events but one attempt; an elided middle
// counts the attempt outcomes it replaced.
func countAttempts(hist []tasks.Event) int {
	type attemptID struct{ restart, attempt int }
	seen := map[attemptID]bool{}
	n := 0
	for _, h := range hist {
		if h.Event == tasks.EventElided {
			n += h.Attempts
			continue
		}
		id := attemptID{h.Restart, h.Attempt}
		if h.Attempt > 0 && h.Event != tasks.EventDeferred && h.Event != tasks.EventCanceled && !seen[id] {
			seen[id] = true
			n++
		}
	}
	return n
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
	return handBack(err)
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
	_ = p.store.Apply(bg, e.ID, tasks.Change{Patch: tasks.Patch{State: tasks.StateDeadLettered,
		ErrorClass: string(resilience.InvalidRequest), Error: msg}, Event: ev})
	p.metrics.deadLetters.WithLabelValues(p.metrics.agent(e.Agent), string(resilience.InvalidRequest), ReasonInvalidPayload).Inc()
	p.log.Error("dead-lettered", "event", "dead_letter", "task_id", e.ID, "class", resilience.InvalidRequest,
		"reason", ReasonInvalidPayload, "error", msg)
	return nil
}
