package record

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestAckedCostWorkload (RECORD_COST_ADDR=host:port) runs RECORD_COST_N
// (default 1000) no-op successes riding asynq's ack, each fetching the
// queue's next run (complete-and-fetch-next), against the redis-server at
// that address, for a measure of the script a quick task costs that a
// busy machine does not blur: run the server under valgrind's callgrind
// and read the instructions under evalShaCommand (the script alone; the
// workload's own setup of each delivery is plain commands). Every task is
// a delivery asynq holds among 50 others, with a run pending behind it.
// RECORD_ACKED_MODE: "lean" (ApplyAcked: succeed_acked.lua), "full"
// (the checked write, apply_acked.lua) or "create" (the records' creates
// alone, also scripts: subtract its count).
func TestAckedCostWorkload(t *testing.T) {
	addr := os.Getenv("RECORD_COST_ADDR")
	if addr == "" {
		t.Skip("RECORD_COST_ADDR=host:port to run")
	}
	n, mode := costEnv("RECORD_COST_N", 1000), os.Getenv("RECORD_ACKED_MODE")
	require.Contains(t, []string{"lean", "full", "create"}, mode, "RECORD_ACKED_MODE")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	require.NoError(t, rdb.FlushAll(context.Background()).Err())
	ackedWorkload(t, rdb, NewStore(rdb), "t", n, mode)
}

// TestLeanAndFullAckFetchNext: a success riding the ack hands out the
// queue's next run in the same script, lean (ApplyAcked) or full (the
// checked write), each run in turn, and the two leave the same records;
// on miniredis and a real redis-server.
func TestLeanAndFullAckFetchNext(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ackedWorkload(t, rdb, st, "lean", 3, "lean")
		ackedWorkload(t, rdb, st, "full", 3, "full")
		for i := range 3 {
			lean, full := fmt.Sprint("lean", i), fmt.Sprint("full", i)
			v, err := st.Get(context.Background(), lean)
			require.NoError(t, err)
			require.Equal(t, StateSucceeded, v.State)
			require.Equal(t, []string{"1:queued", "2:succeeded"}, events(v))
			wid := rdb.HGet(context.Background(), rkeys.Task(lean), FieldWriteID).Val()
			require.NoError(t, rdb.HSet(context.Background(), rkeys.Task(full), FieldWriteID, wid).Err())
			require.Equal(t, leanState(t, rdb, full, wid), leanState(t, rdb, lean, wid))
		}
	})
}

// ackedWorkload creates n tasks (prefix and their number as IDs), each a
// delivery asynq holds among 50 others with a run pending behind it
// (prefix "n" and the task's ID), and, but in mode "create", writes each
// task's success with its ack and the next run fetched: "lean"
// (ApplyAcked) or "full" (the checked write, apply_acked.lua). Each run
// handed out must be the one behind.
func ackedWorkload(t *testing.T, rdb redis.UniversalClient, st *Store, prefix string, n int, mode string) {
	ctx := context.Background()
	const q = "default"
	for i := range 50 {
		require.NoError(t, rdb.LPush(ctx, broker.ActiveKey(q), fmt.Sprint("busy", i)).Err())
	}
	next := &broker.Next{Keys: append([]string{broker.PendingKey(q), broker.PausedKey(q), broker.ActiveKey(q), broker.LeaseKey(q)},
		broker.DequeueKeys(q)...)}
	next.Args = append([]any{time.Now().Add(time.Minute).Unix(), broker.TaskKeyPrefix(q)}, broker.FairConfig{}.DequeueArgs(q)...)
	msg := func(id string) string { // asynq's TaskMessage of a no-op task
		return string(broker.AsynqTask{Type: "noop", Payload: []byte(strings.Repeat("p", 60)), ID: id, Queue: q}.Message())
	}
	for i := range n {
		id := fmt.Sprint(prefix, i)
		_, err := st.Create(ctx, New{ID: id, Seed: seed(), State: StatePending})
		require.NoError(t, err)
		require.NoError(t, rdb.HSet(ctx, broker.TaskKey(q, "n"+id), "msg", msg("n"+id), "state", "pending", "pending_since", 1).Err())
		require.NoError(t, rdb.LPush(ctx, broker.PendingKey(q), "n"+id).Err())
	}
	if mode == "create" {
		return
	}
	for i := range n {
		id := fmt.Sprint(prefix, i)
		require.NoError(t, rdb.LPush(ctx, broker.ActiveKey(q), id).Err())
		require.NoError(t, rdb.ZAdd(ctx, broker.LeaseKey(q), redis.Z{Score: 1, Member: id}).Err())
		require.NoError(t, rdb.HSet(ctx, broker.TaskKey(q, id), "msg", msg(id), "state", "active").Err())
		done := AsynqDone{Keys: []string{broker.ActiveKey(q), broker.LeaseKey(q), broker.TaskKey(q, id), "asynq:{default}:processed:d",
			"asynq:{default}:processed"}, Args: []any{id, time.Now().Add(time.Hour).Unix(), int64(math.MaxInt64)}, Next: next}
		d := Delivery{ID: id, Attempt: 1, Worker: "w:1", Seed: seed()}
		c := Succeeded(Attempt{Attempt: 1, Agent: "noop", Worker: "w:1"}, nil)
		var out Outcome
		var err error
		if mode == "lean" {
			out, err = st.ApplyAcked(ctx, d, c, done)
		} else {
			out, err = st.applyAcked(ctx, d, c, done, append(append([]any{}, done.Args...), next.Args...))
		}
		require.NoError(t, err)
		require.Equal(t, Applied, out)
		require.Equal(t, "n"+id, next.ID)
		require.Equal(t, msg("n"+id), next.Msg)
		require.Equal(t, "active", rdb.HGet(ctx, broker.TaskKey(q, next.ID), "state").Val())
		// The run handed out leaves the active list, as its own done would.
		require.NoError(t, rdb.LRem(ctx, broker.ActiveKey(q), 1, next.ID).Err())
	}
}
