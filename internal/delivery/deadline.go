package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// ReasonDeadlineExceeded is the dead-letter reason of a task whose
// deadline (tasks.Task.Deadline) passed before it succeeded: it was still
// waiting, its running attempt was stopped, or its next retry or restart
// would have been due after it. Its class is timeout.
const ReasonDeadlineExceeded = "deadline_exceeded"

// A task's deadline, in the pipeline (the sweeper, for the tasks no worker
// takes in time, is in sweep.go):
//
//   - a delivery taken at or after the deadline is dead-lettered without
//     calling the agent (pastDeadline);
//   - a call is given the time left to the deadline when that is shorter
//     than its agent's timeout (callDeadline), and a call the deadline cut
//     is told apart from an ordinary timeout (callResult.deadline): it does
//     not count against its agent's breaker;
//   - a failed attempt whose retry or restart would be due at or after the
//     deadline, or that the deadline cut, is dead-lettered instead
//     (overDeadline).

// pastDeadline dead-letters a delivery of env taken at or after its
// deadline, without calling the agent: done is true when it did, and
// answer is then ProcessTask's answer.
func (p *Executor) pastDeadline(ctx context.Context, log *taskLog, env *tasks.Envelope) (answer error, done bool) {
	if !env.PastDeadline(time.Now()) {
		return nil, false
	}
	p.endRunSpan(env, nil, runDeadLettered, string(resilience.Timeout))
	rep := p.report(env, 0, resilience.Timeout, deadlineText(env, "before the task could start"))
	return p.deadLetter(ctx, log, env, rep, ReasonDeadlineExceeded), true
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

// overDeadline reports whether the decision d for attempt a of env (by
// its agent sp's policy) gives way to the task's deadline at now: the
// deadline cut the attempt's call, or has passed, or the retry or the
// restart d would make would be due at or after it. It then turns d and
// a into the dead letter: reason deadline_exceeded, class timeout, the
// attempt's own failure kept in the error text.
func overDeadline(env *tasks.Envelope, sp *Spec, a *attemptResult, d *resilience.Decision, now time.Time) bool {
	if env.Deadline == 0 || d.Action == resilience.ActionSucceed || d.Action == resilience.ActionRequeue {
		return false
	}
	why := ""
	switch {
	case a.call.deadline:
		why = "while its attempt was running"
	case env.PastDeadline(now):
		why = "before its attempt ended"
	case d.Action == resilience.ActionRetry && env.PastDeadline(now.Add(d.Delay)):
		why = fmt.Sprintf("before its next attempt would be due (in %s)", d.Delay.Round(time.Millisecond))
	case d.Action == resilience.ActionRestart:
		delay, err := sp.restart.Delay(env.Restarts)
		if err != nil || !env.PastDeadline(now.Add(max(delay, d.Delay))) {
			return false
		}
		why = fmt.Sprintf("before its restart would be due (in %s)", max(delay, d.Delay).Round(time.Millisecond))
	default:
		return false
	}
	if !a.call.deadline {
		a.call.errText = Truncate(fmt.Sprintf("%s; the attempt failed with class %s: %s", deadlineText(env, why), a.call.verdict.Class, a.call.errText), 2000)
	}
	a.call.verdict.Class = resilience.Timeout
	*d = resilience.Decision{Action: resilience.ActionDeadLetter, Class: resilience.Timeout, Reason: ReasonDeadlineExceeded}
	return true
}

// deadlineText is the error of a task whose deadline passed when (a
// phrase: "before the task could start").
func deadlineText(env *tasks.Envelope, when string) string {
	return fmt.Sprintf("deadline exceeded: the task's deadline (%s) passed %s",
		env.DeadlineTime().UTC().Format(time.RFC3339Nano), when)
}

// View is the record's view of task id (the deadline sweep reads it).
func (p *Executor) View(ctx context.Context, id string) (*record.View, error) {
	return p.rec.view(ctx, id)
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
