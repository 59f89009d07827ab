package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
)

// Enqueue puts t on its queue. With a caller-chosen ID it is idempotent: a
// repeat returns Duplicate and the existing task's state, and so does the ID
// of a dead letter whose record has expired (state dead_lettered: the dead
// letter is kept; requeue it or delete it first). An invalid task (a
// caller ID with '#', see ValidateID; a queue the client was told is not
// served, see WithQueues; a delay longer than MaxDelay) is a
// *ValidationError. The enqueue is traced
// (see WithTracerProvider).
//
// Any other error (Redis unreachable, a timeout, a failover, WAIT not met)
// does not mean the task was not enqueued: the write may have reached
// Redis before the reply was lost. Retry with the same caller-chosen ID (a
// task that landed comes back as Duplicate); a task without a caller ID
// gets a new one on each call, so set t.ID before the first try if you may
// retry.
func (c *Client) Enqueue(ctx context.Context, t Task, opts ...EnqueueOption) (res Result, err error) {
	o := newEnqueueOptions(opts)
	env, err := c.envelope(t, c.store.Now().UTC())
	if err != nil {
		return Result{}, err
	}
	if err := CheckDelay(o.delay(time.Now())); err != nil {
		return Result{}, err
	}
	if err := env.setDeadline(o, t, time.Now()); err != nil {
		return Result{}, err
	}
	ctx, span := c.startEnqueueSpan(ctx, env)
	defer func() { endEnqueueSpan(span, res, err) }()
	return c.enqueueEnvelope(ctx, env, t.ID != "", o.delay(time.Now()))
}

// enqueueEnvelope is Enqueue of the checked envelope env (caller: its ID
// is the caller's, so it may exist), whose first run is due after delay.
func (c *Client) enqueueEnvelope(ctx context.Context, env *Envelope, caller bool, delay time.Duration) (Result, error) {
	if !isCluster(c.store.rdb) {
		return c.enqueueOne(ctx, env, caller, time.Now(), delay)
	}
	// On a Cluster the record and the queue are on different slots: check,
	// queue, record, in three round trips.
	if caller {
		if dup, st, err := c.existing(ctx, env.ID); err != nil || dup {
			return Result{ID: env.ID, Duplicate: dup, State: st}, err
		}
	}
	state := firstState(delay)
	if err := c.indexDeadlines(ctx, env); err != nil {
		return Result{}, err
	}
	err := c.EnqueueRun(ctx, env, delay)
	if errors.Is(err, ErrDuplicate) {
		_, st, _ := c.existing(ctx, env.ID)
		return Result{ID: env.ID, Duplicate: true, State: st}, nil
	}
	if err != nil {
		return Result{}, err
	}
	if _, err := c.store.rec.Create(ctx, newRecord(env, state, delay)); err != nil {
		// The task is queued; only its record is missing (the worker writes one).
		return Result{ID: env.ID, State: state}, nil
	}
	return Result{ID: env.ID, State: state}, nil
}

// enqueueOne is Enqueue in one round trip, where every key lives on one
// server (not a Cluster), through the client's group-committing batcher
// (concurrent Enqueue calls share round trips). A caller's ID needs the
// duplicate check, so it runs the record's enqueue script
// (record.Store.EnqueueCall); a generated ID (random, 96 bits: no
// duplicate to look for) takes a leaner script that concurrent enqueues
// share (enqueueFresh).
func (c *Client) enqueueOne(ctx context.Context, env *Envelope, caller bool, now time.Time, delay time.Duration) (Result, error) {
	t, err := asynqTask(env, now, delay)
	if err != nil {
		return Result{}, err
	}
	n := newRecord(env, firstState(delay), delay)
	if !caller {
		if err := c.enqueueFresh(ctx, n, t, laneOf(env), now); err != nil {
			return Result{}, fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
		}
		return Result{ID: env.ID, State: n.State}, nil
	}
	r := c.runRegistered(ctx, env.Queue, c.store.rec.EnqueueCall(n, t, laneOf(env), now))
	code, st, err := record.EnqueueReply(r.Val, r.Err)
	if err != nil {
		return Result{}, fmt.Errorf("tasks: enqueue %s: %w", env.ID, err)
	}
	return Result{ID: env.ID, Duplicate: code != record.CodeApplied, State: st}, nil
}

// enqueueFresh writes, for a task with a generated ID, what the enqueue
// script writes (but for the duplicate checks: there is nothing to look
// for), in one script (record.Store.EnqueueNewCall: the queue's
// registration, the run on its queue, the deadline index's entry and the
// record) that concurrent enqueues share (the client's batcher merges
// them: one script call, one round trip), with the WAIT of
// redis.wait_replicas when asked.
func (c *Client) enqueueFresh(ctx context.Context, n record.New, t broker.AsynqTask, lane broker.Lane, now time.Time) error {
	call := c.store.rec.EnqueueNewCall(n, t, lane, now)
	code, _, err := record.EnqueueReply(c.runner.RunMerged(ctx, record.NewMerger, call))
	if err != nil {
		return err
	}
	if code != record.CodeApplied {
		return fmt.Errorf("a run with ID %s is on queue %s already", t.ID, t.Queue)
	}
	return nil
}

// runRegistered runs call, which writes a run on queue, in one round trip
// with the queue's registration in asynq's set of queues
// (broker.RegisterCommand: every time, not once per process, so that
// a set lost under a running producer comes back), and returns call's
// result, or the registration's error.
func (c *Client) runRegistered(ctx context.Context, queue string, call redisx.Call) redisx.Result {
	res, err := c.runner.RunCalls(ctx, []redisx.Call{{Cmd: broker.RegisterCommand(queue)}, call})
	switch {
	case err != nil:
		return redisx.Result{Err: err}
	case res[0].Err != nil:
		return redisx.Result{Err: fmt.Errorf("register queue: %w", res[0].Err)}
	}
	return res[1]
}

// isCluster reports whether rdb is a Cluster client, on which one script
// cannot touch a task's record and its queue (they hash to different
// slots).
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// laneOf is the lane env's runs wait in for a worker (package
// internal/broker): its tenant and priority.
func laneOf(env *Envelope) broker.Lane {
	return broker.Lane{Tenant: env.Tenant, Priority: env.Priority}
}

// asynqTask is the asynq task that puts env's run on its queue at now,
// after delay (whose end it sets as env's NotBefore): agentq's type, the
// envelope as payload, the run's ID, its queue, asynqMaxRetry and
// RunTimeout.
func asynqTask(env *Envelope, now time.Time, delay time.Duration) (broker.AsynqTask, error) {
	env.NotBefore = 0
	if delay > 0 {
		env.NotBefore = now.Add(delay).UnixMilli()
	}
	payload, err := Encode(env)
	if err != nil {
		return broker.AsynqTask{}, err
	}
	return broker.AsynqTask{Type: TypeName, Payload: payload, ID: env.AsynqID(), Queue: env.Queue,
		MaxRetry: asynqMaxRetry, Timeout: RunTimeout}, nil
}
