package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// fakeClock is an injected decision clock (ms resolution, like the scripts).
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time                  { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Add(d time.Duration)             { c.ms.Add(d.Milliseconds()) }
func (c *fakeClock) After(d time.Duration) time.Time { return c.Now().Add(d) }

// harness drives one breaker key with an injected clock.
type harness struct {
	t   *testing.T
	rdb redis.UniversalClient
	clk *fakeClock
	b   *Breakers
	key string
	cfg Config
}

func (h *harness) allow() Admission {
	h.t.Helper()
	adm, err := h.b.Allow(context.Background(), h.key, h.cfg)
	require.NoError(h.t, err)
	return adm
}

func (h *harness) record(adm Admission, out Outcome) (State, error) {
	h.t.Helper()
	return h.b.Record(context.Background(), h.key, h.cfg, adm, out)
}

// failTasks records n admitted failures, the calls of tasks in turn, and
// returns the last state.
func (h *harness) failTasks(n int, tasks ...string) State {
	h.t.Helper()
	var st State
	for i := range n {
		var err error
		st, err = h.b.Record(context.Background(), h.key, h.cfg, h.allow(), OutcomeFailure, ForTask(tasks[i%len(tasks)]))
		require.NoError(h.t, err)
	}
	return st
}

func (h *harness) mustRecord(adm Admission, out Outcome, want State) {
	h.t.Helper()
	st, err := h.record(adm, out)
	require.NoError(h.t, err)
	require.Equal(h.t, want, st)
}

func (h *harness) get() Snapshot {
	h.t.Helper()
	s, err := h.b.Get(context.Background(), h.key)
	require.NoError(h.t, err)
	return s
}

// fail records n counted failures, each through its own admission.
func (h *harness) fail(n int) State {
	h.t.Helper()
	var st State
	for i := 0; i < n; i++ {
		adm := h.allow()
		require.True(h.t, adm.Allowed)
		var err error
		st, err = h.record(adm, OutcomeFailure)
		require.NoError(h.t, err)
	}
	return st
}

func requireStale(t *testing.T, err error, leaseGone bool) {
	t.Helper()
	require.ErrorIs(t, err, ErrStaleAdmission)
	var se *StaleError
	require.ErrorAs(t, err, &se)
	require.Equal(t, leaseGone, se.LeaseGone, "%v", err)
}

// TestBreakerStateMachine runs the state machine with an injected clock on
// miniredis and on a real redis-server.
func TestBreakerStateMachine(t *testing.T) {
	t.Parallel()
	cfg := Config{FailureThreshold: 3, Cooldown: 10 * time.Second, HalfOpenMaxCalls: 1, TrialLease: 5 * time.Second}
	cases := []struct {
		name string
		cfg  *Config
		run  func(t *testing.T, h *harness)
	}{
		{"fresh key is closed, healthy and not written", nil, func(t *testing.T, h *harness) {
			adm := h.allow()
			require.Equal(t, Admission{Allowed: true, State: StateClosed}, adm)
			n, err := h.rdb.Exists(context.Background(), rkeys.Breaker(h.key)).Result()
			require.NoError(t, err)
			require.Zero(t, n, "a closed admission must not write the breaker")
			s := h.get()
			require.Equal(t, StateClosed, s.State)
			require.Equal(t, HealthHealthy, s.Health)
		}},
		{"threshold opens", nil, func(t *testing.T, h *harness) {
			require.Equal(t, StateClosed, h.fail(2))
			s := h.get()
			require.Equal(t, 2, s.ConsecutiveFailures)
			require.Equal(t, HealthDegraded, s.Health)
			require.Equal(t, StateOpen, h.fail(1))
			s = h.get()
			require.Equal(t, StateOpen, s.State)
			require.Equal(t, HealthUnhealthy, s.Health)
			require.Equal(t, int64(1), s.Generation)
			require.Equal(t, int64(3), s.FailureCount)
			require.NotNil(t, s.OpenUntil)
			require.Equal(t, h.clk.After(10*time.Second), *s.OpenUntil)
			require.Equal(t, h.clk.Now(), *s.LastFailureAt)
			adm := h.allow()
			require.False(t, adm.Allowed)
			require.Equal(t, StateOpen, adm.State)
			require.Equal(t, h.clk.After(10*time.Second), adm.RetryAt)
		}},
		{"success resets consecutive failures", nil, func(t *testing.T, h *harness) {
			h.fail(2)
			adm := h.allow()
			require.Equal(t, 2, adm.ConsecutiveFailures)
			h.mustRecord(adm, OutcomeSuccess, StateClosed) // not the happy path: one EVALSHA
			s := h.get()
			require.Zero(t, s.ConsecutiveFailures)
			require.Equal(t, int64(1), s.SuccessCount)
			require.Equal(t, HealthHealthy, s.Health)
			require.Equal(t, StateClosed, h.fail(2), "the count restarted from zero")
		}},
		{"cooldown then half-open trial success closes", nil, func(t *testing.T, h *harness) {
			h.fail(3)
			h.clk.Add(10*time.Second - time.Millisecond)
			require.False(t, h.allow().Allowed, "1ms before open_until")
			h.clk.Add(time.Millisecond)
			trial := h.allow()
			require.True(t, trial.Allowed)
			require.Equal(t, StateHalfOpen, trial.State)
			require.Equal(t, int64(2), trial.Generation)
			require.NotEmpty(t, trial.Token)
			second := h.allow()
			require.False(t, second.Allowed, "only one trial per episode")
			require.Equal(t, h.clk.After(5*time.Second), second.RetryAt, "retry when the lease expires")
			s := h.get()
			require.Equal(t, StateHalfOpen, s.State)
			require.Equal(t, HealthDegraded, s.Health)
			require.Equal(t, 1, s.TrialsInFlight)
			h.mustRecord(trial, OutcomeSuccess, StateClosed)
			s = h.get()
			require.Equal(t, StateClosed, s.State)
			require.Equal(t, int64(3), s.Generation)
			require.Zero(t, s.ConsecutiveFailures)
			require.Zero(t, s.TrialsInFlight)
			require.Nil(t, s.OpenUntil)
			require.True(t, h.allow().Allowed)
		}},
		{"a resent trial admission keeps its one slot", nil, func(t *testing.T, h *harness) {
			// go-redis resends a script whose reply it lost (a read timeout
			// on a busy server): the same token must get back the trial it
			// holds, not a denial that leaves its slot leased to nobody.
			h.fail(3)
			h.clk.Add(10 * time.Second)
			admittedAt := h.clk.Now()
			args := allowArgs{key: h.key, halfOpenMax: h.cfg.HalfOpenMaxCalls, trialLease: h.cfg.TrialLease, token: "resent"}
			first, err := h.b.allow(context.Background(), args)
			require.NoError(t, err)
			require.True(t, first.allowed)
			require.Equal(t, StateHalfOpen, first.state)
			h.clk.Add(time.Second)
			again, err := h.b.allow(context.Background(), args)
			require.NoError(t, err)
			require.Equal(t, first, again, "the resend is the same admission")
			deny := h.allow()
			require.False(t, deny.Allowed, "still one trial per episode")
			require.Equal(t, admittedAt.Add(5*time.Second), deny.RetryAt, "the resend did not extend the lease")
			require.Equal(t, 1, h.get().TrialsInFlight)
			trial := Admission{Allowed: true, State: again.state, Generation: again.gen, Token: again.token}
			h.mustRecord(trial, OutcomeSuccess, StateClosed)
		}},
		{"half-open trial failure reopens with a doubled cooldown", nil, func(t *testing.T, h *harness) {
			h.fail(3)
			h.clk.Add(11 * time.Second)
			trial := h.allow()
			require.True(t, trial.Allowed)
			h.clk.Add(time.Second)
			h.mustRecord(trial, OutcomeFailure, StateOpen)
			s := h.get()
			require.Equal(t, int64(3), s.Generation)
			require.Equal(t, h.clk.After(20*time.Second), *s.OpenUntil)
			adm := h.allow()
			require.False(t, adm.Allowed)
			require.Equal(t, h.clk.After(20*time.Second), adm.RetryAt)
			// Again: 40s; a success then closes and resets it to 10s.
			h.clk.Add(20 * time.Second)
			trial = h.allow()
			require.True(t, trial.Allowed)
			h.mustRecord(trial, OutcomeFailure, StateOpen)
			require.Equal(t, h.clk.After(40*time.Second), *h.get().OpenUntil)
			h.clk.Add(40 * time.Second)
			trial = h.allow()
			require.True(t, trial.Allowed)
			h.mustRecord(trial, OutcomeSuccess, StateClosed)
			h.fail(3)
			require.Equal(t, h.clk.After(10*time.Second), *h.get().OpenUntil)
		}},
		{"the growing cooldown is capped by max_cooldown", &Config{FailureThreshold: 1, Cooldown: 10 * time.Second, MaxCooldown: 25 * time.Second, TrialLease: time.Second}, func(t *testing.T, h *harness) {
			h.fail(1)
			for _, want := range []time.Duration{20 * time.Second, 25 * time.Second, 25 * time.Second} {
				h.clk.Add(time.Minute)
				trial := h.allow()
				require.True(t, trial.Allowed)
				h.mustRecord(trial, OutcomeFailure, StateOpen)
				require.Equal(t, h.clk.After(want), *h.get().OpenUntil)
			}
			require.NoError(t, h.b.Reset(context.Background(), h.key))
			h.fail(1)
			require.Equal(t, h.clk.After(10*time.Second), *h.get().OpenUntil, "a reset forgets the grown cooldown")
		}},
		{"half_open_max_calls bounds trials per episode", &Config{FailureThreshold: 1, Cooldown: time.Second, HalfOpenMaxCalls: 2, TrialLease: time.Second}, func(t *testing.T, h *harness) {
			h.fail(1)
			h.clk.Add(time.Second)
			a, b := h.allow(), h.allow()
			require.True(t, a.Allowed)
			require.True(t, b.Allowed)
			require.NotEqual(t, a.Token, b.Token)
			require.Equal(t, a.Generation, b.Generation)
			require.False(t, h.allow().Allowed)
			h.mustRecord(a, OutcomeSuccess, StateClosed)
			requireStale(t, second(h.record(b, OutcomeFailure)), false)
			require.Equal(t, StateClosed, h.get().State, "the other trial's failure came too late")
		}},
		{"ignored outcomes change nothing", nil, func(t *testing.T, h *harness) {
			h.fail(2)
			adm := h.allow()
			h.mustRecord(adm, OutcomeIgnore, StateClosed)
			s := h.get()
			require.Equal(t, 2, s.ConsecutiveFailures)
			require.Equal(t, int64(2), s.FailureCount)
			require.Zero(t, s.SuccessCount)
			require.Equal(t, int64(0), s.Generation)
		}},
		{"ignored trial releases its lease and starts a new episode", nil, func(t *testing.T, h *harness) {
			h.fail(3)
			h.clk.Add(10 * time.Second)
			trial := h.allow()
			require.True(t, trial.Allowed)
			h.mustRecord(trial, OutcomeIgnore, StateHalfOpen)
			s := h.get()
			require.Equal(t, trial.Generation+1, s.Generation)
			require.Zero(t, s.TrialsInFlight)
			require.Equal(t, int64(3), s.FailureCount, "ignore counts nothing")
			next := h.allow()
			require.True(t, next.Allowed)
			require.Equal(t, trial.Generation+1, next.Generation)
		}},
		{"reset closes and fences outstanding trials", nil, func(t *testing.T, h *harness) {
			h.fail(3)
			h.clk.Add(10 * time.Second)
			trial := h.allow()
			require.True(t, trial.Allowed)
			require.NoError(t, h.b.Reset(context.Background(), h.key))
			s := h.get()
			require.Equal(t, StateClosed, s.State)
			require.Equal(t, trial.Generation+1, s.Generation)
			require.Zero(t, s.ConsecutiveFailures)
			require.Zero(t, s.TrialsInFlight)
			st, err := h.record(trial, OutcomeFailure)
			requireStale(t, err, false)
			require.Equal(t, StateClosed, st)
			s = h.get()
			require.Equal(t, StateClosed, s.State, "a stale trial failure must not reopen")
			require.Equal(t, int64(4), s.FailureCount, "stale outcomes are still counted in the statistics")
			require.Zero(t, s.ConsecutiveFailures)
		}},
		{"trip opens for the given duration and fences closed admissions", nil, func(t *testing.T, h *harness) {
			before := h.allow()
			require.NoError(t, h.b.Trip(context.Background(), h.key, time.Hour))
			adm := h.allow()
			require.False(t, adm.Allowed)
			require.Equal(t, h.clk.After(time.Hour), adm.RetryAt)
			require.Equal(t, int64(1), adm.Generation)
			st, err := h.record(before, OutcomeSuccess)
			require.NoError(t, err, "the happy path is batched, never fenced")
			require.Equal(t, StateClosed, st)
			before.ConsecutiveFailures = 1 // force the scripted path
			st, err = h.record(before, OutcomeSuccess)
			requireStale(t, err, false)
			require.Equal(t, StateOpen, st)
			require.Equal(t, StateOpen, h.get().State)
			require.Error(t, h.b.Trip(context.Background(), h.key, 0))
		}},
		{"stale generation cannot open", nil, func(t *testing.T, h *harness) {
			h.fail(2)
			old := []Admission{h.allow(), h.allow(), h.allow()}
			require.NoError(t, h.b.Reset(context.Background(), h.key))
			for _, a := range old {
				_, err := h.record(a, OutcomeFailure)
				requireStale(t, err, false)
			}
			s := h.get()
			require.Equal(t, StateClosed, s.State)
			require.Zero(t, s.ConsecutiveFailures)
		}},
		{"expired trial lease is fenced and the breaker admits a new trial", nil, func(t *testing.T, h *harness) {
			h.fail(3)
			h.clk.Add(10 * time.Second)
			trial := h.allow()
			require.True(t, trial.Allowed)
			h.clk.Add(5 * time.Second) // lease expiry is inclusive
			st, err := h.record(trial, OutcomeSuccess)
			requireStale(t, err, true)
			require.Equal(t, StateHalfOpen, st)
			require.Equal(t, trial.Generation, h.get().Generation, "a late trial changes nothing")
			next := h.allow()
			require.True(t, next.Allowed)
			require.Equal(t, StateHalfOpen, next.State)
			require.Equal(t, trial.Generation+1, next.Generation, "expiry starts a new episode")
			_, err = h.record(trial, OutcomeFailure)
			requireStale(t, err, false)
			h.mustRecord(next, OutcomeSuccess, StateClosed)
		}},
		{"happy-path success is batched until Flush", nil, func(t *testing.T, h *harness) {
			for i := 0; i < 5; i++ {
				h.mustRecord(h.allow(), OutcomeSuccess, StateClosed)
			}
			n, err := h.rdb.Exists(context.Background(), rkeys.Breaker(h.key)).Result()
			require.NoError(t, err)
			require.Zero(t, n, "happy path must not write")
			require.NoError(t, h.b.Flush(context.Background()))
			s := h.get()
			require.Equal(t, int64(5), s.SuccessCount)
			require.Equal(t, h.clk.Now(), *s.LastSuccessAt)
			require.NoError(t, h.b.Flush(context.Background()))
			require.Equal(t, int64(5), h.get().SuccessCount, "flush is not additive twice")
		}},
		{"bad admissions and outcomes", nil, func(t *testing.T, h *harness) {
			_, err := h.record(Admission{State: StateOpen}, OutcomeFailure)
			require.ErrorIs(t, err, ErrNotAdmitted)
			_, err = h.record(h.allow(), Outcome(0))
			require.ErrorIs(t, err, ErrInvalidOutcome)
		}},
		{"zero config is rate mode with the defaults", &Config{}, func(t *testing.T, h *harness) {
			tasks := []string{"t1", "t2", "t3"}
			require.Equal(t, StateClosed, h.failTasks(DefaultMinCalls-1, tasks...))
			require.Equal(t, StateOpen, h.failTasks(1, tasks...))
			adm := h.allow()
			require.Equal(t, h.clk.After(DefaultCooldown), adm.RetryAt)
			h.clk.Add(DefaultCooldown)
			trial := h.allow()
			require.True(t, trial.Allowed)
			deny := h.allow()
			require.False(t, deny.Allowed)
			require.Equal(t, h.clk.After(DefaultTrialLease), deny.RetryAt)
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
					h := &harness{t: t, rdb: rdb, clk: clk, b: New(rdb, WithClock(clk.Now)), key: fmt.Sprintf("sm-%d", i), cfg: cfg}
					if tc.cfg != nil {
						h.cfg = *tc.cfg
					}
					tc.run(t, h)
				})
			}
		})
	}
}

func second[A, B any](_ A, b B) B { return b }

// TestBreakerEventsIndexAndJSON checks the published transitions, the key
// index and the stable JSON shape.
func TestBreakerEventsIndexAndJSON(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	clk := newFakeClock()
	b := New(rdb, WithClock(clk.Now))
	sub := rdb.Subscribe(ctx, rkeys.BreakerChannel())
	defer sub.Close()
	_, err := sub.Receive(ctx)
	require.NoError(t, err)

	cfg := Config{FailureThreshold: 1, Cooldown: time.Second}
	adm, err := b.Allow(ctx, "zeta", cfg)
	require.NoError(t, err)
	_, err = b.Record(ctx, "zeta", cfg, adm, OutcomeFailure)
	require.NoError(t, err)
	require.NoError(t, b.Reset(ctx, "alpha"))

	type event struct {
		Key        string `json:"key"`
		State      State  `json:"state"`
		Generation int64  `json:"generation"`
	}
	var got []event
	for len(got) < 2 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := sub.ReceiveMessage(rctx)
		cancel()
		require.NoError(t, err)
		var e event
		require.NoError(t, json.Unmarshal([]byte(msg.Payload), &e))
		got = append(got, e)
	}
	require.Equal(t, []event{{"zeta", StateOpen, 1}, {"alpha", StateClosed, 1}}, got)

	// Index: keys touched by another process are listed too.
	other := New(redistest.Start(t).Client()) // unrelated server: not listed
	_, err = other.Allow(ctx, "elsewhere", cfg)
	require.NoError(t, err)
	_, err = New(rdb, WithClock(clk.Now)).Allow(ctx, "mid", cfg)
	require.NoError(t, err)
	list, err := b.List(ctx)
	require.NoError(t, err)
	var keys []string
	for _, s := range list {
		keys = append(keys, s.Key)
	}
	require.Equal(t, []string{"alpha", "mid", "zeta"}, keys)
	require.Equal(t, StateOpen, list[2].State)
	require.Equal(t, HealthUnhealthy, list[2].Health)

	raw, err := json.Marshal(list[2])
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	for _, k := range []string{"key", "state", "health", "consecutive_failures", "failure_count", "success_count", "open_until", "last_failure_at", "last_success_at", "generation", "trials_in_flight", "window_calls", "window_failures", "failing_tasks"} {
		require.Contains(t, m, k)
	}
	require.Equal(t, "unhealthy", m["health"])
	require.Nil(t, m["last_success_at"])

	h, err := b.Health(ctx, "zeta")
	require.NoError(t, err)
	require.Equal(t, list[2], h)
}

// TestBreakerRedisTime uses no injected clock: cooldown and leases run on
// the Redis server's TIME.
func TestBreakerRedisTime(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	b := New(rdb)
	cfg := Config{FailureThreshold: 1, Cooldown: 200 * time.Millisecond, TrialLease: 200 * time.Millisecond}
	adm, err := b.Allow(ctx, "k", cfg)
	require.NoError(t, err)
	_, err = b.Record(ctx, "k", cfg, adm, OutcomeFailure)
	require.NoError(t, err)
	srvNow, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	deny, err := b.Allow(ctx, "k", cfg)
	require.NoError(t, err)
	require.False(t, deny.Allowed)
	require.WithinDuration(t, srvNow.Add(200*time.Millisecond), deny.RetryAt, 500*time.Millisecond)

	trial := pollAllow(t, b, "k", cfg, 3*time.Second)
	require.Equal(t, StateHalfOpen, trial.State)
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.False(t, now.Before(deny.RetryAt), "admitted before open_until")
	// The trial's lease expires on server time too: a new episode follows.
	next := pollAllow(t, b, "k", cfg, 3*time.Second)
	require.Equal(t, trial.Generation+1, next.Generation)
	st, err := b.Record(ctx, "k", cfg, next, OutcomeSuccess)
	require.NoError(t, err)
	require.Equal(t, StateClosed, st)
}

// pollAllow calls Allow until it admits, failing after d.
func pollAllow(t *testing.T, b *Breakers, key string, cfg Config, d time.Duration) Admission {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		adm, err := b.Allow(context.Background(), key, cfg)
		require.NoError(t, err)
		if adm.Allowed {
			return adm
		}
		require.True(t, time.Now().Before(deadline), "not admitted within %s (last: %+v)", d, adm)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBreakerClockSkew: four Breakers whose local clocks are skewed by ±30s
// (WithLocalClock) see exactly the same transitions, because every elapsed
// time decision is made by the scripts on the Redis server's TIME; the Go
// process's clock is not passed to them. The control at the end shows what
// the test would catch: a Breakers whose *decision* clock is skewed +30s
// (WithClock, tests only) would end the cooldown 30s early.
func TestBreakerClockSkew(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	skews := []time.Duration{-30 * time.Second, -10 * time.Second, 10 * time.Second, 30 * time.Second}
	var bs []*Breakers
	for _, s := range skews {
		s := s
		c := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
		t.Cleanup(func() { _ = c.Close() })
		bs = append(bs, New(c, WithLocalClock(func() time.Time { return time.Now().Add(s) })))
	}
	cfg := Config{FailureThreshold: 3, Cooldown: 300 * time.Millisecond, TrialLease: 5 * time.Second}
	const key = "skewed"

	// Three failures from three different instances open it.
	for i := 0; i < 3; i++ {
		adm, err := bs[i].Allow(ctx, key, cfg)
		require.NoError(t, err)
		require.True(t, adm.Allowed)
		st, err := bs[i].Record(ctx, key, cfg, adm, OutcomeFailure)
		require.NoError(t, err)
		if i < 2 {
			require.Equal(t, StateClosed, st)
		} else {
			require.Equal(t, StateOpen, st)
		}
	}
	srvNow, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	// Every instance sees the same open_until, on server time.
	var retryAt time.Time
	for i, b := range bs {
		adm, err := b.Allow(ctx, key, cfg)
		require.NoError(t, err)
		require.False(t, adm.Allowed, "instance %d", i)
		if i == 0 {
			retryAt = adm.RetryAt
		}
		require.Equal(t, retryAt, adm.RetryAt, "instance %d", i)
	}
	require.WithinDuration(t, srvNow.Add(300*time.Millisecond), retryAt, 500*time.Millisecond)

	// Control: a skewed decision clock would already admit a trial.
	skewed := New(rdb, WithClock(func() time.Time { return time.Now().Add(30 * time.Second) }))
	// Round-robin until one instance admits the trial; none may admit before
	// the server reaches open_until, and the others are then denied.
	admitted := -1
	var trial Admission
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; admitted < 0; i = (i + 1) % len(bs) {
		require.True(t, time.Now().Before(deadline), "no trial admitted")
		before, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		adm, err := bs[i].Allow(ctx, key, cfg)
		require.NoError(t, err)
		if adm.Allowed {
			after, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			require.False(t, after.Before(retryAt), "instance %d admitted before open_until", i)
			admitted, trial = i, adm
			break
		}
		require.True(t, before.Before(retryAt), "instance %d denied after open_until", i)
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, StateHalfOpen, trial.State)
	for i, b := range bs {
		adm, err := b.Allow(ctx, key, cfg)
		require.NoError(t, err)
		require.False(t, adm.Allowed, "instance %d: second trial", i)
		require.Equal(t, trial.Generation, adm.Generation)
	}
	// Another instance records the trial (as a worker would after a hand-off).
	st, err := bs[(admitted+1)%len(bs)].Record(ctx, key, cfg, trial, OutcomeSuccess)
	require.NoError(t, err)
	require.Equal(t, StateClosed, st)
	for _, b := range bs {
		adm, err := b.Allow(ctx, key, cfg)
		require.NoError(t, err)
		require.True(t, adm.Allowed)
		require.Equal(t, trial.Generation+1, adm.Generation)
	}

	// The control: reopen, and the +30s decision clock ends the cooldown at once.
	require.NoError(t, bs[0].Trip(ctx, key, 300*time.Millisecond))
	adm, err := bs[3].Allow(ctx, key, cfg)
	require.NoError(t, err)
	require.False(t, adm.Allowed, "server time: still open")
	adm, err = skewed.Allow(ctx, key, cfg)
	require.NoError(t, err)
	require.True(t, adm.Allowed, "a skewed decision clock would admit 30s early: this is what TIME prevents")
}

// TestBreakerRedisDown: duty 8. With the server stopped, every call fails
// fast with ErrUnavailable; Allow still decides from the last state
// seen; batched successes survive until Redis is back.
func TestBreakerRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const bound = 300 * time.Millisecond
	b := New(rdb, WithCallTimeout(bound))
	cfg := Config{FailureThreshold: 1, Cooldown: time.Minute}
	timed := func(f func()) {
		t.Helper()
		start := time.Now()
		f()
		require.Less(t, time.Since(start), bound+500*time.Millisecond, "call not bounded")
	}

	ok, err := b.Allow(ctx, "ok", cfg)
	require.NoError(t, err)
	require.True(t, ok.Allowed)
	_, err = b.Record(ctx, "ok", cfg, ok, OutcomeSuccess) // batched
	require.NoError(t, err)
	require.NoError(t, b.Trip(ctx, "tripped", time.Hour))
	tripped, err := b.Allow(ctx, "tripped", cfg)
	require.NoError(t, err)
	require.False(t, tripped.Allowed)
	require.NoError(t, b.Trip(ctx, "cooled", time.Millisecond))
	trial := pollAllow(t, b, "cooled", cfg, 3*time.Second)
	require.Equal(t, StateHalfOpen, trial.State)

	srv.Stop()
	cases := []struct {
		key     string
		allowed bool
		retryAt time.Time
		state   State
	}{
		{"ok", true, time.Time{}, StateClosed},
		{"never-seen", true, time.Time{}, StateClosed},
		{"tripped", false, tripped.RetryAt, StateOpen},
		{"cooled", false, time.Time{}, StateHalfOpen},
	}
	for _, c := range cases {
		var adm Admission
		timed(func() { adm, err = b.Allow(ctx, c.key, cfg) })
		require.ErrorIs(t, err, ErrUnavailable, c.key)
		require.Equal(t, c.allowed, adm.Allowed, c.key)
		require.Equal(t, c.state, adm.State, c.key)
		require.Empty(t, adm.Token, "no trial without Redis")
		if !c.retryAt.IsZero() {
			require.Equal(t, c.retryAt, adm.RetryAt, c.key)
		}
		if !adm.Allowed {
			require.False(t, adm.RetryAt.IsZero(), c.key)
		}
	}
	timed(func() { _, err = b.Record(ctx, "cooled", cfg, trial, OutcomeSuccess) })
	require.ErrorIs(t, err, ErrUnavailable)
	timed(func() {
		_, err = b.Record(ctx, "ok", cfg, Admission{Allowed: true, State: StateClosed, ConsecutiveFailures: 1}, OutcomeFailure)
	})
	require.ErrorIs(t, err, ErrUnavailable)
	timed(func() { _, err = b.Get(ctx, "ok") })
	require.ErrorIs(t, err, ErrUnavailable)
	timed(func() { _, err = b.List(ctx) })
	require.ErrorIs(t, err, ErrUnavailable)
	timed(func() { err = b.Reset(ctx, "ok") })
	require.ErrorIs(t, err, ErrUnavailable)
	timed(func() { err = b.Trip(ctx, "ok", time.Second) })
	require.ErrorIs(t, err, ErrUnavailable)
	timed(func() { err = b.Flush(ctx) })
	require.ErrorIs(t, err, ErrUnavailable)

	srv.Restart()
	// Each flush is bounded by the call timeout; the first ones after the
	// restart may spend it redialing (a busy machine): the batched success
	// must land once Redis answers again.
	deadline := time.Now().Add(10 * time.Second)
	for err = b.Flush(ctx); err != nil && time.Now().Before(deadline); err = b.Flush(ctx) {
		require.ErrorIs(t, err, ErrUnavailable)
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err, "a flush after the restart")
	s, err := b.Get(ctx, "ok")
	require.NoError(t, err)
	require.Equal(t, int64(1), s.SuccessCount, "the batched success survived the outage")
}

// TestBreakerCallTimeout: a server that does not answer (paused) costs at
// most the call timeout, and the fallback decision is returned.
func TestBreakerCallTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// go-redis honours context deadlines on socket reads only with
	// ContextTimeoutEnabled; without it the client's ReadTimeout bounds calls.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	b := New(rdb, WithCallTimeout(200*time.Millisecond))
	_, err := b.Allow(ctx, "k", Config{})
	require.NoError(t, err)
	admin := srv.Client()
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "1500", "WRITE").Err())
	start := time.Now()
	adm, err := b.Allow(ctx, "k", Config{})
	require.ErrorIs(t, err, ErrUnavailable)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.True(t, adm.Allowed)
	require.Less(t, time.Since(start), time.Second)
}

// TestBreakerStartStop: the flush loop writes batched successes, ends on
// Stop or on ctx.Done, flushes on the way out and leaks no goroutine.
func TestBreakerStartStop(t *testing.T) {
	// Not parallel: goleak compares goroutines before and after.
	srv := redistest.Start(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	cfg := Config{}
	get := func(b *Breakers, key string) int64 {
		s, err := b.Get(ctx, key)
		require.NoError(t, err)
		return s.SuccessCount
	}

	// Periodic flush, then Stop (twice).
	b := New(rdb, WithFlushInterval(20*time.Millisecond))
	b.Start(ctx)
	b.Start(ctx) // no-op
	adm, err := b.Allow(ctx, "a", cfg)
	require.NoError(t, err)
	_, err = b.Record(ctx, "a", cfg, adm, OutcomeSuccess)
	require.NoError(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for get(b, "a") != 1 {
		require.True(t, time.Now().Before(deadline), "loop never flushed")
		time.Sleep(10 * time.Millisecond)
	}
	_, err = b.Record(ctx, "a", cfg, adm, OutcomeSuccess)
	require.NoError(t, err)
	b.Stop()
	b.Stop()
	require.Equal(t, int64(2), get(b, "a"), "Stop flushes")

	// ctx.Done ends the loop, with a final flush.
	b2 := New(rdb, WithFlushInterval(time.Hour))
	cctx, cancel := context.WithCancel(ctx)
	b2.Start(cctx)
	_, err = b2.Record(ctx, "a", cfg, adm, OutcomeSuccess)
	require.NoError(t, err)
	cancel()
	b2.Stop()
	require.Equal(t, int64(3), get(b2, "a"))

	// Stop without Start flushes once; Start after Stop does nothing.
	b3 := New(rdb)
	_, err = b3.Record(ctx, "a", cfg, adm, OutcomeSuccess)
	require.NoError(t, err)
	b3.Stop()
	b3.Start(ctx)
	require.Equal(t, int64(4), get(b3, "a"))
}

// roundTrips counts the client's round trips (a pipeline is one).
type roundTrips struct {
	mu    sync.Mutex
	names []string
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var names []string
		for _, c := range cmds {
			names = append(names, c.Name())
		}
		h.add("pipeline(" + strings.Join(names, ",") + ")")
		return next(ctx, cmds)
	}
}

func (h *roundTrips) add(s string) {
	if s == "hello" || strings.HasPrefix(s, "pipeline(client") {
		return // handshake of a new pooled connection
	}
	h.mu.Lock()
	h.names = append(h.names, s)
	h.mu.Unlock()
}

// take returns and clears the round trips seen so far.
func (h *roundTrips) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.names
	h.names = nil
	return n
}

// TestBreakerRoundTrips: invariant 7. A CLOSED admission is one EVALSHA (the
// first one per key and process also carries the index SADD in the same
// pipeline); a happy-path Record costs nothing; other Records are one EVALSHA.
func TestBreakerRoundTrips(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	hook := &roundTrips{}
	rdb.AddHook(hook)
	ctx := context.Background()
	require.NoError(t, allowScript.Load(ctx, rdb).Err()) // scripts cached, as on a warm server
	require.NoError(t, recordScript.Load(ctx, rdb).Err())
	require.NoError(t, flushScript.Load(ctx, rdb).Err())
	hook.take()
	b := New(rdb)
	cfg := Config{FailureThreshold: 5}

	adm, err := b.Allow(ctx, "rt", cfg)
	require.NoError(t, err)
	require.Equal(t, []string{"pipeline(evalsha,sadd)"}, hook.take(), "first sight: index rides along")
	for i := 0; i < 3; i++ {
		adm, err = b.Allow(ctx, "rt", cfg)
		require.NoError(t, err)
		require.Equal(t, []string{"evalsha"}, hook.take())
		_, err = b.Record(ctx, "rt", cfg, adm, OutcomeSuccess)
		require.NoError(t, err)
		require.Empty(t, hook.take(), "happy-path Record must not touch Redis")
	}
	_, err = b.Record(ctx, "rt", cfg, adm, OutcomeFailure)
	require.NoError(t, err)
	require.Equal(t, []string{"evalsha"}, hook.take())
	adm, err = b.Allow(ctx, "rt", cfg)
	require.NoError(t, err)
	hook.take()
	require.Equal(t, 1, adm.ConsecutiveFailures)
	_, err = b.Record(ctx, "rt", cfg, adm, OutcomeSuccess)
	require.NoError(t, err)
	require.Equal(t, []string{"evalsha"}, hook.take(), "a success after failures resets the count: one call")
	require.NoError(t, b.Flush(ctx))
	require.Equal(t, []string{"pipeline(evalsha,sadd)"}, hook.take(), "batched successes: one pipeline")
}
