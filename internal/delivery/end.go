package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

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
	c := record.DeadLettered(record.Attempt{ErrorClass: string(resilience.InvalidRequest), ClassifiedBy: string(resilience.ByStructure),
		Error: msg, Worker: p.workerID}, ReasonInvalidPayload)
	c.Event.At = now
	entry := &deadletter.Entry{
		ID: e.ID, Agent: e.Agent, Action: e.Action, Params: e.Params, CorrelationID: e.CorrelationID,
		ErrorClass: string(resilience.InvalidRequest), ClassifiedBy: string(resilience.ByStructure), Error: msg, Reason: ReasonInvalidPayload,
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
		ErrorClass: rep.ErrorClass, ClassifiedBy: rep.ClassifiedBy, Error: rep.Error, Reason: reason, Attempts: max(v.Attempts, rep.Attempt), Restarts: env.Restarts,
		DeadLetteredAt: c.Event.At, History: append(v.History, copied), Queue: env.Queue, Run: env.Run, EnqueuedAt: env.EnqueuedAt,
		Tenant: env.Tenant, Priority: env.Priority,
	}
	if err := untilRedis(ctx, func() error { _, err := p.dlq.Put(ctx, e); return err }); err != nil {
		return p.putFailed(env.ID, err)
	}
	failpoint("before_dead_letter_recorded") // test hook: crash between the dead letter and its record
	d := delivery(env, rep.Attempt)
	d.Worker = p.workerID
	out, err := p.rec.apply(ctx, d, c)
	if err == nil && out != record.Applied {
		p.dropDeadLetter(ctx, env)
		return p.answer(ctx, log, env, out, nil)
	} else if err != nil {
		p.log.Error("could not record dead letter in task history", "task_id", env.ID, "err", err)
	}
	p.metrics.deadLetters.WithLabelValues(p.metrics.agent(env.Agent), rep.ErrorClass, reason).Inc()
	p.metrics.ended(env, "dead_lettered")
	p.childEnded(ctx, log, env, tasks.ChildEnd{State: record.StateDeadLettered, ErrorClass: rep.ErrorClass, Error: rep.Error})
	if env.Restarts > 0 {
		p.metrics.restartResults.WithLabelValues(p.metrics.agent(env.Agent), "dead_lettered").Inc()
	}
	p.log.Error("dead-lettered", "event", "dead_letter", "agent", env.Agent, "task_id", env.ID,
		"class", rep.ErrorClass, "reason", reason, "attempt", rep.Attempt, "restarts", env.Restarts, "error", rep.Error)
	failpoint("after_dead_letter_recorded") // test hook: crash before asynq acks a dead letter
	return nil
}

// childEnded tells env's parent, when it has one, how env ended (end,
// with env's ID): a child's success or dead letter (the deadline sweep's
// too). Not for a task without a parent: no command. A report Redis did
// not take is logged; the children repair makes it later.
func (p *Executor) childEnded(ctx context.Context, log *taskLog, env *tasks.Envelope, end tasks.ChildEnd) {
	if env.Parent == "" || p.children == nil {
		return
	}
	end.ID = env.ID
	if err := p.children.ReportChildEnd(context.WithoutCancel(ctx), env.Parent, end); err != nil {
		log.Warn("could not tell the parent of the child's end; the children repair will", "parent", env.Parent, "err", err)
	}
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

func (t *taskLog) Info(msg string, args ...any) { t.get().Info(msg, args...) }

func (t *taskLog) Warn(msg string, args ...any) { t.get().Warn(msg, args...) }

func (t *taskLog) Error(msg string, args ...any) { t.get().Error(msg, args...) }

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

// A task canceled on request (tasks.Client.Cancel) has its record marked
// canceled before anything else, and every write of the delivery to the
// record is then refused (record.Canceled). The delivery tells such a
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

// awaitRedis waits (as untilRedis does) until Redis answers a read of task
// id's record, so that what the handler returns next reaches asynq.
func (p *Executor) awaitRedis(ctx context.Context, id string) {
	_ = untilRedis(ctx, func() error {
		return p.rec.ping(context.WithoutCancel(ctx), id)
	})
}

// report is what the events of attempt (0: none) of env's current run,
// served by env's own agent, say of it. A class given here is the
// worker's own verdict (an unknown agent, a deadline, a budget): decided
// by structure.
func (p *Executor) report(env *tasks.Envelope, attempt int, class resilience.Class, errText string) record.Attempt {
	rep := record.Attempt{Attempt: attempt, Restart: env.Restarts, Agent: env.Agent, Worker: p.workerID,
		ErrorClass: string(class), Error: errText}
	if class != "" {
		rep.ClassifiedBy = string(resilience.ByStructure)
	}
	return rep
}

// now is the delivery's clock (a dead letter's time).
func (p *Executor) now() time.Time { return time.Now() }

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

// Dead-letter reasons the delivery itself gives (stable strings).
const (
	ReasonInvalidPayload    = "invalid_payload"
	ReasonUnknownAgent      = "unknown_agent"
	ReasonNotRetryable      = "not_retryable"
	ReasonAttemptsExhausted = "attempts_exhausted"
)

// ReasonDeadlineExceeded is the dead-letter reason of a task whose
// deadline (tasks.Task.Deadline) passed before it succeeded: it was still
// waiting, its running attempt was stopped, or its next retry or restart
// would have been due after it. Its class is timeout.
const ReasonDeadlineExceeded = "deadline_exceeded"

// ReasonBudgetExhausted is the dead-letter reason of a task whose own cap
// (max_tokens, max_cost_usd) was reached.
const ReasonBudgetExhausted = "budget_exhausted"

// The answers ProcessTask gives asynq, one name each:
//
//	ack        nil: the delivery is done (succeeded, dead-lettered, dropped as
//	           stale, already ended); acked(end) says so when its run ended
//	           otherwise than the step decided (canceled meanwhile, a restart
//	           that could not be scheduled) and ProcessTask turns it into nil
//	retryAfter a failed attempt: back after its backoff, counted
//	deferUntil a breaker's deferral: back after the delay, no attempt used
//	deferEarly a limit's deferral: the same, up to a second early
//	putBack    the worker's shutdown: back at once, no attempt used
//	handBack   Redis could not take a write: back a second later, no attempt used
//
// Every answer but the ack is a *delayed, which asynq's RetryDelayFunc and
// IsFailure read (RetryDelay, IsFailure). The answers that put a task back
// without using an attempt before its call (deferUntil, deferEarly,
// putBack) are made by admission and live there (admit.go).

// answerKind is which answer a *delayed is.
type answerKind int

const (
	answerRetry answerKind = iota
	answerDefer
	answerDeferEarly
	answerPutBack
	answerHandBack
)

// delayed is an answer that puts the task back after a delay.
type delayed struct {
	kind  answerKind
	delay time.Duration
	cause string
}

func (d *delayed) Error() string { return d.cause }

// failure: only a failed attempt uses one.
func (d *delayed) failure() bool { return d.kind == answerRetry }

// exact: the task comes back at its delay, up to a second early (asynq
// keeps due times in whole seconds); the other answers come back at most a
// second late instead (see retryDelay).
func (d *delayed) exact() bool { return d.kind == answerRetry || d.kind == answerDeferEarly }

// retryAfter: a failed attempt; asynq retries it after d, counting it.
func retryAfter(d time.Duration, cause string) error {
	return &delayed{kind: answerRetry, delay: d, cause: cause}
}

// handBack: back to the queue a second later without using an attempt,
// because Redis could not take the step's write; nothing is lost.
func handBack(err error) error {
	return &delayed{kind: answerHandBack, delay: time.Second, cause: err.Error()}
}

// ackedAs is an ack whose run ended otherwise than its step decided: end
// is the run's end for its span (runCanceled, runDeadLettered).
type ackedAs struct{ end string }

func (a *ackedAs) Error() string { return "acked: run " + a.end }

// acked is the ack of a delivery whose run ended as end.
func acked(end string) error { return &ackedAs{end: end} }

// runEnd is how a step's answer says its run ended, or "" when it ended
// as decided.
func runEnd(answer error) string {
	if answer == nil {
		return "" // the common case, without errors.As's allocation
	}
	var a *ackedAs
	if errors.As(answer, &a) {
		return a.end
	}
	return ""
}

// toAsynq is the answer asynq hears: an ack for every ackedAs.
func toAsynq(answer error) error {
	if runEnd(answer) != "" {
		return nil
	}
	return answer
}

// RetryDelay is asynq's RetryDelayFunc: the delay the delivery chose.
func RetryDelay(_ int, err error, _ *asynq.Task) time.Duration {
	var d *delayed
	if errors.As(err, &d) {
		if !d.exact() && d.delay > 0 {
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

// IsFailure is asynq's IsFailure: only real attempts count.
func IsFailure(err error) bool {
	var d *delayed
	if errors.As(err, &d) {
		return d.failure()
	}
	return err != nil
}

// Run outcomes (the agentq.outcome attribute of a run span).
const (
	runSucceeded    = "succeeded"
	runRestarting   = "restarting"
	runSuspended    = "suspended"
	runDeadLettered = "dead_lettered"
	runCanceled     = "canceled"
)

// failpoint kills the process with SIGKILL when AGENTQ_FAILPOINT equals name
// (a test hook; see FailpointEnv). SIGKILL runs no deferred functions and no
// shutdown: the process dies as in a crash.
func failpoint(name string) {
	if os.Getenv(FailpointEnv) != name {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not catchable; never go on past the failpoint
}
