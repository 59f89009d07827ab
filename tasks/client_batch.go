package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// batchChunk is how many commands EnqueueMany puts on one pipeline.
const batchChunk = 1000

// TaskError names the task of a batch an error is about, by its index in
// the slice given to EnqueueMany.
type TaskError struct {
	Index int
	ID    string // the task's ID (generated or the caller's); empty if it was never assigned
	Err   error
}

func (e *TaskError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("tasks: task %d: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("tasks: task %d (%s): %v", e.Index, e.ID, e.Err)
}

// Unwrap gives the task's error (errors.Is(err, ErrInvalidEnvelope), …).
func (e *TaskError) Unwrap() error { return e.Err }

// ErrPartialBatch is the sentinel of a BatchError: some tasks of a batch
// were enqueued and some were not.
var ErrPartialBatch = errors.New("tasks: batch partly enqueued")

// BatchError is returned by EnqueueMany when some tasks could not be
// enqueued (Redis failed or the context ended while the batch was under
// way). The results of every other task are valid: they were enqueued (or
// were duplicates). Repeating the batch is safe for tasks with
// caller-chosen IDs; tasks with generated IDs should be resent only for the
// indexes listed here.
type BatchError struct {
	// Failed lists the tasks that were not enqueued, in index order.
	Failed []*TaskError
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d task(s) not enqueued", ErrPartialBatch, len(e.Failed))
	for i, f := range e.Failed {
		if i == 3 {
			fmt.Fprintf(&b, "; …")
			break
		}
		fmt.Fprintf(&b, "; %v", f)
	}
	return b.String()
}

// Unwrap gives ErrPartialBatch and each task's error.
func (e *BatchError) Unwrap() []error {
	out := make([]error, 0, len(e.Failed)+1)
	out = append(out, ErrPartialBatch)
	for _, f := range e.Failed {
		out = append(out, f)
	}
	return out
}

// batchItem is one task of a batch on its way through EnqueueMany.
type batchItem struct {
	env    *Envelope
	caller bool // the caller chose the ID: it is an idempotency key
	// firstOf is the index of an earlier task of the batch with the same
	// caller ID (this one is then a duplicate of it), or -1.
	firstOf int
	done    bool // the result is decided (duplicate found before enqueueing)
	dupRun  bool // asynq reported the run already queued: look up the state
	queued  bool // this call put the task on its queue
	err     error
}

// EnqueueMany enqueues ts with the semantics of Enqueue for each task, in
// far fewer round trips: results[i] is the result of ts[i].
//
// Every task is validated first; if one is invalid, nothing is enqueued and
// the error is a *TaskError naming its index (errors.Is(err,
// ErrInvalidEnvelope)): an ID with '#' (ValidateID), a queue not served
// (WithQueues), …. Caller-chosen IDs are idempotency keys: a task whose ID
// already has a record, is a dead letter (state dead_lettered), or appears
// earlier in the same batch, is not enqueued again and its result says
// Duplicate. opts apply to every task.
//
// asynq's client enqueues one task per round trip; EnqueueMany writes
// asynq's task hash and queue entry itself, with asynq's own scripts, on
// pipelines (asynqEnqueueMany, with the copy of asynq's internals in
// internal/broker: tests hold it byte for byte to what asynq.Client
// writes), so a batch costs three pipelined round trips per
// 1000 tasks: the duplicate check, the enqueue and the task records.
//
// If Redis fails part-way, the tasks already enqueued stay enqueued, their
// results are filled in, and the error is a *BatchError listing the
// indexes that were not (errors.Is(err, ErrPartialBatch)); results is then
// still returned, with the IDs of every task. As with Enqueue, a task whose
// queue entry was written but whose record could not be is still reported
// as enqueued: the worker writes the record when it runs it. An error that
// is not a *BatchError (Redis unreachable, a timeout) may also come after
// some tasks landed: retry the batch with the same caller-chosen IDs.
func (c *Client) EnqueueMany(ctx context.Context, ts []Task, opts ...EnqueueOption) (results []Result, err error) {
	if len(ts) == 0 {
		return nil, nil
	}
	o := newEnqueueOptions(opts)
	items, err := c.batchItems(ts)
	if err != nil {
		return nil, err
	}
	if err := CheckDelay(o.delay(time.Now())); err != nil {
		return nil, err // every task's delay: no index to name
	}
	for i := range items {
		if err := items[i].env.setDeadline(o, ts[i], time.Now()); err != nil {
			return nil, &TaskError{Index: i, Err: err}
		}
	}
	spans := c.startBatchSpans(ctx, items)
	defer func() { endBatchSpans(spans, results, err) }()
	results = make([]Result, len(ts))
	for i := range items {
		results[i].ID = items[i].env.ID
	}
	if err := c.markExisting(ctx, items, results); err != nil {
		return results, batchFailure(items, err)
	}
	now := time.Now()
	delay := o.delay(now)
	var todo []int
	for i := range items {
		if !items[i].done {
			todo = append(todo, i)
		}
	}
	envs := make([]*Envelope, len(todo))
	for k, i := range todo {
		envs[k] = items[i].env
	}
	if isCluster(c.store.rdb) {
		// The record and the queue are on different slots: the deadline
		// index, the runs, then their records (a worker that takes a run
		// first seeds the record, and the producer's event follows its own).
		if err := c.indexDeadlines(ctx, envs...); err != nil {
			return results, batchFailure(items, err)
		}
		c.asynqEnqueueMany(ctx, items, todo, now, delay)
		c.recordQueued(ctx, items, todo, results, delay)
	} else {
		c.enqueueManyAtomic(ctx, items, todo, results, now, delay)
	}
	c.markDuplicateRuns(ctx, items, todo, results)
	return results, batchOutcome(items, results)
}

// batchItems builds the envelope of each task (as Enqueue does) and notes
// the repeats of a caller ID within the batch. The first invalid task
// fails the batch: a *TaskError naming its index.
func (c *Client) batchItems(ts []Task) ([]batchItem, error) {
	now := c.store.Now().UTC()
	items := make([]batchItem, len(ts))
	firstByID := make(map[string]int)
	for i, t := range ts {
		env, err := c.envelope(t, now)
		if err != nil {
			return nil, &TaskError{Index: i, ID: t.ID, Err: err}
		}
		it := batchItem{env: env, caller: t.ID != "", firstOf: -1}
		if it.caller {
			if j, ok := firstByID[t.ID]; ok {
				it.firstOf, it.done = j, true
			} else {
				firstByID[t.ID] = i
			}
		}
		items[i] = it
	}
	return items, nil
}

// markExisting is step 1 of EnqueueMany: caller IDs that already have a
// record, or are dead letters, are duplicates (one pipelined HGET and
// HEXISTS each, as Enqueue's check). It marks them done, their results
// Duplicate with the existing state.
func (c *Client) markExisting(ctx context.Context, items []batchItem, results []Result) error {
	var check []int
	for i := range items {
		if items[i].caller && !items[i].done {
			check = append(check, i)
		}
	}
	states, err := c.states(ctx, items, check)
	if err != nil {
		return err
	}
	for k, i := range check {
		if states[k] != nil {
			items[i].done = true
			results[i].Duplicate, results[i].State = true, *states[k]
		}
	}
	return nil
}

// recordQueued is step 3 of EnqueueMany: the records of the tasks at todo
// that this call queued (pipelined Create), in state pending or, with a
// delay, scheduled. A failure here is ignored, as in Enqueue: the task is
// queued and the worker writes its record.
func (c *Client) recordQueued(ctx context.Context, items []batchItem, todo []int, results []Result, delay time.Duration) {
	state := firstState(delay)
	var created []int
	for _, i := range todo {
		if items[i].queued {
			created = append(created, i)
			results[i].State = state
		}
	}
	c.createMany(ctx, items, created, state, delay)
}

// markDuplicateRuns is step 4 of EnqueueMany: the tasks at todo whose run
// asynq already had are duplicates, with their recorded state when it can
// be read.
func (c *Client) markDuplicateRuns(ctx context.Context, items []batchItem, todo []int, results []Result) {
	var dups []int
	for _, i := range todo {
		if items[i].dupRun {
			dups = append(dups, i)
		}
	}
	if states, err := c.states(ctx, items, dups); err == nil {
		for k, i := range dups {
			if states[k] != nil {
				results[i].State = *states[k]
			}
		}
	}
	for _, i := range dups {
		results[i].Duplicate = true
	}
}

// batchOutcome settles the repeats of a caller ID within the batch (they
// follow their first occurrence) and returns a *BatchError listing the
// tasks that failed, or nil.
func batchOutcome(items []batchItem, results []Result) error {
	var failed []*TaskError
	for i := range items {
		it := &items[i]
		if it.firstOf >= 0 {
			first := &items[it.firstOf]
			if first.err != nil {
				it.err = first.err
			} else {
				results[i].Duplicate, results[i].State = true, results[it.firstOf].State
			}
		}
		if it.err != nil {
			failed = append(failed, &TaskError{Index: i, ID: it.env.ID, Err: it.err})
		}
	}
	if len(failed) > 0 {
		return &BatchError{Failed: failed}
	}
	return nil
}

// batchFailure is the error of a batch none of whose tasks were enqueued
// because a step before any enqueue failed.
func batchFailure(items []batchItem, err error) error {
	failed := make([]*TaskError, len(items))
	for i := range items {
		failed[i] = &TaskError{Index: i, ID: items[i].env.ID, Err: err}
	}
	return &BatchError{Failed: failed}
}

// states reads the state of the tasks at idx as Enqueue's existing check
// does (pipelined HGET and HEXISTS, batchChunk tasks per round trip): the
// recorded state, StateDeadLettered for a dead letter whose record has
// expired, nil where neither exists.
func (c *Client) states(ctx context.Context, items []batchItem, idx []int) ([]*State, error) {
	out := make([]*State, len(idx))
	for lo := 0; lo < len(idx); lo += batchChunk {
		hi := min(lo+batchChunk, len(idx))
		sts := make([]*redis.StringCmd, 0, hi-lo)
		deads := make([]*redis.BoolCmd, 0, hi-lo)
		_, err := c.store.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range idx[lo:hi] {
				sts = append(sts, p.HGet(ctx, rkeys.Task(items[i].env.ID), "state"))
				deads = append(deads, p.HExists(ctx, rkeys.DLQEntries(), items[i].env.ID))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("tasks: check existing tasks: %w", err)
		}
		for k := range sts {
			ok, st, err := existingState(sts[k], deads[k])
			switch {
			case err != nil:
				return nil, fmt.Errorf("tasks: check %s: %w", items[idx[lo+k]].env.ID, err)
			case ok:
				out[lo+k] = &st
			}
		}
	}
	return out, nil
}

// createMany is Store.Create for the tasks at idx, pipelined. Errors are
// dropped: see EnqueueMany.
func (c *Client) createMany(ctx context.Context, items []batchItem, idx []int, state State, delay time.Duration) {
	calls := make([]redisx.Call, len(idx))
	for k, i := range idx {
		calls[k] = c.store.rec.CreateCall(newRecord(items[i].env, state, delay))
	}
	runPipelined(ctx, c.store.rdb, calls, c.rep)
}

// runPipelined runs calls on pipelines of batchChunk calls each
// (redisx.Pipelined: EVALSHA, EVAL for the scripts the server did not
// know), each with a WAIT per master when rep asks for replicas. out[k] is the outcome of calls[k]; a failed round trip shows as
// the error of every call it carried.
func runPipelined(ctx context.Context, rdb redis.UniversalClient, calls []redisx.Call, rep redisx.Replication) []redisx.Result {
	out := make([]redisx.Result, 0, len(calls))
	for lo := 0; lo < len(calls); lo += batchChunk {
		out = append(out, redisx.PipelinedReplicated(ctx, rdb, calls[lo:min(lo+batchChunk, len(calls))], rep)...)
	}
	return out
}

// asynqEnqueueMany does what EnqueueRun does for the first run of each
// task at idx, on pipelines: registers the queues, then runs runScript
// (asynq's enqueue or, with a delay, schedule, and the wake-up) for each. It sets each
// item's queued, dupRun (asynq has a task with that ID: ErrDuplicate) or err.
func (c *Client) asynqEnqueueMany(ctx context.Context, items []batchItem, idx []int, now time.Time, delay time.Duration) {
	if len(idx) == 0 {
		return
	}
	rdb := c.store.rdb
	if err := c.registerQueues(ctx, items, idx); err != nil {
		return
	}
	calls := make([]redisx.Call, 0, len(idx))
	var keep []int
	announced := map[string]bool{} // the tasks of a queue are due together: announce the first
	for _, i := range idx {
		t, err := asynqTask(items[i].env, now, delay)
		if err != nil {
			items[i].err = err
			continue
		}
		calls = append(calls, broker.RunCall(t, laneOf(items[i].env), now, delay, !announced[t.Queue]))
		announced[t.Queue] = true
		keep = append(keep, i)
	}
	for k, r := range runPipelined(ctx, rdb, calls, c.rep) {
		it := &items[keep[k]]
		added, err := broker.AsynqAdded(r)
		switch {
		case err != nil:
			it.err = fmt.Errorf("tasks: enqueue %s: %w", it.env.ID, err)
		case !added:
			it.dupRun = true
		default:
			it.queued = true
		}
	}
}

// enqueueManyAtomic is steps 2 and 3 of EnqueueMany where every key lives
// on one server (not a Cluster): each task's run and record in one script
// (record.Store.EnqueueCall, as Enqueue with a caller's ID: the deadline
// index entry included), pipelined, so
// that no worker can take a run before its record holds the producer's
// event (its history starts queued or scheduled, whatever runs next).
func (c *Client) enqueueManyAtomic(ctx context.Context, items []batchItem, idx []int, results []Result, now time.Time, delay time.Duration) {
	if len(idx) == 0 {
		return
	}
	if err := c.registerQueues(ctx, items, idx); err != nil {
		return
	}
	state := firstState(delay)
	calls := make([]redisx.Call, 0, len(idx))
	var keep []int
	announced := map[string]bool{} // the tasks of a queue are due together: announce the first
	for _, i := range idx {
		env := items[i].env
		t, err := asynqTask(env, now, delay)
		if err != nil {
			items[i].err = err
			continue
		}
		calls = append(calls, c.store.rec.EnqueueCallAnnounced(newRecord(env, state, delay), t, laneOf(env), now, !announced[t.Queue]))
		announced[t.Queue] = true
		keep = append(keep, i)
	}
	for k, r := range runPipelined(ctx, c.store.rdb, calls, c.rep) {
		i := keep[k]
		it := &items[i]
		code, st, err := record.EnqueueReply(r.Val, r.Err)
		switch {
		case err != nil:
			it.err = fmt.Errorf("tasks: enqueue %s: %w", it.env.ID, err)
		case code == record.CodeApplied:
			it.queued = true
			results[i].State = state
		case code == record.CodeExists:
			it.done = true
			results[i].Duplicate, results[i].State = true, st
		default: // the run was queued already
			it.dupRun = true
		}
	}
}

// registerQueues registers the queues of the tasks at idx with asynq; on
// failure it sets every such task's error and returns it.
func (c *Client) registerQueues(ctx context.Context, items []batchItem, idx []int) error {
	seen := map[string]bool{}
	var queues []string
	for _, i := range idx {
		if q := items[i].env.Queue; !seen[q] {
			seen[q] = true
			queues = append(queues, q)
		}
	}
	err := broker.RegisterQueues(ctx, c.store.rdb, queues...)
	if err != nil {
		for _, i := range idx {
			items[i].err = fmt.Errorf("tasks: enqueue %s: register queue: %w", items[i].env.ID, err)
		}
	}
	return err
}
