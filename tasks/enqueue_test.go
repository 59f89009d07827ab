package tasks

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestEnqueueOneRoundTrip: Enqueue — the duplicate check of a caller's ID,
// the run on its queue, the record and the wake-up — is one round trip,
// once the client has registered the queue.
func TestEnqueueOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	rt := &redistest.RoundTrips{}
	rdb.AddHook(rt)
	c := NewClient(rdb)
	// The first enqueues register the queue and load the script.
	_, err := c.Enqueue(ctx, Task{Agent: "tool"})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, Task{ID: "warm-up", Agent: "tool"})
	require.NoError(t, err)
	cases := []struct {
		name string
		task Task
		opts []EnqueueOption
		dup  bool
	}{
		{"generated ID", Task{Agent: "tool"}, nil, false},
		{"caller ID", Task{ID: "job-1", Agent: "tool", Params: json.RawMessage(`{"a":1}`)}, nil, false},
		{"duplicate", Task{ID: "job-1", Agent: "tool"}, nil, true},
		{"scheduled", Task{ID: "job-2", Agent: "tool"}, []EnqueueOption{ProcessIn(time.Hour)}, false},
		{"caller ID with a deadline", Task{ID: "job-3", Agent: "tool"}, []EnqueueOption{Within(time.Minute)}, false},
		{"generated ID with a deadline", Task{Agent: "tool", Deadline: time.Now().Add(time.Hour)}, nil, false},
	}
	for _, tc := range cases {
		before := rt.N.Load()
		res, err := c.Enqueue(ctx, tc.task, tc.opts...)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.dup, res.Duplicate, tc.name)
		require.EqualValues(t, 1, rt.N.Load()-before, "%s: round trips", tc.name)
	}
	v, err := c.Store().Get(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, StatePending, v.State)
	require.JSONEq(t, `{"a":1}`, string(mustEnvelope(t, rdb, "job-1").Params))
}

func mustEnvelope(t *testing.T, rdb redis.UniversalClient, id string) *Envelope {
	t.Helper()
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(DefaultQueue, (&Envelope{ID: id}).AsynqID())
	require.NoError(t, err)
	env, err := Decode(info.Payload)
	require.NoError(t, err)
	return env
}

// TestEnqueueSignals: an enqueue wakes one idle worker (a token on the
// queue's wake list, capped), and a task scheduled for later is announced
// on rkeys.DueChannel, once per queue for a batch.
func TestEnqueueSignals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	ps := rdb.Subscribe(ctx, rkeys.DueChannel())
	defer ps.Close()
	_, err := ps.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)
	c := NewClient(rdb)

	_, err = c.Enqueue(ctx, Task{Agent: "tool"})
	require.NoError(t, err)
	n, err := rdb.LLen(ctx, rkeys.Wake(DefaultQueue)).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	batch := make([]Task, broker.WakeCap+10)
	for i := range batch {
		batch[i] = Task{Agent: "tool"}
	}
	_, err = c.EnqueueMany(ctx, batch)
	require.NoError(t, err)
	n, err = rdb.LLen(ctx, rkeys.Wake(DefaultQueue)).Result()
	require.NoError(t, err)
	require.EqualValues(t, broker.WakeCap, n, "the wake list is capped")

	at := time.Now().Add(time.Hour)
	_, err = c.Enqueue(ctx, Task{Agent: "tool", Queue: "later"}, ProcessAt(at))
	require.NoError(t, err)
	_, err = c.EnqueueMany(ctx, []Task{{Agent: "tool", Queue: "later"}, {Agent: "tool", Queue: "later"}}, ProcessAt(at))
	require.NoError(t, err)
	for range 2 {
		m, err := ps.ReceiveTimeout(ctx, 10*time.Second)
		require.NoError(t, err)
		msg, ok := m.(*redis.Message)
		require.True(t, ok, "%T", m)
		require.Equal(t, broker.DueMessage("later", at), msg.Payload)
	}
	_, err = ps.ReceiveTimeout(ctx, 200*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "one announcement per enqueue, and one for the batch")
	require.True(t, ne.Timeout())
	n, err = rdb.LLen(ctx, rkeys.Wake("later")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a scheduled task wakes nobody until it is due")
}

// TestEnqueueFreshWritesAsScript: a generated ID's enqueue (the lean
// script, record.Store.EnqueueNewCall, with its merger) writes
// exactly what a caller's ID's enqueue script (record.Store.EnqueueCall)
// writes (with the queue's registration in asynq:queues, as enqueueOne
// sends it), pending and scheduled, token, record, first event (seq 1) and
// lifetimes and all (one clock for both: the times match too), but that
// its record holds its first event (read back the same) where the
// script's starts the history list.
func TestEnqueueFreshWritesAsScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	viaScript, viaFresh := redistest.Start(t).Client(), redistest.Start(t).Client()
	now := time.Now()
	clock := WithClock(func() time.Time { return now })
	sc, fc := NewClient(viaScript, clock), NewClient(viaFresh, clock)
	var ids []string
	for i, delay := range []time.Duration{0, 90 * time.Minute} {
		env := &Envelope{ID: NewID(), Agent: "tool", Action: "run", Params: json.RawMessage(`{"n":1}`),
			CorrelationID: "c-1", Queue: []string{"default", "other"}[i], EnqueuedAt: now.UTC()}
		if delay > 0 {
			env.Deadline = now.Add(2 * time.Hour).UnixMilli() // and its entry in the deadline index
		}
		ids = append(ids, env.ID)
		n := newRecord(env, firstState(delay), delay)
		tk, err := asynqTask(env, now, delay)
		require.NoError(t, err)
		lane := []broker.Lane{{Tenant: "acme"}, {Priority: broker.High}}[i]
		// The caller-ID path: the script, with the queue's registration.
		r := sc.runRegistered(ctx, env.Queue, sc.store.rec.EnqueueCall(n, tk, lane, now))
		code, st, err := record.EnqueueReply(r.Val, r.Err)
		require.NoError(t, err)
		require.Equal(t, record.CodeApplied, code)
		require.Equal(t, n.State, st)
		require.NoError(t, fc.enqueueFresh(ctx, n, tk, lane, now))
	}
	// The queues' keys alike; the records read the same, the first event
	// held by the fresh record (no history list before the second event).
	outside := func(d map[string]string) map[string]string {
		for k := range d {
			if strings.HasPrefix(k, "agentq:{task:") {
				delete(d, k)
			}
		}
		return d
	}
	require.Equal(t, outside(redistest.Dump(t, viaScript)), outside(redistest.Dump(t, viaFresh)))
	for _, id := range ids {
		want, err := sc.store.rec.Get(ctx, id)
		require.NoError(t, err)
		got, err := fc.store.rec.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Len(t, got.History, 1)
		require.Zero(t, viaFresh.Exists(ctx, rkeys.TaskHistory(id)).Val())
	}
	for _, rdb := range []*redis.Client{viaScript, viaFresh} {
		ttl, err := rdb.TTL(ctx, rkeys.Wake("default")).Result()
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl, "the wake list does not expire")
	}
	for _, id := range ids {
		for _, k := range []string{rkeys.Task(id)} {
			want, err := viaScript.TTL(ctx, k).Result()
			require.NoError(t, err)
			got, err := viaFresh.TTL(ctx, k).Result()
			require.NoError(t, err)
			require.Positive(t, want, k)
			require.InDelta(t, want.Seconds(), got.Seconds(), 2, "%s: the same lifetime", k)
		}
	}
}

// TestEnqueueRegistersItsQueueEveryTime: asynq's set of queues lost under
// a running producer (a FLUSHALL, a restart without persistence, a
// failover to a replica that missed the write) is back after the
// producer's next enqueue, whichever way it enqueues; the registration
// rides the enqueue's round trip.
func TestEnqueueRegistersItsQueueEveryTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	c := NewClient(rdb)
	cases := []struct {
		name    string
		queue   string
		enqueue func(queue string) error
	}{
		{"generated ID", "q-fresh", func(q string) error {
			_, err := c.Enqueue(ctx, Task{Agent: "tool", Queue: q})
			return err
		}},
		{"caller ID", "q-caller", func(q string) error {
			_, err := c.Enqueue(ctx, Task{ID: NewID(), Agent: "tool", Queue: q})
			return err
		}},
		{"batch", "q-batch", func(q string) error {
			_, err := c.EnqueueMany(ctx, []Task{{Agent: "tool", Queue: q}})
			return err
		}},
		{"run", "q-run", func(q string) error {
			return c.EnqueueRun(ctx, &Envelope{ID: NewID(), Agent: "tool", Queue: q}, 0)
		}},
	}
	for _, tc := range cases {
		require.NoError(t, tc.enqueue(tc.queue), tc.name)
		require.NoError(t, rdb.Del(ctx, "asynq:queues").Err())
		require.NoError(t, tc.enqueue(tc.queue), tc.name)
		ok, err := rdb.SIsMember(ctx, "asynq:queues", tc.queue).Result()
		require.NoError(t, err)
		require.True(t, ok, "%s: the enqueue after the set was lost registers %s again", tc.name, tc.queue)
	}
}
