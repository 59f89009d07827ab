package tasks

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/wakeup"
)

// TestRunScriptWritesAsynqs: runScript writes exactly what asynq's own
// enqueue and schedule scripts write (asynqcompat's copies, which
// TestMatchesAsynqClient holds to asynq.Client), plus the wake-up token, and
// refuses a task ID that exists as they do.
func TestRunScriptWritesAsynqs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want, got := redistest.Start(t).Client(), redistest.Start(t).Client()
	now := time.Now()
	ts := []asynqcompat.Task{
		{Type: TypeName, Payload: []byte(`{"id":"a"}`), ID: "a#0", Queue: "default", MaxRetry: asynqMaxRetry, Timeout: RunTimeout},
		{Type: TypeName, Payload: []byte(`{"id":"b"}`), ID: "b#0", Queue: "critical", MaxRetry: asynqMaxRetry, Timeout: RunTimeout},
	}
	for _, delay := range []time.Duration{0, time.Hour} {
		for _, tk := range ts {
			for range 2 { // the second write of an ID is refused
				ref := asynqcompat.Enqueue(tk, now)
				if delay > 0 {
					ref = asynqcompat.Schedule(tk, now.Add(delay))
				}
				n1, err := ref.Script.Run(ctx, want, ref.Keys, ref.Args...).Int()
				require.NoError(t, err)
				c := runCall(tk, now, delay, true)
				n2, err := c.Script.Run(ctx, got, c.Keys, c.Args...).Int()
				require.NoError(t, err)
				require.Equal(t, n1, n2)
			}
		}
		ts[0].ID, ts[1].ID = "c#0", "d#0"
	}
	for _, q := range []string{"default", "critical"} {
		n, err := got.LLen(ctx, rkeys.Wake(q)).Result()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "one token per pending task written, none for refused or scheduled ones")
		require.NoError(t, got.Del(ctx, rkeys.Wake(q)).Err())
	}
	require.Equal(t, redistest.Dump(t, want, "pending_since"), redistest.Dump(t, got, "pending_since"))
}

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

	batch := make([]Task, wakeup.Cap+10)
	for i := range batch {
		batch[i] = Task{Agent: "tool"}
	}
	_, err = c.EnqueueMany(ctx, batch)
	require.NoError(t, err)
	n, err = rdb.LLen(ctx, rkeys.Wake(DefaultQueue)).Result()
	require.NoError(t, err)
	require.EqualValues(t, wakeup.Cap, n, "the wake list is capped")

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
		require.Equal(t, wakeup.DueMessage("later", at), msg.Payload)
	}
	_, err = ps.ReceiveTimeout(ctx, 200*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "one announcement per enqueue, and one for the batch")
	require.True(t, ne.Timeout())
	n, err = rdb.LLen(ctx, rkeys.Wake("later")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a scheduled task wakes nobody until it is due")
}

// TestEnqueueFreshWritesAsScript: a generated ID's enqueue (plain commands
// in MULTI/EXEC) writes exactly what enqueueTaskScript writes, pending and
// scheduled, token and all.
func TestEnqueueFreshWritesAsScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	viaScript, viaFresh := redistest.Start(t).Client(), redistest.Start(t).Client()
	now := time.Now()
	for i, delay := range []time.Duration{0, 90 * time.Minute} {
		env := &Envelope{ID: NewID(), Agent: "tool", Action: "run", Params: json.RawMessage(`{"n":1}`),
			CorrelationID: "c-1", Queue: []string{"default", "other"}[i], EnqueuedAt: now.UTC()}
		state, event := firstState(delay)
		ev := Event{Event: event, DelayMS: delay.Milliseconds(), At: now}
		b, _ := json.Marshal(ev)
		sc := NewClient(viaScript)
		tk, err := asynqTask(env, now, delay)
		require.NoError(t, err)
		keys := append([]string{rkeys.Task(env.ID), rkeys.TaskHistory(env.ID), rkeys.DLQEntries()}, runKeys(env.Queue, tk.ID, delay)...)
		args := append([]any{"0", env.ID}, runArgs(tk, now, delay, true)...)
		args = append(args, env.Agent, env.Action, env.Queue, env.EnqueuedAt.Format(time.RFC3339Nano),
			string(state), string(b), sc.store.createTTL(ev), env.CorrelationID)
		_, err = enqueueTaskScript.Run(ctx, viaScript, keys, args...).Result()
		require.NoError(t, err)
		fc := NewClient(viaFresh)
		require.NoError(t, fc.enqueueFresh(ctx, env, tk, now, delay, state, string(b), fc.store.createTTL(ev)))
	}
	require.Equal(t, redistest.Dump(t, viaScript), redistest.Dump(t, viaFresh))
	for _, rdb := range []*redis.Client{viaScript, viaFresh} {
		ttl, err := rdb.TTL(ctx, rkeys.Wake("default")).Result()
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl, "the wake list does not expire")
	}
}
