package deadline

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// expire dead-letters task id, past its deadline at now, if it is still
// waiting (pending, scheduled, retrying, deferred, restarting): the dead
// letter and its record's dead_lettered event (the DeadLetterer), then
// its waiting run is deleted from its queue (as Client.Cancel does). done
// is true when its index entry can go (it ended, now or before, or has no
// record); expired when this call dead-lettered it. A running task is
// left to its worker (done false).
func (s *Sweeper) expire(ctx context.Context, id string, now time.Time) (done, expired bool, err error) {
	v, err := s.rec.Get(ctx, id)
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
	env, done, err := s.envelope(ctx, id, queue, v)
	if env == nil || err != nil {
		return done, false, err
	}
	if !env.PastDeadline(now) {
		return false, false, nil // not yet
	}
	expired, err = s.deadLetter(ctx, env, v.State)
	if err != nil {
		return false, false, err // Redis trouble: next tick
	}
	s.takeOff(ctx, id, queue, env.AsynqID(), v.State)
	return true, expired, nil
}

// envelope is the envelope of task id's waiting run in queue: its
// payload's, as asynq holds it, with what it lacks from the record v. nil
// when the run is not to be swept now: done then says whether its index
// entry can go (a run without a deadline: a requeued dead letter).
func (s *Sweeper) envelope(ctx context.Context, id, queue string, v *record.View) (env *tasks.Envelope, done bool, err error) {
	env = &tasks.Envelope{ID: id, Run: v.Run}
	if s.insp != nil {
		info, err := s.taskInfo(ctx, queue, env.AsynqID())
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound):
			// Between its queue and a worker (being taken), or its
			// record is ahead of its run: look again next tick.
			return nil, false, nil
		case err != nil:
			return nil, false, err
		case info.State == asynq.TaskStateActive:
			return nil, false, nil // its worker enforces the deadline
		}
		if e, derr := tasks.Decode(info.Payload); derr == nil && e.ID == id {
			if e.Deadline == 0 {
				// This run has no deadline (a requeued dead letter runs
				// without it): the entry is not its.
				return nil, true, nil
			}
			env = e
		}
	}
	if env.Agent == "" { // no payload to read: the record's fields
		env.Agent, env.Action, env.Queue, env.CorrelationID, env.Restarts = v.Agent, v.Action, queue, v.CorrelationID, v.Restarts
		env.Tenant, env.Priority = v.Tenant, tasks.NormPriority(v.Priority)
		env.Parent, env.Root = v.Parent, v.Root // a child's end is told to its parent
	}
	if env.Deadline == 0 { // no payload read: the record's deadline
		if dl, perr := time.Parse(time.RFC3339Nano, v.Deadline); perr == nil {
			env.Deadline = dl.UnixMilli()
		}
	}
	return env, false, nil
}

// takeOff takes the waiting run aid of task id off its queue (or, if a
// worker took it meanwhile, stops it: its writes are refused now), and
// frees a restart's slot in the restart index.
func (s *Sweeper) takeOff(ctx context.Context, id, queue, aid string, waited record.State) {
	if s.insp == nil {
		return
	}
	if ok, _ := broker.RemoveFromLane(ctx, s.rdb, queue, aid); ok {
		// it waited in its tenant's lane
	} else if s.insp.DeleteTask(queue, aid) != nil {
		_ = s.insp.CancelProcessing(aid)
	}
	if waited == record.StateRestarting {
		_ = s.restarts.Started(ctx, id)
	}
}

// taskInfo is asynq's view of run aid of a task whose record names queue.
// asynq's inspector answers ErrQueueNotFound for a queue missing from its
// set of queues, which can be lost under the fleet (a FLUSHALL, a restart
// without persistence, a failover to a replica that missed the write)
// while the queue's runs wait: the queue the record names is registered
// again and asked again, so that a lost set never holds deadlines up.
func (s *Sweeper) taskInfo(ctx context.Context, queue, aid string) (*asynq.TaskInfo, error) {
	info, err := s.insp.GetTaskInfo(queue, aid)
	if !errors.Is(err, asynq.ErrQueueNotFound) {
		return info, err
	}
	if err := broker.RegisterQueues(ctx, s.rdb, queue); err != nil {
		return nil, err
	}
	return s.insp.GetTaskInfo(queue, aid)
}
