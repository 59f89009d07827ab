package broker

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// fakeAck records how the AsynqClient ran it.
type fakeAck struct {
	mu    sync.Mutex
	calls []string
	keys  []string
	args  []any
}

func (f *fakeAck) WithDone(ctx context.Context, keys []string, args []any, _ *Next) *redis.Cmd {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.keys, f.args = append(f.calls, "with_done"), keys, args
	cmd := redis.NewCmd(ctx)
	cmd.SetVal("OK")
	return cmd
}

func (f *fakeAck) Alone(context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "alone")
}

func (f *fakeAck) ran() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func doneCall(id string) ([]string, []any) {
	return []string{"asynq:{q}:active", "asynq:{q}:lease", "asynq:{q}:t:" + id, "asynq:{q}:processed:2026-11-24", "asynq:{q}:processed"},
		[]any{id, time.Now().Add(time.Hour).Unix(), int64(math.MaxInt64)}
}

// TestAcksRideAsynqsDone: asynq's done of a delivery that left a write
// runs the write's WithDone instead of asynq's script; any other of
// asynq's scripts on the task runs after the write's Alone; a delivery
// that left nothing is asynq's alone.
func TestAcksRideAsynqsDone(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	acks := NewAcks(nil)
	c := NewAsynqClient(rdb, nil, nil, 1, nil)
	c.Acks = acks

	t.Run("done runs the write with it", func(t *testing.T) {
		f := &fakeAck{}
		acks.Put("t1", f)
		require.Equal(t, 1, acks.Len())
		keys, args := doneCall("t1")
		require.NoError(t, AsynqDoneScript.Run(ctx, c, keys, args...).Err())
		require.Equal(t, []string{"with_done"}, f.ran())
		require.Equal(t, keys, f.keys)
		require.Equal(t, args, f.args)
		require.Zero(t, acks.Len(), "a write rides one ack only")
		err := AsynqDoneScript.Run(ctx, c, keys, args...).Err()
		require.ErrorContains(t, err, "NOT FOUND", "a second done is asynq's own")
		require.Equal(t, []string{"with_done"}, f.ran())
	})

	t.Run("another answer runs after the write alone", func(t *testing.T) {
		f := &fakeAck{}
		acks.Put("t2", f)
		// asynq's retry of the delivery (its context ended as the handler
		// returned): KEYS[1] is the task hash.
		err := AsynqRetryScript.Run(ctx, c,
			[]string{"asynq:{q}:t:t2", "asynq:{q}:active", "asynq:{q}:lease", "asynq:{q}:retry"},
			"t2", "msg", time.Now().Unix(), 0, 0, 0).Err()
		require.ErrorContains(t, err, "NOT FOUND", "asynq's script still runs")
		require.Equal(t, []string{"alone"}, f.ran())
		require.Zero(t, acks.Len())
	})

	t.Run("other tasks' calls leave the write waiting", func(t *testing.T) {
		f := &fakeAck{}
		acks.Put("t3", f)
		keys, args := doneCall("t4")
		require.ErrorContains(t, AsynqDoneScript.Run(ctx, c, keys, args...).Err(), "NOT FOUND")
		require.Empty(t, f.ran())
		require.Equal(t, 1, acks.Len())
		acks.Forget("t3")
		require.Zero(t, acks.Len(), "a new delivery of the task drops it")
		keys, args = doneCall("t3")
		require.ErrorContains(t, AsynqDoneScript.Run(ctx, c, keys, args...).Err(), "NOT FOUND")
		require.Empty(t, f.ran(), "a forgotten write never rides a later ack")
	})
}

// TestAcksSweep: writes whose delivery asynq never acknowledged are
// dropped once they are older than ackMaxAge, and reported.
func TestAcksSweep(t *testing.T) {
	t.Parallel()
	var dropped []string
	acks := NewAcks(func(id string) { dropped = append(dropped, id) })
	now := time.Unix(1_700_000_000, 0)
	acks.now = func() time.Time { return now }
	acks.Put("old", &fakeAck{})
	now = now.Add(ackMaxAge + time.Second)
	for i := 1; i < sweepEvery; i++ {
		acks.Put(fmt.Sprintf("t%d", i), &fakeAck{})
		acks.Forget(fmt.Sprintf("t%d", i))
	}
	require.Equal(t, []string{"old"}, dropped)
	require.Zero(t, acks.Len())
}

func TestTaskOf(t *testing.T) {
	t.Parallel()
	for keys, want := range map[string]string{
		"asynq:{q}:t:abc":  "abc",
		"asynq:{q}:active": "",
		"agentq:{x}:t:y":   "",
		"":                 "",
	} {
		require.Equal(t, want, taskOf([]string{"asynq:{q}:lease", keys}), keys)
	}
}

// TestAcksDrain: writes still waiting when the worker has stopped run
// alone, once each; a nil Acks has none.
func TestAcksDrain(t *testing.T) {
	t.Parallel()
	acks := NewAcks(nil)
	f1, f2 := &fakeAck{}, &fakeAck{}
	acks.Put("a", f1)
	acks.Put("b", f2)
	require.Equal(t, 2, acks.Drain(context.Background()))
	require.Equal(t, []string{"alone"}, f1.ran())
	require.Equal(t, []string{"alone"}, f2.ran())
	require.Zero(t, acks.Len())
	require.Zero(t, acks.Drain(context.Background()))
	var none *Acks
	require.Zero(t, none.Drain(context.Background()))
}
