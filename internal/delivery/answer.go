package delivery

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/tasks"
	"github.com/hibiken/asynq"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// Dead-letter reasons the pipeline itself gives (stable strings).
const (
	ReasonInvalidPayload    = "invalid_payload"
	ReasonUnknownAgent      = "unknown_agent"
	ReasonNotRetryable      = "not_retryable"
	ReasonAttemptsExhausted = "attempts_exhausted"
)

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

// ReasonDeadlineExceeded is the dead-letter reason of a task whose
// deadline (tasks.Task.Deadline) passed before it succeeded: it was still
// waiting, its running attempt was stopped, or its next retry or restart
// would have been due after it. Its class is timeout.
const ReasonDeadlineExceeded = "deadline_exceeded"

// Budgets in the pipeline (config budget on tenants and agents; the
// keeper is budget.Keeper). Before its breaker is asked, a task whose
// tenant or agent has a budget with no room left is not started: it is
// deferred (no attempt used, a history event naming the budget) until
// about when the window has room, at most budget.DeferMax at a time.
// An agent with budget.fallback sends its tasks to its fallback agents
// instead while its own budget has no room (a fallback agent with a
// budget of its own serves only while that has room, whatever sent the
// call to it). After each call its usage is debited from the tenant's
// budget and from the budget of the agent that served it. A task with a cap of its own
// (max_tokens, max_cost_usd) whose record's usage sum (every attempt's,
// every run's) reached it is dead-lettered (budget_exhausted) before its
// next attempt. Tasks with no budget and no cap cost no Redis command here.

// ReasonBudgetExhausted is the dead-letter reason of a task whose own cap
// (max_tokens, max_cost_usd) was reached.
const ReasonBudgetExhausted = "budget_exhausted"

// Run outcomes (the agentq.outcome attribute of a run span).
const (
	runSucceeded    = "succeeded"
	runRestarting   = "restarting"
	runDeadLettered = "dead_lettered"
	runCanceled     = "canceled"
)

// fallbackOverLimit is the class label of agentq_fallbacks_total when the
// primary's limits did not admit the call.
const fallbackOverLimit = "over_limit"

// fallbackBreakerOpen is the class label of agentq_fallbacks_total when the
// primary's breaker did not admit the call.
const fallbackBreakerOpen = "breaker_open"

// fallbackOverBudget is the class label of agentq_fallbacks_total when the
// primary's own budget had no room and it has budget.fallback (budgets.go).
const fallbackOverBudget = "over_budget"

// deadlineText is the error of a task whose deadline passed when (a
// phrase: "before the task could start").
func deadlineText(env *tasks.Envelope, when string) string {
	return fmt.Sprintf("deadline exceeded: the task's deadline (%s) passed %s",
		env.DeadlineTime().UTC().Format(time.RFC3339Nano), when)
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

// meta is what asynq tells a handler of the delivery it runs: the
// delivery's asynq task ID, its queue and how many failed deliveries of
// the task came before it.
type meta struct {
	id, queue string
	retried   int
	ok        bool // the context carries a delivery
}

type metaKey struct{}

// metaOf is the delivery ctx carries: asynq's, or one withMeta set.
func metaOf(ctx context.Context) meta {
	if m, ok := ctx.Value(metaKey{}).(meta); ok {
		return m
	}
	id, ok := asynq.GetTaskID(ctx)
	q, _ := asynq.GetQueueName(ctx)
	r, _ := asynq.GetRetryCount(ctx)
	return meta{id: id, queue: q, retried: r, ok: ok}
}

// withMeta gives ctx a delivery of its own: the pipeline runs a task
// without an asynq server (tests of its decisions).
func withMeta(ctx context.Context, id, queue string, retried int) context.Context {
	return context.WithValue(ctx, metaKey{}, meta{id: id, queue: queue, retried: retried, ok: true})
}

// attemptNumber is the delivery's attempt number within its run.
func (m meta) attemptNumber() int { return m.retried + 1 }

// FailpointEnv names the environment variable that arms a failpoint.
//
// This is a TEST HOOK. When AGENTQ_FAILPOINT holds the name of a failpoint,
// the worker kills its own process with SIGKILL the moment it reaches that
// point, so crash tests can hit a precise window (for example, between
// scheduling a restart and acknowledging the run to asynq) deterministically.
// It is never set in production; unset, a failpoint costs one environment
// lookup.
//
// Failpoints:
//
//	after_restart_scheduled  in the restart branch of the pipeline, after the
//	                         restart is scheduled and the "restarting"
//	                         transition is written, before the handler
//	                         returns (asynq still holds the run's lease)
//	before_restart_recorded  after the restart is scheduled, before its
//	                         "restarting" transition is written
//	after_success_recorded   after a success is written, before asynq's ack
//	before_dead_letter_recorded
//	                         after the dead letter is stored, before the
//	                         task record is marked dead_lettered
//	after_dead_letter_recorded
//	                         after both, before asynq's ack
//	call_started             as an agent call starts, just before the
//	                         runner runs (on a first delivery, before the
//	                         attempt's start is written beginGrace into
//	                         the call)
const FailpointEnv = "AGENTQ_FAILPOINT"

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
