package breaker

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// evalCalls is the server's count of script calls so far.
func evalCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	st, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	var n int64
	for _, l := range strings.Split(st, "\r\n") {
		if strings.HasPrefix(l, "cmdstat_evalsha:") || strings.HasPrefix(l, "cmdstat_eval:") {
			f := strings.TrimPrefix(strings.SplitN(l, ",", 2)[0], l[:strings.Index(l, ":")+1])
			v, err := strconv.ParseInt(strings.TrimPrefix(f, "calls="), 10, 64)
			require.NoError(t, err)
			n += v
		}
	}
	return n
}

// eventually polls cond until it holds or 5s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting: %s", what)
		time.Sleep(2 * time.Millisecond)
	}
}

// TestLocalViewAdmitsClosedWithoutRedis: after Start, closed-state
// admissions cost no Redis call, and an opening, a failure count and a
// close made by another process reach the view through the event channel.
func TestLocalViewAdmitsClosedWithoutRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := Config{FailureThreshold: 3, Cooldown: time.Minute, HalfOpenMaxCalls: 1}
	b := New(rdb)
	b.Start(ctx)
	defer b.Stop()
	other := New(srv.Client()) // another worker; never started: always asks Redis

	eventually(t, "subscription live", func() bool { b.view.mu.Lock(); defer b.view.mu.Unlock(); return b.view.live })
	adm, err := b.Allow(ctx, "k", cfg) // first call reads Redis and fills the view
	require.NoError(t, err)
	require.True(t, adm.Allowed)
	before := evalCalls(t, rdb)
	for i := range 200 {
		allow := b.Allow
		if i%2 == 1 {
			allow = b.AllowTask // agents with a probe: same CLOSED fast path
		}
		adm, err := allow(ctx, "k", cfg)
		require.NoError(t, err)
		require.True(t, adm.Allowed)
	}
	// At most a refresh or two (ViewTTL) for 200 admissions.
	require.LessOrEqual(t, evalCalls(t, rdb)-before, int64(2), "closed admissions went to Redis")

	// A counted failure elsewhere: the view learns the count, so a success
	// here resets it in Redis instead of being batched in memory.
	oadm, err := other.Allow(ctx, "k", cfg)
	require.NoError(t, err)
	_, err = other.Record(ctx, "k", cfg, oadm, OutcomeFailure)
	require.NoError(t, err)
	eventually(t, "failure count seen", func() bool {
		adm, err := b.Allow(ctx, "k", cfg)
		return err == nil && adm.ConsecutiveFailures == 1
	})
	adm, err = b.Allow(ctx, "k", cfg)
	require.NoError(t, err)
	_, err = b.Record(ctx, "k", cfg, adm, OutcomeSuccess)
	require.NoError(t, err)
	snap, err := other.Get(ctx, "k")
	require.NoError(t, err)
	require.Zero(t, snap.ConsecutiveFailures)

	// Opened elsewhere: denied here as soon as the event arrives.
	require.NoError(t, other.Trip(ctx, "k", time.Minute))
	eventually(t, "opening seen", func() bool {
		adm, err := b.Allow(ctx, "k", cfg)
		return err == nil && !adm.Allowed && adm.State == StateOpen
	})
	require.NoError(t, other.Reset(ctx, "k"))
	eventually(t, "close seen", func() bool {
		adm, err := b.Allow(ctx, "k", cfg)
		return err == nil && adm.Allowed
	})
}

// TestLocalViewNotUsedWhenSubscriptionDrops: a Redis restart drops the
// subscription; meanwhile no admission is made from the view (the breaker
// may have changed unseen), and the view comes back after resubscribing.
func TestLocalViewNotUsedWhenSubscriptionDrops(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	cfg := Config{FailureThreshold: 3, Cooldown: time.Minute, HalfOpenMaxCalls: 1}
	b := New(srv.Client())
	b.Start(ctx)
	defer b.Stop()
	eventually(t, "subscription live", func() bool { b.view.mu.Lock(); defer b.view.mu.Unlock(); return b.view.live })
	_, err := b.Allow(ctx, "k", cfg)
	require.NoError(t, err)
	_, ok := b.view.closed("k", b.local())
	require.True(t, ok)

	srv.Kill()
	eventually(t, "view dropped", func() bool { _, ok := b.view.closed("k", b.local()); return !ok })
	srv.Restart()
	// Opened while this process could not listen (restart lost the events
	// and nothing is persisted without AOF): the view must not say closed.
	require.NoError(t, New(srv.Client()).Trip(ctx, "k", time.Minute))
	eventually(t, "open seen after reconnect", func() bool {
		adm, err := b.Allow(ctx, "k", cfg)
		return err == nil && !adm.Allowed
	})
}
