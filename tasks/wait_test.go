package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestClientWait: Wait returns the task's View once it has ended, on a
// Redis that announces (redis-server) and one that does not (miniredis:
// the re-check tells it); ctx's end and an unknown task are errors.
func TestClientWait(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			c := tasks.NewClient(rdb)
			ctx := context.Background()
			_, err := c.Enqueue(ctx, tasks.Task{ID: "w", Agent: "tool"})
			require.NoError(t, err)
			got := make(chan *tasks.View, 1)
			go func() {
				v, err := c.Wait(ctx, "w")
				if err != nil {
					t.Error(err)
				}
				got <- v
			}()
			rec := record.StoreOf(c.Store())
			require.Eventually(t, func() bool {
				v, err := rdb.HGet(ctx, "agentq:{task:w}", record.FieldWatch).Result()
				return err == nil && v == "1"
			}, 10*time.Second, 5*time.Millisecond)
			d := record.Delivery{ID: "w", Attempt: 1}
			for _, ch := range []record.Change{record.Started(), record.Succeeded(record.Attempt{Attempt: 1}, []byte(`{"n":1}`))} {
				_, err := rec.Apply(ctx, d, ch)
				require.NoError(t, err)
			}
			select {
			case v := <-got:
				require.Equal(t, tasks.StateSucceeded, v.State)
				require.JSONEq(t, `{"n":1}`, string(v.Result))
			case <-time.After(20 * time.Second):
				t.Fatal("Wait did not return")
			}

			_, err = c.Enqueue(ctx, tasks.Task{ID: "w2", Agent: "tool"})
			require.NoError(t, err)
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err = c.Wait(short, "w2")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			_, err = c.Wait(ctx, "nope")
			require.ErrorIs(t, err, tasks.ErrNotFound)
		})
	}
}
