package record

import (
	"context"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/durx"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// createScript is Store.Create (lua/create_only.lua; rec_create, in
// lua/create.lua, documents its ARGV).
var createScript = newScript("create_only.lua", mustLua("create.lua"))

// enqueueScript is an Enqueue with a caller's ID in one step, on one server
// (lua/enqueue.lua documents its KEYS, ARGV and replies).
var enqueueScript = newScript("enqueue.lua", broker.RunLua, mustLua("create.lua"))

// enqueueNewScript is an Enqueue with a generated ID in one step, on one
// server (lua/enqueue_new.lua documents its KEYS, ARGV and replies).
var enqueueNewScript = newBareScript("enqueue_new.lua", broker.RunLua)

// New is a task to record as enqueued: its ID and seed fields, its first
// state (pending, or scheduled) and the delay to its first run. It is an
// adapter of the producer's envelope (tasks.Envelope, built by the
// producer from it), not a shape of its own.
type New struct {
	ID    string
	Seed  Seed
	State State
	Delay time.Duration
}

// event is the first event of n, stamped at.
func (n New) event(at time.Time) Event {
	kind := EventQueued
	if n.State == StateScheduled {
		kind = EventScheduled
	}
	return Event{At: at.UTC(), Event: kind, DelayMS: n.Delay.Milliseconds()}
}

// createArgs are rec_create's arguments for n: the record and its history
// live for the retention counted from when the first run is due, so that a
// task scheduled further out than the retention still has its record when
// it runs.
func (s *Store) createArgs(n New) []any {
	ev := n.event(s.now())
	return append([]any{n.ID, n.Seed.Agent, n.Seed.Action, n.Seed.Queue, n.Seed.EnqueuedAt.UTC().Format(time.RFC3339Nano),
		n.Seed.CorrelationID, string(n.State), string(ev.Marshal()), durx.CeilSeconds(s.lifetime(&ev))}, n.Seed.extra()...)
}

// Create records a newly enqueued task and its first event (seq 1). It
// reports false when the record existed (a worker got there first: the
// fields it lacks are filled in and the event is appended with the next
// seq).
func (s *Store) Create(ctx context.Context, n New) (bool, error) {
	code, _, err := reply(s.runner.Run(ctx, createScript, keys(n.ID), s.createArgs(n)...))
	if err != nil {
		return false, fmt.Errorf("record: create %s: %w", n.ID, err)
	}
	return code == CodeApplied, nil
}

// CreateCall is Create as a call for a pipeline (a batch); its reply is
// {CodeApplied} or {CodeExists}.
func (s *Store) CreateCall(n New) redisx.Call {
	return redisx.Call{Script: createScript, Keys: keys(n.ID), Args: s.createArgs(n)}
}

// EnqueueCall is an enqueue of n with a caller's ID (t: its asynq task, due
// after n.Delay from now, waiting in lane) in one script: the duplicate check (a record, or
// a dead letter, with that ID), the run on its queue and the record. Read
// its reply with EnqueueReply. Not on a Redis Cluster (the record and the
// queue are in different slots).
//
// A task with a deadline (n.Seed.Deadline) is added to the deadline index
// (rkeys.Deadlines) in the same step, so that no task is enqueued without
// the entry the workers' deadline sweeper reads.
func (s *Store) EnqueueCall(n New, t broker.AsynqTask, lane broker.Lane, now time.Time) redisx.Call {
	return s.EnqueueCallAnnounced(n, t, lane, now, true)
}

// EnqueueCallAnnounced is EnqueueCall where announce says whether a
// delayed run is announced on the due channel (a batch announces the
// first run of each queue only, as broker.RunCall's announce).
func (s *Store) EnqueueCallAnnounced(n New, t broker.AsynqTask, lane broker.Lane, now time.Time, announce bool) redisx.Call {
	ks := append(append(append(keys(n.ID), rkeys.DLQEntries()), broker.RunKeys(t.Queue, t.ID, lane, n.Delay)...), rkeys.Deadlines())
	deadline := int64(0)
	if !n.Seed.Deadline.IsZero() {
		deadline = n.Seed.Deadline.UnixMilli()
	}
	args := append(append(broker.RunArgs(t, lane, now, n.Delay, announce), deadline), s.createArgs(n)...)
	return redisx.Call{Script: enqueueScript, Keys: ks, Args: args}
}

// EnqueueReply reads an EnqueueCall's reply: the task's state, and
// whether it was enqueued now (CodeApplied), existed (CodeExists: a
// duplicate) or had its run queued already (CodeStale).
func EnqueueReply(v any, err error) (Code, State, error) {
	code, rest, err := reply(v, err)
	if err != nil {
		return 0, "", err
	}
	st := ""
	if len(rest) > 0 {
		st, _ = rest[0].(string)
	}
	return code, State(st), nil
}

// EnqueueNewCall is an enqueue of n, whose ID is new (generated, 96
// random bits: no record or dead letter to look for), with t its asynq
// task due after n.Delay from now, waiting in lane, in one script: the
// queue's registration in asynq's set of queues (every time, so that a
// set lost under a running producer comes back), the run, the deadline
// index's entry and the record as rec_create writes a new one, but for
// its first event, which the record holds (FieldFirstEvent: the history
// list is made by the second event). Run it with a Batcher's RunMerged
// and NewMerger (concurrent enqueues merge into one
// script call); read its reply with EnqueueReply (a code alone: the task
// is in n.State when it was enqueued). Not on a Redis Cluster.
func (s *Store) EnqueueNewCall(n New, t broker.AsynqTask, lane broker.Lane, now time.Time) redisx.Call {
	list := lane.Key(t.Queue)
	if n.Delay > 0 {
		list = broker.ScheduledKey(t.Queue)
	}
	ready, tenants, _ := broker.LaneKeys(t.Queue)
	ks := []string{broker.AllQueues, rkeys.Deadlines(), list, rkeys.Wake(t.Queue), ready, tenants,
		broker.TaskKey(t.Queue, t.ID), rkeys.Task(n.ID)}
	deadline := int64(0)
	if !n.Seed.Deadline.IsZero() {
		deadline = n.Seed.Deadline.UnixMilli()
	}
	ev := n.event(s.now())
	ev.Seq = 1
	run := broker.NewRun(t, lane, now, n.Delay, true)
	args := make([]any, 0, 24)
	args = append(args, broker.WakeCap, rkeys.DueChannel(), // the call's
		1, t.Queue, run.Kind, run.Tenant, run.Code, string(n.State), durx.CeilSeconds(s.lifetime(&ev)), // the group's
		0, run.Msg, t.ID, run.At, run.Due, deadline, n.ID, firstEvent(ev), n.Seed.Agent, // the task's
		n.Seed.EnqueuedAt.UTC().Format(time.RFC3339Nano))
	if n.Seed.Action != "" {
		args = append(args, FieldAction, n.Seed.Action)
	}
	if n.Seed.CorrelationID != "" {
		args = append(args, FieldCorrelationID, n.Seed.CorrelationID)
	}
	args = append(args, n.Seed.extra()...)
	args[newTaskArgs] = len(args) - newTaskArgs - 1
	return redisx.Call{Script: enqueueNewScript, Keys: ks, Args: args}
}

// NewMerger merges EnqueueNewCalls that meet in one flush of a Batcher
// into one script call (at most MaxNewMerge of them).
var NewMerger redisx.Merger = newMerger{}

// MaxNewMerge caps the enqueues one merged EnqueueNewCall carries.
const MaxNewMerge = 64

type newMerger struct{}

func (newMerger) MaxMerge() int { return MaxNewMerge }

// An EnqueueNewCall's layout (lua/enqueue_new.lua): the call's keys and
// values, then its group's, then the task's (from its count on).
const (
	newCallKeys, newGroupKeys = 2, 4
	newCallArgs, newTaskArgs  = 2, 9
)

// Merge joins calls in order; consecutive calls of one group (the same
// queue, lane, kind, state and lifetime) share its keys and values.
func (newMerger) Merge(calls []redisx.Call) redisx.Call {
	if len(calls) == 1 {
		return calls[0]
	}
	nk, na := newCallKeys, newCallArgs
	for _, c := range calls {
		nk, na = nk+len(c.Keys)-newCallKeys, na+len(c.Args)-newCallArgs
	}
	m := redisx.Call{Script: enqueueNewScript, Keys: append(make([]string, 0, nk), calls[0].Keys[:newCallKeys]...),
		Args: append(make([]any, 0, na), calls[0].Args[:newCallArgs]...)}
	group := 0 // the open group's task count, at m.Args[group]
	for i, c := range calls {
		if i > 0 && sameNewGroup(calls[i-1], c) {
			m.Args[group] = m.Args[group].(int) + 1
		} else {
			group = len(m.Args)
			m.Keys = append(m.Keys, c.Keys[newCallKeys:newCallKeys+newGroupKeys]...)
			m.Args = append(m.Args, c.Args[newCallArgs:newTaskArgs]...)
		}
		m.Keys = append(m.Keys, c.Keys[newCallKeys+newGroupKeys:]...)
		m.Args = append(m.Args, c.Args[newTaskArgs:]...)
	}
	return m
}

// sameNewGroup reports whether EnqueueNewCalls a and b have one group: the
// same group keys and values (but its count).
func sameNewGroup(a, b redisx.Call) bool {
	for i := newCallKeys; i < newCallKeys+newGroupKeys; i++ {
		if a.Keys[i] != b.Keys[i] {
			return false
		}
	}
	for i := newCallArgs + 1; i < newTaskArgs; i++ {
		if a.Args[i] != b.Args[i] {
			return false
		}
	}
	return true
}

func (newMerger) Split(r redisx.Result, n int) []redisx.Result {
	out := make([]redisx.Result, n)
	arr, ok := r.Val.([]any)
	for i := range out {
		switch {
		case r.Err != nil:
			out[i].Err = r.Err
		case !ok || len(arr) != n:
			out[i].Err = fmt.Errorf("record: enqueue: unexpected reply %v (want %d replies)", r.Val, n)
		default:
			out[i].Val = arr[i]
		}
	}
	return out
}
