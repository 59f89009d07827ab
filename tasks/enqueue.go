package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/fair"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/wakeup"
)

// enqueueOne is Enqueue in one round trip, where every key lives on one
// server (not a Cluster), through the client's group-committing batcher
// (concurrent Enqueue calls share round trips). A caller's ID needs the
// duplicate check, so it runs the record's enqueue script
// (record.Store.EnqueueCall); a generated ID (random, 96 bits: no
// duplicate to look for) takes plain commands in MULTI/EXEC
// (enqueueFresh), which cost Redis about half as much as the script.
func (c *Client) enqueueOne(ctx context.Context, env *Envelope, caller bool, now time.Time, delay time.Duration) (Result, error) {
	t, err := asynqTask(env, now, delay)
	if err != nil {
		return Result{}, err
	}
	if err := c.register(ctx, env.Queue); err != nil {
		return Result{}, fmt.Errorf("tasks: enqueue %s: register queue: %w", env.ID, err)
	}
	n := newRecord(env, firstState(delay), delay)
	if !caller {
		if err := c.enqueueFresh(ctx, n, t, laneOf(env), now, delay); err != nil {
			return Result{}, fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
		}
		return Result{ID: env.ID, State: n.State}, nil
	}
	call := c.store.rec.EnqueueCall(n, t, laneOf(env), now)
	code, st, err := record.EnqueueReply(c.runner.Run(ctx, call.Script, call.Keys, call.Args...))
	if err != nil {
		return Result{}, fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
	}
	return Result{ID: env.ID, Duplicate: code != record.CodeApplied, State: st}, nil
}

// enqueueFresh writes, for a task with a generated ID, what the enqueue
// script writes, as plain commands in one MULTI/EXEC (atomic: a
// connection lost before EXEC writes nothing), in one round trip shared
// with concurrent enqueues (the client's batcher), with the WAIT of
// redis.wait_replicas when asked: the run on its queue
// (wakeup.RunCommands) and the record (record.Store.FreshCalls).
func (c *Client) enqueueFresh(ctx context.Context, n record.New, t asynqcompat.Task, lane fair.Lane, now time.Time, delay time.Duration) error {
	calls := make([]redisx.Call, 0, 11)
	calls = append(calls, redisx.Call{Cmd: []any{"multi"}})
	for _, cmd := range wakeup.RunCommands(t, lane, now, delay) {
		calls = append(calls, redisx.Call{Cmd: cmd})
	}
	for _, cmd := range c.store.rec.FreshCalls(n) {
		calls = append(calls, redisx.Call{Cmd: cmd})
	}
	if !n.Seed.Deadline.IsZero() {
		// The deadline index entry, in the same MULTI (see indexDeadlines).
		calls = append(calls, redisx.Call{Cmd: []any{"zadd", rkeys.Deadlines(), n.Seed.Deadline.UnixMilli(), n.ID}})
	}
	calls = append(calls, redisx.Call{Cmd: []any{"exec"}})
	res, err := c.runner.RunCalls(ctx, calls)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	replies, _ := res[len(res)-1].Val.([]any) // EXEC's: one per command
	for _, r := range replies {
		if err, ok := r.(error); ok {
			return err
		}
	}
	return nil
}

// register adds queue to asynq's set of queues the first time this client
// enqueues on it (asynq's client keeps the same cache).
func (c *Client) register(ctx context.Context, queue string) error {
	if _, ok := c.registered.Load(queue); ok {
		return nil
	}
	if err := asynqcompat.RegisterQueues(ctx, c.store.rdb, queue); err != nil {
		return err
	}
	c.registered.Store(queue, true)
	return nil
}

// isCluster reports whether rdb is a Cluster client, on which one script
// cannot touch a task's record and its queue (they hash to different
// slots).
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}
