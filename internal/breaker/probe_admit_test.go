package breaker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// TestBreakerProbeAdmission: with probes, tasks are admitted in CLOSED
// only and the probe takes the one trial of each half-open episode; its
// Record closes or reopens the breaker; an expired probe lease ends the
// episode.
func TestBreakerProbeAdmission(t *testing.T) {
	t.Parallel()
	for _, backend := range redistest.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := backend.New(t)
			ctx := context.Background()
			clk := newFakeClock()
			cfg := Config{FailureThreshold: 2, Cooldown: 10 * time.Second, HalfOpenMaxCalls: 3, TrialLease: 5 * time.Second}
			h := &harness{t: t, rdb: rdb, clk: clk, b: New(rdb, WithClock(clk.Now)), key: "probe-" + backend.Name, cfg: cfg}
			b, key := h.b, h.key

			// CLOSED: tasks admitted, no trial token; probes never admitted.
			adm, err := b.AllowTask(ctx, key, cfg)
			require.NoError(t, err)
			require.True(t, adm.Allowed)
			require.Equal(t, StateClosed, adm.State)
			require.Empty(t, adm.Token)
			padm, err := b.AllowProbe(ctx, key, cfg)
			require.NoError(t, err)
			require.False(t, padm.Allowed)
			require.Equal(t, StateClosed, padm.State)
			require.Zero(t, padm.RetryIn)

			// Counted failures of tasks admitted by AllowTask open it.
			for i := 0; i < 2; i++ {
				adm, err = b.AllowTask(ctx, key, cfg)
				require.NoError(t, err)
				_, err = b.Record(ctx, key, cfg, adm, OutcomeFailure)
				require.NoError(t, err)
			}
			require.Equal(t, StateOpen, h.get().State)
			gen := h.get().Generation

			// OPEN before the cooldown: both denied until open_until.
			clk.Add(4 * time.Second)
			adm, err = b.AllowTask(ctx, key, cfg)
			require.NoError(t, err)
			require.False(t, adm.Allowed)
			require.Equal(t, StateOpen, adm.State)
			require.Equal(t, 6*time.Second, adm.RetryIn)
			padm, err = b.AllowProbe(ctx, key, cfg)
			require.NoError(t, err)
			require.False(t, padm.Allowed)
			require.Equal(t, 6*time.Second, padm.RetryIn)

			// Past the cooldown: a task is still not admitted (and moves
			// nothing); the probe takes the trial; nobody else gets one.
			clk.Add(6 * time.Second)
			adm, err = b.AllowTask(ctx, key, cfg)
			require.NoError(t, err)
			require.False(t, adm.Allowed)
			require.Equal(t, ProbeRetry, adm.RetryIn)
			require.Equal(t, StateOpen, h.get().State, "AllowTask writes nothing")
			require.Equal(t, gen, h.get().Generation)
			padm, err = b.AllowProbe(ctx, key, cfg)
			require.NoError(t, err)
			require.True(t, padm.Allowed)
			require.Equal(t, StateHalfOpen, padm.State)
			require.NotEmpty(t, padm.Token)
			require.Equal(t, gen+1, padm.Generation)
			second, err := b.AllowProbe(ctx, key, cfg)
			require.NoError(t, err)
			require.False(t, second.Allowed, "one probe trial per episode, whatever half_open_max_calls says")
			require.Equal(t, 5*time.Second, second.RetryIn, "until the lease expires")
			adm, err = b.AllowTask(ctx, key, cfg)
			require.NoError(t, err)
			require.False(t, adm.Allowed, "a task is never a half-open trial")
			require.Equal(t, StateHalfOpen, adm.State)
			require.Equal(t, ProbeRetry, adm.RetryIn)

			// A failed probe reopens with a doubled cooldown.
			h.mustRecord(padm, OutcomeFailure, StateOpen)
			s := h.get()
			require.Equal(t, clk.After(20*time.Second), *s.OpenUntil)

			// Next episode: the probe's lease expires (its worker died); the
			// episode ends and the next probe gets a fresh trial; the old
			// probe's result is stale.
			clk.Add(20 * time.Second)
			padm, err = b.AllowProbe(ctx, key, cfg)
			require.NoError(t, err)
			require.True(t, padm.Allowed)
			clk.Add(5 * time.Second)
			again, err := b.AllowProbe(ctx, key, cfg)
			require.NoError(t, err)
			require.True(t, again.Allowed)
			require.Greater(t, again.Generation, padm.Generation)
			_, err = h.record(padm, OutcomeSuccess)
			requireStale(t, err, false)
			require.Equal(t, StateHalfOpen, h.get().State)

			// A successful probe closes it; tasks flow again.
			h.mustRecord(again, OutcomeSuccess, StateClosed)
			adm, err = b.AllowTask(ctx, key, cfg)
			require.NoError(t, err)
			require.True(t, adm.Allowed)
			require.Zero(t, h.get().ConsecutiveFailures)
		})
	}
}

// TestBreakerProbeOneTrialClusterWide: on Redis time, many clients racing
// for the trial once the cooldown ends get exactly one.
func TestBreakerProbeOneTrialClusterWide(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	cfg := Config{HalfOpenMaxCalls: 4, TrialLease: time.Minute}
	const key = "probe-race"
	require.NoError(t, New(srv.Client()).Trip(ctx, key, 200*time.Millisecond))
	var admitted, tasksAdmitted atomic.Int32
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := New(srv.Client()) // one per "worker"
			for time.Now().Before(deadline) {
				adm, err := b.AllowProbe(ctx, key, cfg)
				if err == nil && adm.Allowed {
					admitted.Add(1)
				}
				if adm, err := b.AllowTask(ctx, key, cfg); err == nil && adm.Allowed {
					tasksAdmitted.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), admitted.Load())
	require.Zero(t, tasksAdmitted.Load())
	s, err := New(srv.Client()).Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, StateHalfOpen, s.State)
	require.Equal(t, 1, s.TrialsInFlight)
}

// TestAllowTaskRoundTrips: a CLOSED task admission costs one EVALSHA, as
// Allow's does, and its happy-path Record nothing.
func TestAllowTaskRoundTrips(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	hook := &roundTrips{}
	rdb.AddHook(hook)
	ctx := context.Background()
	require.NoError(t, allowTaskScript.Load(ctx, rdb).Err())
	b := New(rdb)
	cfg := Config{Mode: ModeConsecutive}
	_, err := b.AllowTask(ctx, "rt", cfg)
	require.NoError(t, err)
	hook.take()
	for i := 0; i < 3; i++ {
		adm, err := b.AllowTask(ctx, "rt", cfg)
		require.NoError(t, err)
		require.True(t, adm.Allowed)
		require.Equal(t, []string{"evalsha"}, hook.take())
		_, err = b.Record(ctx, "rt", cfg, adm, OutcomeSuccess)
		require.NoError(t, err)
		require.Empty(t, hook.take())
	}
}

// TestBreakerProbeRedisDown: with Redis gone, AllowProbe admits nothing and
// AllowTask falls back on the last state seen.
func TestBreakerProbeRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	b := New(srv.Client(), WithCallTimeout(300*time.Millisecond))
	adm, err := b.AllowTask(ctx, "down", Config{})
	require.NoError(t, err)
	require.True(t, adm.Allowed)
	srv.Stop()
	adm, err = b.AllowTask(ctx, "down", Config{})
	require.ErrorIs(t, err, ErrUnavailable)
	require.True(t, adm.Allowed, "last seen closed")
	padm, err := b.AllowProbe(ctx, "down", Config{})
	require.ErrorIs(t, err, ErrUnavailable)
	require.False(t, padm.Allowed)
	require.ErrorIs(t, b.RecordProbe(ctx, "down", ProbeResult{OK: true}), ErrUnavailable)
}

// TestProbeStatus: results are kept per key with a bounded window, and the
// interval claim is won once per interval.
func TestProbeStatus(t *testing.T) {
	t.Parallel()
	for _, backend := range redistest.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := backend.New(t)
			ctx := context.Background()
			clk := newFakeClock()
			b := New(rdb, WithClock(clk.Now))
			_, ok, err := b.ProbeStatus(ctx, "ps")
			require.NoError(t, err)
			require.False(t, ok)

			for i := 0; i < ProbeWindow+10; i++ {
				require.NoError(t, b.RecordProbe(ctx, "ps", ProbeResult{OK: i%4 != 0, Latency: 7 * time.Millisecond}))
			}
			long := strings.Repeat("x", 2000)
			clk.Add(time.Second)
			require.NoError(t, b.RecordProbe(ctx, "ps", ProbeResult{OK: false, Latency: 42 * time.Millisecond, Error: long}))
			st, ok, err := b.ProbeStatus(ctx, "ps")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, ProbeWindow, st.Probes)
			require.False(t, st.LastOK)
			require.Equal(t, int64(42), st.LatencyMS)
			require.Equal(t, clk.Now(), *st.LastAt)
			require.Less(t, len(st.Error), 600)
			require.InDelta(t, 0.74, st.SuccessRate, 0.02, fmt.Sprint(st.SuccessRate))
			other, ok, err := b.ProbeStatus(ctx, "other")
			require.NoError(t, err)
			require.False(t, ok)
			require.Zero(t, other.Probes)

			won, err := b.ClaimProbe(ctx, "ps", time.Hour)
			require.NoError(t, err)
			require.True(t, won)
			won, err = New(rdb).ClaimProbe(ctx, "ps", time.Hour)
			require.NoError(t, err)
			require.False(t, won, "another worker within the interval")
			_, err = b.ClaimProbe(ctx, "ps", 0)
			require.Error(t, err)
		})
	}
}
