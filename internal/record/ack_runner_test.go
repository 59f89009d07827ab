package record

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/redisx"
)

// countingRunner runs scripts straight on the client and counts them.
type countingRunner struct {
	redisx.Runner
	n atomic.Int64
}

func (c *countingRunner) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	c.n.Add(1)
	return c.Runner.Run(ctx, s, keys, args...)
}

// TestApplyAckedRunsOnTheAckRunner: a success riding asynq's done goes
// through the store's ack runner (WithAckRunner: the worker's batcher,
// where concurrent acks share round trips), not through the writes'
// runner (WithRunner), and without one takes a round trip of its own.
func TestApplyAckedRunsOnTheAckRunner(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := b.New(t)
			ctx := context.Background()
			ok := Succeeded(Attempt{Attempt: 1, Agent: "llm"}, json.RawMessage(`{"ok":true}`))
			for _, c := range []struct {
				name     string
				acks     bool
				wantAcks bool
			}{
				{name: "ack runner", acks: true, wantAcks: true},
				{name: "none", acks: false},
			} {
				writes, acks := &countingRunner{Runner: redisx.Direct(rdb)}, &countingRunner{Runner: redisx.Direct(rdb)}
				opts := []Option{WithRetention(time.Hour), WithClock(func() time.Time { return t0 }), WithRunner(writes)}
				if c.acks {
					opts = append(opts, WithAckRunner(acks))
				}
				st := NewStore(rdb, opts...)
				id := "ar-" + b.Name + "-" + c.name
				create(t, st, id)
				writes.n.Store(0)
				out, err := st.ApplyAcked(ctx, Delivery{ID: id, Attempt: 1, Seed: seed()}, ok, activeDelivery(t, rdb, id))
				require.NoError(t, err, c.name)
				require.Equal(t, Applied, out, c.name)
				requireAcked(t, rdb, id)
				require.Equal(t, StateSucceeded, get(t, st, id).State, c.name)
				require.Equal(t, c.wantAcks, acks.n.Load() > 0, "%s: acks on the ack runner", c.name)
				require.Zero(t, writes.n.Load(), "%s: no ack on the writes' runner", c.name)
			}
		})
	}
}
