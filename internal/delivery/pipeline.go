package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// Dead-letter reasons the pipeline itself gives (stable strings).
const (
	ReasonInvalidPayload    = "invalid_payload"
	ReasonUnknownAgent      = "unknown_agent"
	ReasonNotRetryable      = "not_retryable"
	ReasonAttemptsExhausted = "attempts_exhausted"
)

// quickStop reports whether a call whose context was canceled was stopped
// because its task was canceled (asynq's CancelProcessing) rather than by
// the worker's shutdown: its exec agent then gets SIGKILL sooner
// (agent.WithQuickStop).
func (p *Executor) quickStop() bool { return !p.stopping.Load() }

// ProcessTask implements asynq.Handler. It never panics on a task and
// returns an error only to ask asynq for a (possibly free) retry: see the
// answers below.
func (p *Executor) ProcessTask(ctx context.Context, t *asynq.Task) (err error) {
	defer p.recoverPanic(&err)
	defer func() { err = toAsynq(err) }()
	env, derr := tasks.Decode(t.Payload())
	if derr != nil {
		return p.deadLetterPayload(ctx, t, env, derr)
	}
	forgetAck(ctx)
	if m := metaOf(ctx); p.track != nil && m.ok {
		defer p.track(m.id, env.ID, env.Agent, m.queue)()
	}
	p.freeRestartSlot(ctx, env)
	sp, ok := p.specs[env.Agent]
	if !ok {
		p.endRunSpan(env, nil, runDeadLettered, string(resilience.NotSupported))
		return p.deadLetter(ctx, &taskLog{base: p.log, env: env}, env, p.report(env, 0, resilience.NotSupported,
			fmt.Sprintf("unknown agent %q: no runner is configured or registered for it", env.Agent)), ReasonUnknownAgent)
	}
	log := &taskLog{base: p.log, env: env}
	if answer, done := p.redelivered(ctx, log, env); done {
		return answer
	}
	if answer, done := p.pastDeadline(ctx, log, env); done {
		return answer
	}
	g, answer, done := p.gateBudgets(ctx, log, env, sp)
	if done {
		return answer
	}
	if g == nil { // g: a fallback serving while sp's budget has no room
		if g, answer = p.gate(ctx, log, env, sp); g == nil {
			return answer
		}
	}
	actx, span := p.startAttemptSpan(ctx, env, sp, g)
	a, answer := p.attempt(actx, log, env, sp, g)
	p.endAttemptSpan(span, env, sp, a)
	if a == nil {
		return answer
	}
	return p.settle(ctx, log, env, sp, a)
}

// recoverPanic turns a panic in the pipeline into a retry of the task.
func (p *Executor) recoverPanic(err *error) {
	if r := recover(); r != nil {
		p.log.Error("pipeline panic; task put back", "panic", fmt.Sprint(r))
		*err = retryAfter(time.Second, fmt.Sprintf("panic: %v", r))
	}
}

// freeRestartSlot frees a restart run's slot in the restart index as soon
// as the run is delivered, whatever becomes of it (restart.Scheduler.Started).
func (p *Executor) freeRestartSlot(ctx context.Context, env *tasks.Envelope) {
	if env.Restarts > 0 && env.Run > 0 {
		_ = p.restarts.Started(ctx, env.ID)
	}
}

// report is what the events of attempt (0: none) of env's current run,
// served by env's own agent, say of it.
func (p *Executor) report(env *tasks.Envelope, attempt int, class resilience.Class, errText string) record.Attempt {
	return record.Attempt{Attempt: attempt, Restart: env.Restarts, Agent: env.Agent, Worker: p.workerID,
		ErrorClass: string(class), Error: errText}
}

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
// IsFailure read (retryDelay, isFailure).

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

// deferUntil: a breaker's deferral; back after d without using an attempt.
func deferUntil(d time.Duration, cause string) error {
	return &delayed{kind: answerDefer, delay: d, cause: cause}
}

// deferEarly: a limit's deferral, which may come back up to a second early
// (it waits for the rest in its worker's line).
func deferEarly(d time.Duration, cause string) error {
	return &delayed{kind: answerDeferEarly, delay: d, cause: cause}
}

// putBack: back to the queue at once without using an attempt (the
// worker is shutting down).
func putBack() error {
	return &delayed{kind: answerPutBack, cause: "interrupted by worker shutdown"}
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

// RetryDelay is asynq's RetryDelayFunc: the delay the pipeline chose.
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

// now is the pipeline's clock (a dead letter's time).
func (p *Executor) now() time.Time { return time.Now() }

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

// StateValue is a breaker state as the agentq_breaker_state gauge shows it.
func StateValue(s breaker.State) float64 {
	switch s {
	case breaker.StateHalfOpen:
		return 1
	case breaker.StateOpen:
		return 2
	}
	return 0
}

// Truncate cuts s to n bytes, marking the cut with an ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
