package record

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestApplyRefreshesOnlyAWornLifetime: Apply leaves the record's and
// history's lifetimes alone while the record's is within refreshSlack of
// what it would set (a quick first delivery: one write of two keys, no
// EXPIRE), refreshes both otherwise, counts the event's delay, and gives a
// history it creates a lifetime.
func TestApplyRefreshesOnlyAWornLifetime(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client() // a real redis-server: TTLs as Redis keeps them
	ctx := context.Background()
	const retention = time.Hour // slack: 36s
	st := NewStore(rdb, WithRetention(retention))
	ttls := func(id string) (time.Duration, time.Duration) {
		rec, err := rdb.TTL(ctx, rkeys.Task(id)).Result()
		require.NoError(t, err)
		hist, err := rdb.TTL(ctx, rkeys.TaskHistory(id)).Result()
		require.NoError(t, err)
		return rec, hist
	}
	setTTL := func(id string, d time.Duration) {
		require.NoError(t, rdb.Expire(ctx, rkeys.Task(id), d).Err())
		require.NoError(t, rdb.Expire(ctx, rkeys.TaskHistory(id), d).Err())
	}
	d := func(id string) Delivery { return Delivery{ID: id, Attempt: 1, Seed: seed()} }
	succeed := func(id string) {
		require.Equal(t, Applied, apply(t, st, d(id), Succeeded(Attempt{Attempt: 1}, nil)))
	}

	for _, id := range []string{"fresh", "worn", "delayed"} {
		create(t, st, id)
	}
	setTTL("fresh", retention-30*time.Second)
	succeed("fresh")
	rec, hist := ttls("fresh")
	require.LessOrEqual(t, rec, retention-30*time.Second, "within the slack: not refreshed")
	require.LessOrEqual(t, hist, retention-30*time.Second)
	v := get(t, st, "fresh")
	require.Equal(t, StateSucceeded, v.State)
	require.Len(t, v.History, 2)

	setTTL("worn", retention-time.Minute)
	succeed("worn")
	rec, hist = ttls("worn")
	require.Greater(t, rec, retention-time.Minute+10*time.Second, "past the slack: refreshed")
	require.Greater(t, hist, retention-time.Minute+10*time.Second)

	require.Equal(t, Applied, apply(t, st, d("delayed"), Retrying(Attempt{Attempt: 1, ErrorClass: "timeout"}, 2*time.Hour, time.Now().Add(2*time.Hour))))
	rec, hist = ttls("delayed")
	require.Greater(t, rec, 3*time.Hour-time.Minute, "the event's delay counts")
	require.Greater(t, hist, 3*time.Hour-time.Minute)

	// A record a start seeded has no history; the event that creates it
	// gives it the record's lifetime.
	require.Equal(t, Applied, apply(t, st, d("bare"), Started()))
	rec, _ = ttls("bare")
	require.Greater(t, rec, retention-time.Minute, "a seeded record expires")
	succeed("bare")
	rec, hist = ttls("bare")
	require.Greater(t, rec, retention-time.Minute)
	require.Greater(t, hist, retention-time.Minute, "the new history expires too")
}
