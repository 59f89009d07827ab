package delivery

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// redelivered runs the checks of a redelivery (asynq retry count > 0: a
// retry, or a run recovered from a dead worker's lease) before its gate.
// done is true when the delivery must not run: answer is then
// ProcessTask's answer.
//
//   - a run whose restart is already in asynq is superseded: dropped;
//   - a run that has already ended is acked without calling the agent;
//   - a retry, which asynq schedules in whole seconds and so may deliver
//     up to a second early, waits for the rest of its computed delay; so
//     does the first delivery of a delayed run (Envelope.NotBefore).
func (p *Executor) redelivered(ctx context.Context, log *taskLog, env *tasks.Envelope) (answer error, done bool) {
	if metaOf(ctx).retried == 0 {
		// A first delivery of a delayed run (a scheduled task, a
		// restart) may likewise come up to a second early.
		if env.NotBefore > 0 {
			if err := waitUntilDue(ctx, time.UnixMilli(env.NotBefore)); err != nil {
				return putBack(), true
			}
		}
		return nil, false
	}
	if p.superseded(ctx, env) {
		log.Warn("dropping a redelivered run whose restart was already scheduled", "run", env.Run)
		return nil, true
	}
	rs, ended := p.ended(ctx, log, env)
	if ended {
		return nil, true
	}
	if err := waitUntilDue(ctx, rs.NextAttemptAt); err != nil {
		return putBack(), true
	}
	return nil, false
}

// superseded reports whether env's next run already exists in asynq: a
// worker that scheduled a restart and died before recording it leaves the
// record at this run, so Begin's fence cannot tell, and asynq's lease
// recovery redelivers this run. Only redeliveries (retries) are checked,
// at one lookup each; an error counts as "not superseded" (run it rather
// than lose it).
func (p *Executor) superseded(ctx context.Context, env *tasks.Envelope) bool {
	if p.insp == nil {
		return false
	}
	q := metaOf(ctx).queue
	next := *env
	next.Run++
	info, err := p.insp.GetTaskInfo(q, next.AsynqID())
	if err != nil {
		return false
	}
	// Record the restart the dead worker did not, unless the next run has
	// moved the record on already.
	if n, err := tasks.Decode(info.Payload); err == nil {
		out, err := p.rec.apply(ctx, delivery(env, 0),
			record.RestartRecovered(p.report(env, 0, "", ""), record.NextRun{Run: n.Run, Restarts: n.Restarts}))
		if err == nil && out == record.Canceled {
			p.dropRun(ctx, n) // the task was canceled before the restart was recorded
		}
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
func (p *Executor) ended(ctx context.Context, log *taskLog, env *tasks.Envelope) (record.RunState, bool) {
	rs, err := p.rec.runState(ctx, env.ID)
	if err != nil {
		return record.RunState{}, false
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
	_, _ = p.rec.apply(ctx, delivery(env, 0), record.DeadLettered(p.report(env, 0, resilience.Class(e.ErrorClass), e.Error), e.Reason))
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
	return startstop.Sleep(ctx, wait)
}
