package worker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/agentq/agentq/internal/broker"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// sweepInterval is how often the fleet sweeps the deadline index (one
// worker per tick, by claim): a waiting task is dead-lettered within
// about this long of its deadline.
const sweepInterval = 500 * time.Millisecond

// sweepBatch is how many index entries one read of a sweep takes;
// sweepMaxBatches bounds the reads of one tick (the rest wait for the next).
const (
	sweepBatch      = 100
	sweepMaxBatches = 10
)

// sweepDeadlines sweeps the deadline index every interval until ctx ends;
// of all workers, the one that claims the tick does it (a claim per tick,
// as repairRestarts does per interval).
func (w *Worker) sweepDeadlines(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if ok, err := w.rdb.SetNX(ctx, rkeys.DeadlineSweepClaim(), w.id, interval-interval/10).Result(); err == nil && ok {
			if n, err := w.sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
				w.log.Warn("deadline sweep failed", "err", err)
			} else if n > 0 {
				w.log.Info("dead-lettered waiting tasks past their deadline", "count", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep goes through the tasks of the deadline index whose deadline is
// at or before now: it drops the entries of tasks that have ended (or
// whose record is gone), leaves those running to the worker that runs
// them (their call stops at the deadline; a redelivery is dead-lettered
// when taken), and dead-letters the waiting ones (expire). It returns how
// many it dead-lettered.
func (w *Worker) sweep(ctx context.Context, now time.Time) (int, error) {
	dead, offset := 0, int64(0)
	for range sweepMaxBatches {
		ids, err := w.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: rkeys.Deadlines(), ByScore: true,
			Start: "-inf", Stop: strconv.FormatInt(now.UnixMilli(), 10), Offset: offset, Count: sweepBatch}).Result()
		if err != nil {
			return dead, err
		}
		for _, id := range ids {
			done, expired, err := w.expire(ctx, id, now)
			if err != nil {
				return dead, err
			}
			if expired {
				dead++
			}
			if done {
				if err := w.rdb.ZRem(ctx, rkeys.Deadlines(), id).Err(); err != nil {
					return dead, err
				}
			} else {
				offset++ // kept: the next read starts after it
			}
		}
		if len(ids) < sweepBatch {
			return dead, nil
		}
	}
	return dead, nil
}

// expire dead-letters task id, past its deadline at now, if it is still
// waiting (pending, scheduled, retrying, deferred, restarting): the dead
// letter and its record's dead_lettered event (through Apply, as the
// record's current run: its waiters are told at once), then its waiting
// run is deleted from its queue (as Client.Cancel does). done is true
// when its index entry can go (it ended, now or before, or has no
// record); expired when this call dead-lettered it. A running task is
// left to its worker (done false).
func (w *Worker) expire(ctx context.Context, id string, now time.Time) (done, expired bool, err error) {
	v, err := w.exec.View(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return true, false, nil
	case err != nil:
		return false, false, err
	case v.State.Terminal():
		return true, false, nil
	case v.State == record.StateActive:
		return false, false, nil
	}
	queue := v.Queue
	if queue == "" {
		queue = tasks.DefaultQueue
	}
	env := &tasks.Envelope{ID: id, Run: v.Run}
	aid := env.AsynqID()
	if w.insp != nil {
		info, err := w.taskInfo(ctx, queue, aid)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound):
			// Between its queue and a worker (being taken), or its
			// record is ahead of its run: look again next tick.
			return false, false, nil
		case err != nil:
			return false, false, err
		case info.State == asynq.TaskStateActive:
			return false, false, nil // its worker enforces the deadline
		}
		if e, derr := tasks.Decode(info.Payload); derr == nil && e.ID == id {
			if e.Deadline == 0 {
				// This run has no deadline (a requeued dead letter runs
				// without it): the entry is not its.
				return true, false, nil
			}
			env = e
		}
	}
	if env.Agent == "" { // no payload to read: the record's fields
		env.Agent, env.Action, env.Queue, env.CorrelationID, env.Restarts = v.Agent, v.Action, queue, v.CorrelationID, v.Restarts
		env.Tenant, env.Priority = v.Tenant, tasks.NormPriority(v.Priority)
	}
	if env.Deadline == 0 { // no payload read: the record's deadline
		if dl, perr := time.Parse(time.RFC3339Nano, v.Deadline); perr == nil {
			env.Deadline = dl.UnixMilli()
		}
	}
	if !env.PastDeadline(now) {
		return false, false, nil // not yet
	}
	expired, err = w.exec.ExpireWaiting(ctx, env, string(v.State))
	if err != nil {
		return false, false, err // Redis trouble: next tick
	}
	// Take the waiting run off its queue (or, if a worker took it
	// meanwhile, stop it: its writes are refused now).
	if w.insp != nil {
		if ok, _ := broker.RemoveFromLane(ctx, w.rdb, queue, aid); ok {
			// it waited in its tenant's lane
		} else if w.insp.DeleteTask(queue, aid) != nil {
			_ = w.insp.CancelProcessing(aid)
		}
		if v.State == record.StateRestarting {
			_ = w.restarts.Started(ctx, id)
		}
	}
	return true, expired, nil
}

// taskInfo is asynq's view of run aid of a task whose record names queue.
// asynq's inspector answers ErrQueueNotFound for a queue missing from its
// set of queues, which can be lost under the fleet (a FLUSHALL, a restart
// without persistence, a failover to a replica that missed the write)
// while the queue's runs wait: the queue the record names is registered
// again and asked again, so that a lost set never holds deadlines up.
func (w *Worker) taskInfo(ctx context.Context, queue, aid string) (*asynq.TaskInfo, error) {
	info, err := w.insp.GetTaskInfo(queue, aid)
	if !errors.Is(err, asynq.ErrQueueNotFound) {
		return info, err
	}
	if err := broker.RegisterQueues(ctx, w.rdb, queue); err != nil {
		return nil, err
	}
	return w.insp.GetTaskInfo(queue, aid)
}
