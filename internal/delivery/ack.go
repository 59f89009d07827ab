package delivery

import (
	"context"
	"errors"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/wakeup"
)

// A quick success's record write rides asynq's acknowledgement of the
// delivery. The handler leaves the write in the worker's wakeup.Acks and
// returns to asynq at once; asynq's done of the delivery then runs the
// record write and asynq's own script as one (record.Store.ApplyAcked),
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
func newAcks(rdb redis.UniversalClient, replicas int, p *Executor) *wakeup.Acks {
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
		if m := metaOf(ctx); m.ok {
			acks.Forget(m.id)
		}
	}
}

// ackCompleter is the completer of a worker whose successes may ride
// asynq's ack: a success whose delivery's context is live, while the
// worker is not stopping, is left in the worker's Acks (successAck) and
// written with asynq's done of the delivery; every other write is inline.
type ackCompleter struct {
	inlineCompleter
	p *Executor
}

func (c *ackCompleter) succeed(ctx context.Context, d record.Delivery, ch record.Change) (record.Outcome, bool, error) {
	acks := acksOf(ctx)
	m := metaOf(ctx)
	id, ok := m.id, m.ok
	if acks == nil || !ok || ctx.Err() != nil || c.p.stopping.Load() {
		return c.inlineCompleter.succeed(ctx, d, ch)
	}
	acks.Put(id, &successAck{rec: c.rec, p: c.p, d: d, c: ch})
	return record.Applied, true, nil
}

// successAck is a success's record write waiting for asynq's ack.
type successAck struct {
	rec *record.Store
	p   *Executor
	d   record.Delivery
	c   record.Change
}

// WithDone implements wakeup.Ack: the success and asynq's done in one
// script (record.Store.ApplyAcked), waiting out a Redis outage.
func (s *successAck) WithDone(ctx context.Context, keys []string, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	done := record.AsynqDone{Keys: keys, Args: args}
	var out record.Outcome
	err := untilRedis(ctx, func() (err error) {
		out, err = s.rec.ApplyAcked(ctx, s.d, s.c, done)
		return err
	})
	switch {
	case errors.Is(err, record.ErrNotActive) && out == record.Applied:
		// The record holds the success. asynq's done found the delivery
		// gone: its lease was lost, or this is a resend whose first send
		// acked it and lost the reply. Either way there is nothing for
		// asynq to do.
	case err != nil:
		s.p.log.Error("could not record success", "task_id", s.d.ID, "err", err)
		cmd.SetErr(err)
		return cmd
	}
	s.p.succeeded(s.d, out)
	cmd.SetVal("OK")
	return cmd
}

// Alone implements wakeup.Ack: the success written without asynq's done
// (asynq answered the delivery otherwise, or the worker stopped).
func (s *successAck) Alone(ctx context.Context) {
	out, err := inlineCompleter{rec: s.rec}.apply(ctx, s.d, s.c)
	if err != nil {
		s.p.log.Error("could not record success", "task_id", s.d.ID, "err", err)
		return
	}
	s.p.succeeded(s.d, out)
}

// succeeded counts a success's write that found out (its log says what
// became of one that was not applied).
func (p *Executor) succeeded(d record.Delivery, out record.Outcome) {
	switch {
	case out != record.Applied:
		p.log.Warn("a success was not recorded: the run was "+out.String(), "task_id", d.ID, "run", d.Run)
	case d.Restarts > 0:
		p.metrics.restartResults.WithLabelValues(p.metrics.agent(d.Seed.Agent), "succeeded").Inc()
	}
}
