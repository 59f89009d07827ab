package breaker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// rateCfg is the rate-mode configuration of TestBreakerRateMode: the
// defaults' numbers, a 10s window.
var rateCfg = Config{Mode: ModeRate, Window: 10 * time.Second, FailureRate: 0.5, MinCalls: 20, MinFailingTasks: 3,
	Cooldown: 10 * time.Second, TrialLease: 5 * time.Second}

// succeedTasks records n admitted successes.
func (h *harness) succeedTasks(n int) State {
	h.t.Helper()
	var st State
	for i := range n {
		var err error
		st, err = h.b.Record(context.Background(), h.key, h.cfg, h.allow(), OutcomeSuccess, ForTask(fmt.Sprint("ok-", i)))
		require.NoError(h.t, err)
	}
	return st
}

// TestBreakerRateMode: rate mode opens on the fleet's failure rate over
// the sliding window, with a minimum volume and several distinct failing
// tasks; one task's failures never open it.
func TestBreakerRateMode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"one task's failures never open it", func(t *testing.T, h *harness) {
			require.Equal(t, StateClosed, h.failTasks(200, "poison"))
			require.Equal(t, StateClosed, h.failTasks(200, "poison", "other"), "two tasks are still below min_failing_tasks")
			require.Equal(t, StateOpen, h.failTasks(1, "third"))
		}},
		{"below the failure rate it stays closed", func(t *testing.T, h *harness) {
			for range 20 {
				h.succeedTasks(2)
				require.Equal(t, StateClosed, h.failTasks(1, "a", "b", "c", "d"))
				h.clk.Add(100 * time.Millisecond)
			}
			require.Equal(t, 0, h.get().ConsecutiveFailures, "rate mode keeps no consecutive count")
			// Now every call fails: the rate crosses 0.5 when failures reach
			// the successes' 40.
			require.Equal(t, StateClosed, h.failTasks(19, "a", "b", "c"))
			require.Equal(t, StateOpen, h.failTasks(1, "a", "b", "c"))
		}},
		{"below min_calls it stays closed", func(t *testing.T, h *harness) {
			h.succeedTasks(5)
			require.Equal(t, StateClosed, h.failTasks(14, "a", "b", "c"))
			s := h.get()
			require.Equal(t, HealthDegraded, s.Health, "failures in the window")
			require.Equal(t, int64(19), s.WindowCalls)
			require.Equal(t, int64(14), s.WindowFailures)
			require.Equal(t, int64(3), s.FailingTasks)
			h.clk.Add(11 * time.Second)
			require.Equal(t, HealthHealthy, h.get().Health, "the window is past")
			require.Equal(t, StateClosed, h.failTasks(19, "a", "b", "c"))
			require.Equal(t, StateOpen, h.failTasks(1, "a", "b", "c"))
		}},
		{"the window slides: old calls stop counting", func(t *testing.T, h *harness) {
			require.Equal(t, StateClosed, h.failTasks(15, "a", "b", "c"))
			h.clk.Add(11 * time.Second)
			require.Equal(t, StateClosed, h.failTasks(15, "a", "b", "c"), "the first 15 left the window")
			h.clk.Add(5 * time.Second)
			require.Equal(t, StateOpen, h.failTasks(5, "d", "e", "f"), "15 + 5 within 10s")
		}},
		{"failing tasks leave the window too", func(t *testing.T, h *harness) {
			h.failTasks(2, "a", "b")
			h.clk.Add(11 * time.Second)
			require.Equal(t, StateClosed, h.failTasks(40, "c", "d"), "a and b failed too long ago")
			require.Equal(t, StateOpen, h.failTasks(1, "e"))
		}},
		{"a close starts a fresh window", func(t *testing.T, h *harness) {
			require.Equal(t, StateOpen, h.failTasks(20, "a", "b", "c"))
			h.clk.Add(10 * time.Second)
			trial := h.allow()
			require.True(t, trial.Allowed)
			h.mustRecord(trial, OutcomeSuccess, StateClosed)
			require.Equal(t, StateClosed, h.failTasks(19, "a", "b", "c"), "the failures before the open count no more")
			// A failed half-open trial in rate mode reopens with a doubled cooldown.
			require.Equal(t, StateOpen, h.failTasks(1, "a"))
			h.clk.Add(10 * time.Second)
			trial = h.allow()
			require.True(t, trial.Allowed)
			h.mustRecord(trial, OutcomeFailure, StateOpen)
			require.Equal(t, h.clk.After(20*time.Second), *h.get().OpenUntil)
		}},
		{"the window's keys stay bounded and expire", func(t *testing.T, h *harness) {
			ctx := context.Background()
			for i := range 300 {
				h.succeedTasks(3)
				h.failTasks(1, fmt.Sprint("t-", i))
				h.clk.Add(97 * time.Millisecond)
			}
			require.Equal(t, StateClosed, h.get().State)
			n, err := h.rdb.HLen(ctx, rkeys.BreakerWindow(h.key)).Result()
			require.NoError(t, err)
			require.LessOrEqual(t, n, int64(32), "ten ring buckets, width and hot_at")
			n, err = h.rdb.ZCard(ctx, rkeys.BreakerFailing(h.key)).Result()
			require.NoError(t, err)
			require.LessOrEqual(t, n, int64(10), "at most max(min_failing_tasks, 10) tasks")
			for _, k := range []string{rkeys.BreakerWindow(h.key), rkeys.BreakerFailing(h.key)} {
				ttl, err := h.rdb.PTTL(ctx, k).Result()
				require.NoError(t, err)
				require.Greater(t, ttl, time.Duration(0), k)
				require.LessOrEqual(t, ttl, 2*rateCfg.Window, k)
			}
		}},
		{"stale outcomes do not count in the window", func(t *testing.T, h *harness) {
			old := h.allow()
			require.NoError(t, h.b.Reset(context.Background(), h.key))
			for range 30 {
				_, err := h.b.Record(context.Background(), h.key, h.cfg, old, OutcomeFailure, ForTask("x"))
				require.ErrorIs(t, err, ErrStaleAdmission)
			}
			require.Equal(t, StateClosed, h.failTasks(19, "a", "b", "c"))
		}},
	}
	for _, backend := range redistest.Backends() {
		rdb, _ := backend.New(t)
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					clk := newFakeClock()
					h := &harness{t: t, rdb: rdb, clk: clk, b: New(rdb, WithClock(clk.Now)), key: fmt.Sprintf("rate-%d", i), cfg: rateCfg}
					tc.run(t, h)
				})
			}
		})
	}
}

// TestBreakerConfigResolved: the zero mode is consecutive when a failure
// threshold is set (configs written before rate mode), rate otherwise.
func TestBreakerConfigResolved(t *testing.T) {
	t.Parallel()
	require.Equal(t, ModeRate, Config{}.Resolved())
	require.Equal(t, ModeConsecutive, Config{FailureThreshold: 3}.Resolved())
	require.Equal(t, ModeRate, Config{Mode: ModeRate, FailureThreshold: 3}.Resolved())
	c := Config{Cooldown: time.Hour}.withDefaults()
	require.Equal(t, time.Hour, c.MaxCooldown, "max_cooldown is never below cooldown")
}

// TestRateModeBatchesSuccessesWhileCold: after Start, rate mode's
// successes cost no Redis call while the window holds no failure (they
// are flushed into the window), and are written at once as soon as
// another process announces a failure in the window.
func TestRateModeBatchesSuccessesWhileCold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	cfg := Config{Mode: ModeRate, Window: time.Minute, MinCalls: 5, MinFailingTasks: 2}
	b := New(rdb, WithFlushInterval(time.Hour)) // flushed by hand below
	b.Start(ctx)
	defer b.Stop()
	other := New(srv.Client())

	eventually(t, "subscription live", func() bool { return b.view.isLive() })
	_, err := b.Allow(ctx, "k", cfg) // fills the view
	require.NoError(t, err)
	before := evalCalls(t, rdb)
	for range 50 {
		adm, err := b.Allow(ctx, "k", cfg)
		require.NoError(t, err)
		_, err = b.Record(ctx, "k", cfg, adm, OutcomeSuccess, ForTask("ok"))
		require.NoError(t, err)
	}
	require.LessOrEqual(t, evalCalls(t, rdb)-before, int64(2), "cold successes went to Redis")
	require.NoError(t, b.Flush(ctx))

	// A failure elsewhere makes the window hot: successes here are
	// written at once, and the 50 flushed ones keep the rate low.
	oadm, err := other.Allow(ctx, "k", cfg)
	require.NoError(t, err)
	_, err = other.Record(ctx, "k", cfg, oadm, OutcomeFailure, ForTask("a"))
	require.NoError(t, err)
	eventually(t, "hot seen", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.local().Before(b.hot["k"])
	})
	before = evalCalls(t, rdb)
	adm, err := b.Allow(ctx, "k", cfg)
	require.NoError(t, err)
	_, err = b.Record(ctx, "k", cfg, adm, OutcomeSuccess, ForTask("ok"))
	require.NoError(t, err)
	require.Equal(t, int64(1), evalCalls(t, rdb)-before, "a hot success is written at once")
	for i := range 20 {
		adm, err := other.Allow(ctx, "k", cfg)
		require.NoError(t, err)
		st, err := other.Record(ctx, "k", cfg, adm, OutcomeFailure, ForTask(fmt.Sprint("t", i%3)))
		require.NoError(t, err)
		require.Equal(t, StateClosed, st, "21 failures against 51 successes stay below 0.5")
	}
}
