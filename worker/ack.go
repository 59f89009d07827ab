package worker

import (
	"context"
	"errors"
	"os"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/wakeup"
	"github.com/agentq/agentq/tasks"
)

// A quick success's record write rides asynq's acknowledgement of the
// delivery. The handler leaves the write in the worker's wakeup.Acks and
// returns to asynq at once; asynq's done of the delivery then runs the
// record write and asynq's own script as one (tasks.BeginTransitionAcked),
// so a task costs Redis one script call fewer and its record and its ack
// land together. What keeps it safe:
//
//   - Only a delivery whose handler returns no error with its context
//     still live leaves a write: asynq then calls done at once, unless
//     the delivery's lease was lost (the task runs again elsewhere, as it
//     would have anyway). If the context ends as the handler returns,
//     asynq may answer with a retry instead: the AsynqClient then writes
//     the success first (Ack.Alone), and the retry finds the run ended.
//   - The wait-out of a Redis outage (untilRedis) runs in the hook, within
//     asynq's done, so the record and the ack land when Redis is back.
//   - A new delivery of the task drops a write an earlier one left
//     (Acks.Forget), so a write never rides another delivery's ack.
//   - Once the worker shuts down, successes are written before the
//     handler returns, as before (asynq may abandon a delivery at its
//     shutdown deadline without acking it); writes still waiting when
//     the worker has stopped run alone (Acks.Drain).
//   - Only on the worker's own asynq server (Run puts the Acks in the
//     tasks' base context), not on a Redis Cluster (asynq's keys and the
//     record are in different slots), not with redis.wait_replicas (the
//     record write then goes through the worker's batcher, which WAITs for
//     the replicas), and not while the crash test hook
//     after_success_recorded is armed (there is no gap to crash in).

type acksKey struct{}

// withAcks is the base context of the worker's own asynq server.
func withAcks(ctx context.Context, acks *wakeup.Acks) context.Context {
	if acks == nil {
		return ctx
	}
	return context.WithValue(ctx, acksKey{}, acks)
}

// acksOf returns the Acks a delivery's write may ride, or nil.
func acksOf(ctx context.Context) *wakeup.Acks {
	a, _ := ctx.Value(acksKey{}).(*wakeup.Acks)
	return a
}

// newAcks returns the worker's Acks, or nil where writes must not ride
// asynq's ack (see above).
func newAcks(rdb redis.UniversalClient, replicas int, p *pipeline) *wakeup.Acks {
	if _, cluster := rdb.(*redis.ClusterClient); cluster || replicas > 0 || os.Getenv(FailpointEnv) == "after_success_recorded" {
		return nil
	}
	return wakeup.NewAcks(func(id string) {
		p.log.Warn("asynq never acknowledged a delivery that succeeded; its success was not recorded and the task runs again", "task_id", id)
	})
}

// forgetAck drops a write an earlier delivery of this task left and
// asynq never acknowledged (its lease was lost).
func forgetAck(ctx context.Context) {
	if acks := acksOf(ctx); acks != nil && acks.Len() > 0 {
		if id, ok := asynq.GetTaskID(ctx); ok {
			acks.Forget(id)
		}
	}
}

// ackSuccess leaves the success c of a delivery whose start is not in the
// record yet to ride asynq's acknowledgement, and reports whether it did.
func (p *pipeline) ackSuccess(ctx context.Context, log *taskLog, env *tasks.Envelope, a *attemptResult, c tasks.Change) bool {
	acks := acksOf(ctx)
	if acks == nil || ctx.Err() != nil || p.stopping.Load() || !a.start.unwritten() {
		return false
	}
	id, ok := asynq.GetTaskID(ctx)
	if !ok {
		return false
	}
	acks.Put(id, &successAck{p: p, log: log, env: env, c: c})
	return true
}

// successAck is a success's record write waiting for asynq's ack.
type successAck struct {
	p   *pipeline
	log *taskLog
	env *tasks.Envelope
	c   tasks.Change
}

// WithDone implements wakeup.Ack.
func (s *successAck) WithDone(ctx context.Context, keys []string, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	done := tasks.AsynqDone{Keys: keys, Args: args}
	err := untilRedis(ctx, func() error {
		_, err := s.p.store.BeginTransitionAcked(ctx, s.env, s.c.Patch, s.c.Event, done)
		return err
	})
	if acked := s.p.recorded(ctx, s.log, s.env, err); !acked {
		cmd.SetErr(err)
		return cmd
	}
	cmd.SetVal("OK")
	return cmd
}

// Alone implements wakeup.Ack.
func (s *successAck) Alone(ctx context.Context) {
	err := untilRedis(ctx, func() error {
		_, err := s.p.store.BeginTransition(ctx, s.env, s.c.Patch, s.c.Event)
		return err
	})
	s.p.recorded(ctx, s.log, s.env, err)
}

// recorded reports what became of a success's record write, err, as
// succeed does, and whether the delivery's ack is to go ahead (false: err
// is an error of Redis or of asynq's done, for asynq to hear).
func (p *pipeline) recorded(ctx context.Context, log *taskLog, env *tasks.Envelope, err error) bool {
	switch {
	case errors.Is(err, tasks.ErrStale):
		_ = ranStale(log, env)
	case isCanceled(err):
		_ = p.canceled(ctx, log, env)
	case err != nil:
		var rerr redis.Error
		if !errors.As(err, &rerr) || rerr.Error() != "NOT FOUND" {
			log.Error("could not record success", "err", err)
		}
		return errors.Is(err, tasks.ErrEnded)
	default:
		if env.Restarts > 0 {
			p.metrics.restartResults.WithLabelValues(p.metrics.agent(env.Agent), "succeeded").Inc()
		}
	}
	return true
}
