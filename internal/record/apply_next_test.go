package record

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
)

// nextOfDefault is a broker.Next for queue default (no tenants), as the
// worker's AsynqClient makes it.
func nextOfDefault() *broker.Next {
	q := "default"
	return &broker.Next{
		Keys: append([]string{broker.PendingKey(q), broker.PausedKey(q), broker.ActiveKey(q), broker.LeaseKey(q)}, broker.DequeueKeys(q)...),
		Args: append([]any{strconv.FormatInt(time.Now().Add(30*time.Second).Unix(), 10), broker.TaskKeyPrefix(q)},
			broker.FairConfig{}.DequeueArgs(q)...),
	}
}

// TestApplyAckedFetchesNext: with a Next, the checked write, asynq's done
// and the dequeue of the queue's next run are one script: the write and
// the ack land as without it, and the next pending run is active and
// leased, its message and ID in the Next; with none pending, the Next
// stays empty; a write whose record is not yet written (the seed round)
// fetches once.
func TestApplyAckedFetchesNext(t *testing.T) {
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, st *Store) {
		ctx := context.Background()
		ok := Succeeded(Attempt{Attempt: 1, Agent: "llm"}, json.RawMessage(`{"ok":true}`))
		pend := func(id string) {
			require.NoError(t, rdb.LPush(ctx, broker.PendingKey("default"), id).Err())
			require.NoError(t, rdb.HSet(ctx, broker.TaskKey("default", id), "msg", taskMessage(id), "state", "pending").Err())
		}

		t.Run("a pending run is handed out", func(t *testing.T) {
			create(t, st, "nx-1")
			pend("nx-next")
			done := activeDelivery(t, rdb, "nx-1")
			done.Next = nextOfDefault()
			out, err := st.ApplyAcked(ctx, Delivery{ID: "nx-1", Attempt: 1, Seed: seed()}, ok, done)
			require.NoError(t, err)
			require.Equal(t, Applied, out)
			requireAcked(t, rdb, "nx-1")
			require.Equal(t, StateSucceeded, get(t, st, "nx-1").State)
			require.Equal(t, taskMessage("nx-next"), done.Next.Msg)
			require.Equal(t, "nx-next", done.Next.ID)
			require.Zero(t, rdb.LLen(ctx, broker.PendingKey("default")).Val())
			require.NoError(t, rdb.LPos(ctx, broker.ActiveKey("default"), "nx-next", redis.LPosArgs{}).Err(), "active")
			require.NoError(t, rdb.ZScore(ctx, broker.LeaseKey("default"), "nx-next").Err(), "leased")
			require.Equal(t, "active", rdb.HGet(ctx, broker.TaskKey("default", "nx-next"), "state").Val())
		})

		t.Run("nothing pending", func(t *testing.T) {
			create(t, st, "nx-2")
			done := activeDelivery(t, rdb, "nx-2")
			done.Next = nextOfDefault()
			out, err := st.ApplyAcked(ctx, Delivery{ID: "nx-2", Attempt: 1, Seed: seed()}, ok, done)
			require.NoError(t, err)
			require.Equal(t, Applied, out)
			requireAcked(t, rdb, "nx-2")
			require.Empty(t, done.Next.Msg)
			require.Empty(t, done.Next.ID)
		})

		t.Run("seed round fetches once", func(t *testing.T) {
			pend("nx-next2")
			pend("nx-next3")
			done := activeDelivery(t, rdb, "nx-3") // no record: the first call asks for the seed
			done.Next = nextOfDefault()
			out, err := st.ApplyAcked(ctx, Delivery{ID: "nx-3", Attempt: 1, Seed: seed()}, ok, done)
			require.NoError(t, err)
			require.Equal(t, Applied, out)
			require.Equal(t, StateSucceeded, get(t, st, "nx-3").State)
			require.Equal(t, "nx-next2", done.Next.ID)
			require.EqualValues(t, 1, rdb.LLen(ctx, broker.PendingKey("default")).Val(), "one run fetched")
		})

		t.Run("not active: nothing fetched", func(t *testing.T) {
			create(t, st, "nx-4")
			done := activeDelivery(t, rdb, "nx-4")
			require.NoError(t, rdb.LRem(ctx, activeKey, 0, "nx-4").Err())
			done.Next = nextOfDefault()
			_, err := st.ApplyAcked(ctx, Delivery{ID: "nx-4", Attempt: 1, Seed: seed()}, ok, done)
			require.ErrorIs(t, err, ErrNotActive)
			require.Empty(t, done.Next.ID)
			require.EqualValues(t, 1, rdb.LLen(ctx, broker.PendingKey("default")).Val(), "the pending run stays")
		})
	})
}

// taskMessage is asynq's TaskMessage of a task id on queue default.
func taskMessage(id string) string {
	return string(broker.AsynqTask{Type: "chat", Payload: []byte(`{"prompt":"hi"}`), ID: id, Queue: "default"}.Message())
}
