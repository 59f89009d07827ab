package deadletter

import (
	"context"
	"errors"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// RequeueTask puts dead letter id back on its queue as a fresh run: a new
// attempt and restart budget, the same parameters, and the history kept
// (the task's history gains a "requeued" event; the dead letter's copy is
// what the history was when it died). The run is enqueued first and the
// record written after, so a failed enqueue changes nothing (the dead
// letter stays, the record still says dead_lettered); the record is
// rebuilt from the dead letter when it has expired. The asynq task ID of
// the new run is derived from the run number, so a requeue retried after
// a crash does not queue the task twice.
//
// Of concurrent requeues of one dead letter exactly one enqueues the task
// and writes its "requeued" event; the others write nothing and fail with
// a *ConflictError (ErrConflict: being requeued) or ErrNotFound (gone).
//
// The task's steps (the named results its agents recorded) are kept: the
// new run's agents get them and skip their work; Fresh deletes them first.
func (s *Store) RequeueTask(ctx context.Context, client *tasks.Client, id string, opts ...RequeueOption) (*Entry, error) {
	return s.RequeueTaskRun(ctx, client, id, AnyRun, opts...)
}

// RequeueOption changes what a requeue does.
type RequeueOption func(*requeueOptions)

type requeueOptions struct{ fresh bool }

// Fresh makes a requeue delete the task's steps before the new run is
// enqueued (`inspector dlq requeue --fresh`, `{"fresh":true}`): the run
// starts afresh. The dead letter's run has ended, so no step of it can be
// written meanwhile.
func Fresh() RequeueOption { return func(o *requeueOptions) { o.fresh = true } }

// RequeueTaskRun is RequeueTask of dead letter id provided it is run run
// (AnyRun: any); another run is a *ConflictError and nothing is written.
func (s *Store) RequeueTaskRun(ctx context.Context, client *tasks.Client, id string, run int, opts ...RequeueOption) (*Entry, error) {
	var o requeueOptions
	for _, opt := range opts {
		opt(&o)
	}
	return s.RequeueRun(ctx, id, run, func(ctx context.Context, e *Entry) error {
		env := &tasks.Envelope{
			ID: e.ID, Agent: e.Agent, Action: e.Action, Params: e.Params, CorrelationID: e.CorrelationID,
			Queue: e.Queue, Restarts: 0, Run: e.Run + 1, EnqueuedAt: e.EnqueuedAt,
			Tenant: e.Tenant, Priority: tasks.NormPriority(e.Priority),
		}
		if env.EnqueuedAt.IsZero() {
			env.EnqueuedAt = client.Store().Now().UTC()
		}
		if env.Queue == "" {
			env.Queue = tasks.DefaultQueue
		}
		if env.Agent == "" {
			return errors.New("dead letter has no agent (its payload could not be decoded); it cannot be requeued as is")
		}
		if o.fresh {
			if err := record.StoreOf(client.Store()).ClearSteps(ctx, e.ID); err != nil {
				return err
			}
		}
		if err := client.EnqueueRun(ctx, env, 0); err != nil && !errors.Is(err, tasks.ErrDuplicate) {
			return err
		}
		// The new run number fences any stale delivery of the old run.
		return record.StoreOf(client.Store()).Requeued(ctx, record.Delivery{ID: env.ID, Run: env.Run, Seed: record.SeedOf(env)}, e.Attempts, e.History,
			tasks.Event{Event: tasks.EventRequeued, Agent: env.Agent, ErrorClass: e.ErrorClass, ClassifiedBy: e.ClassifiedBy,
				Error: "requeued from the dead letters"})
	})
}

// RequeueMatching requeues (RequeueTask) every dead letter f selects
// (ignoring f.Offset and f.Limit), newest first. done, when not nil, is
// called after each ID with its error (nil: requeued). It returns how many
// were requeued and how many failed; err is set only when the IDs could not
// be read (then nothing was requeued). A failed ID does not stop the
// others: the inspector's `dlq requeue --all` and the console's "Requeue
// all" both run through it.
func (s *Store) RequeueMatching(ctx context.Context, client *tasks.Client, f Filter, done func(id string, err error)) (requeued, failed int, err error) {
	ids, err := s.IDs(ctx, f)
	if err != nil {
		return 0, 0, err
	}
	return s.RequeueIDs(ctx, client, ids, done)
}

// RequeueIDs requeues the given dead letters, like RequeueMatching.
func (s *Store) RequeueIDs(ctx context.Context, client *tasks.Client, ids []string, done func(id string, err error), opts ...RequeueOption) (requeued, failed int, err error) {
	for _, id := range ids {
		_, rerr := s.RequeueTask(ctx, client, id, opts...)
		if rerr != nil {
			failed++
		} else {
			requeued++
		}
		if done != nil {
			done(id, rerr)
		}
		if ctx.Err() != nil {
			return requeued, failed, ctx.Err()
		}
	}
	return requeued, failed, nil
}

// DeleteMatching deletes every dead letter f selects (ignoring f.Offset
// and f.Limit) and returns how many it deleted.
func (s *Store) DeleteMatching(ctx context.Context, f Filter) (int, error) {
	ids, err := s.IDs(ctx, f)
	if err != nil {
		return 0, err
	}
	return s.Delete(ctx, ids...)
}
