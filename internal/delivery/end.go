package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"time"
)

// report is what the events of attempt (0: none) of env's current run,
// served by env's own agent, say of it.
func (p *Executor) report(env *tasks.Envelope, attempt int, class resilience.Class, errText string) record.Attempt {
	return record.Attempt{Attempt: attempt, Restart: env.Restarts, Agent: env.Agent, Worker: p.workerID,
		ErrorClass: string(class), Error: errText}
}

// now is the pipeline's clock (a dead letter's time).
func (p *Executor) now() time.Time { return time.Now() }

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

// answer is ProcessTask's answer for a write that was not applied: out
// says why, or err that Redis stayed away (the task goes back to its
// queue a second later without using an attempt; nothing is lost).
func (p *Executor) answer(ctx context.Context, log *taskLog, env *tasks.Envelope, out record.Outcome, err error) error {
	switch {
	case err != nil:
		log.Error("could not write the task record; task put back", "err", err)
		p.awaitRedis(ctx, env.ID)
		return handBack(err)
	case out == record.Stale:
		log.Info("dropping stale delivery of a superseded run; its outcome, if it ran, is not recorded", "run", env.Run)
	case out == record.Ended:
		log.Warn("acking a delivery of a run that has already ended; its outcome is not recorded again", "run", env.Run)
	case out == record.Canceled:
		return p.canceled(ctx, log, env)
	}
	return nil
}

// awaitRedis waits (as untilRedis does) until Redis answers a read of task
// id's record, so that what the handler returns next reaches asynq.
func (p *Executor) awaitRedis(ctx context.Context, id string) {
	_ = untilRedis(ctx, func() error {
		return p.rec.ping(context.WithoutCancel(ctx), id)
	})
}

// endRunSpan writes the span of env's run, which ended with outcome after
// its attempt a (nil: none was made), with the IDs its attempts' spans
// point to (tracing.RunIDs). It starts when the run was due: its delayed
// start (restarts, delayed tasks), else the enqueue for a first run; a
// requeued run (neither) starts with its last attempt.
func (p *Executor) endRunSpan(env *tasks.Envelope, a *attemptResult, outcome, class string) {
	if outcome == "" || !p.traced {
		return
	}
	parent := tracing.Parse(env.Traceparent, env.Tracestate)
	tid, sid := tracing.RunIDs(parent, env.ID, env.EnqueuedAt, env.Run)
	now := time.Now()
	start := now
	switch {
	case env.NotBefore > 0:
		start = time.UnixMilli(env.NotBefore)
	case env.Run == 0 && !env.EnqueuedAt.IsZero():
		start = env.EnqueuedAt
	case a != nil:
		start = now.Add(-a.call.elapsed)
	}
	if start.After(now) {
		start = now
	}
	ctx := context.Background()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start)}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := p.tracer.Start(tracing.WithIDs(ctx, tid, sid), tracing.SpanRun, opts...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrTaskID, env.ID), attribute.String(tracing.AttrAgent, env.Agent),
			attribute.String(tracing.AttrAction, env.Action), attribute.String(tracing.AttrQueue, env.Queue),
			attribute.Int(tracing.AttrRun, env.Run), attribute.Int(tracing.AttrRestart, env.Restarts),
			attribute.String(tracing.AttrOutcome, outcome), attribute.String(tracing.AttrErrorClass, class))
		if a != nil {
			span.SetAttributes(attribute.Int(tracing.AttrAttempt, a.n))
		}
		if outcome != runSucceeded {
			span.SetStatus(codes.Error, outcome+": "+class)
		}
		if span.SpanContext().SpanID() != sid {
			p.log.Debug("tracing: the tracer provider does not use tracing.IDGenerator; run spans are not the parents of their attempts")
		}
	}
	span.End(trace.WithTimestamp(now))
}

// ExpireWaiting dead-letters env, past its deadline while it waited in
// state (the deadline sweep's find). expired: this call dead-lettered it;
// err: Redis could not take the write (try again next tick).
func (p *Executor) ExpireWaiting(ctx context.Context, env *tasks.Envelope, state string) (expired bool, err error) {
	log := &taskLog{base: p.log, env: env}
	rep := p.report(env, 0, resilience.Timeout, deadlineText(env, "while the task was waiting ("+state+")"))
	answer := p.deadLetter(ctx, log, env, rep, ReasonDeadlineExceeded)
	var d *delayed
	if errors.As(answer, &d) {
		return false, errors.New(d.cause)
	}
	return answer == nil, nil
}

// A task canceled on request (tasks.Client.Cancel) has its record marked
// canceled before anything else, and every write of the pipeline to the
// record is then refused (record.Canceled). The pipeline tells such a
// cancel from its own shutdown (both end the delivery's context) by that
// refusal: a shutdown's put-back is recorded and the task goes back to its
// queue; a canceled task's writes are refused and the delivery is acked —
// not retried, restarted or dead-lettered (and its breaker never counts
// it: a call cut by a context's end is class canceled, OutcomeIgnore).

// canceled is ProcessTask's answer for a delivery of a canceled task: it
// is acked, and its outcome (if its agent ran) is not recorded. When asynq
// ended the delivery's context (CancelProcessing), asynq has already put
// the delivery back for a retry without waiting for this answer: that
// leftover is deleted here (its redelivery would be acked unrun anyway).
func (p *Executor) canceled(ctx context.Context, log *taskLog, env *tasks.Envelope) error {
	log.Info("task canceled: delivery acked, its outcome is not recorded", "event", "canceled", "run", env.Run)
	if ctx.Err() != nil {
		m := metaOf(ctx)
		p.dropLeftover(m.queue, m.id)
	}
	return acked(runCanceled)
}

// leftoverTries and leftoverEvery bound dropLeftover: asynq's processor
// moves a delivery whose context ended to its retry set within moments.
const (
	leftoverTries = 20
	leftoverEvery = 100 * time.Millisecond
)

// dropLeftover deletes asynq task id from queue once asynq has put it
// back (it refuses to delete an active task), trying for up to ~2s in the
// background. Best effort: a leftover that stays is redelivered and acked
// without running (RunState.Ended covers canceled).
func (p *Executor) dropLeftover(queue, id string) {
	if p.insp == nil || queue == "" || id == "" {
		return
	}
	go func() {
		for range leftoverTries {
			time.Sleep(leftoverEvery)
			err := p.insp.DeleteTask(queue, id)
			if err == nil || errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
				return
			}
		}
	}()
}

// dropRun deletes run (a restart this worker scheduled for a task that was
// canceled meanwhile) from its queue and frees its restart-index slot.
func (p *Executor) dropRun(ctx context.Context, run *tasks.Envelope) {
	if p.insp != nil {
		_ = p.insp.DeleteTask(run.Queue, run.AsynqID())
	}
	_ = p.restarts.Started(context.WithoutCancel(ctx), run.ID)
}

// unknownAgent dead-letters a task whose agent this worker does not run
// (not_supported).
func (p *Executor) unknownAgent(ctx context.Context, log *taskLog, env *tasks.Envelope) error {
	p.endRunSpan(env, nil, runDeadLettered, string(resilience.NotSupported))
	return p.deadLetter(ctx, log, env, p.report(env, 0, resilience.NotSupported,
		fmt.Sprintf("unknown agent %q: no runner is configured or registered for it", env.Agent)), ReasonUnknownAgent)
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
