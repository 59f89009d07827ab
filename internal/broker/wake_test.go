package broker_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// long is a bound no test waits out: a Wait that returns while the test
// is still running was ended by a token or by Stop, not by its bound.
const long = time.Hour

type bundle struct {
	rdb *redis.Client
	ctx context.Context
}

func setup(t *testing.T) bundle {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	return bundle{rdb: rdb, ctx: context.Background()}
}

// waitAsync runs w.Wait in a goroutine and returns a channel closed when it returns.
func waitAsync(ctx context.Context, w *broker.Waiter) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); w.Wait(ctx) }()
	return done
}

// blockedClients is how many clients the server has blocked (BLPOP).
func blockedClients(b bundle) int {
	info, err := b.rdb.Info(b.ctx, "clients").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "blocked_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// blocked returns once n clients are blocked in BLPOP.
func blocked(t *testing.T, b bundle, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return blockedClients(b) == n }, 10*time.Second, 5*time.Millisecond,
		"want %d clients blocked in BLPOP", n)
}

func TestWaiterWakesOnToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := broker.NewWaiter(b.rdb, []string{"a", "b"}, long, "w1")
	defer w.Stop(b.ctx)
	done := waitAsync(b.ctx, w)
	blocked(t, b, 1)
	require.NoError(t, broker.PushWake(b.ctx, b.rdb, "b", 1))
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a token on queue b's wake list did not end the wait")
	}
	n, err := b.rdb.LLen(b.ctx, rkeys.Wake("b")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the waiter took the token")
}

// A token pushed before the wait starts (between a worker's empty look at
// its queues and its BLPOP) is not lost: the wait returns at once.
func TestWaiterTakesTokenPushedBeforeWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := broker.NewWaiter(b.rdb, []string{"default"}, long, "w1")
	defer w.Stop(b.ctx)
	require.NoError(t, broker.PushWake(b.ctx, b.rdb, "default", 1))
	select {
	case <-waitAsync(b.ctx, w):
	case <-time.After(30 * time.Second):
		t.Fatal("a token pushed before the wait was lost")
	}
}

func TestWaiterStopEndsWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := broker.NewWaiter(b.rdb, []string{"default"}, long, "w1")
	done := waitAsync(b.ctx, w)
	blocked(t, b, 1)
	w.Stop(b.ctx)
	w.Stop(b.ctx) // idempotent
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not end the wait")
	}
	select {
	case <-waitAsync(b.ctx, w):
	case <-time.After(30 * time.Second):
		t.Fatal("a Wait after Stop blocked")
	}
	n, err := b.rdb.LLen(b.ctx, rkeys.Wake("default")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "Stop pushes no token onto the shared wake list")
}

// The bound: with no token, a wait ends after the bound (a lost token
// delays a task by at most that much). Not a timing assertion: the bound
// is short and the test only requires that the wait ends.
func TestWaiterEndsAtBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := broker.NewWaiter(b.rdb, []string{"default"}, 50*time.Millisecond, "w1")
	defer w.Stop(b.ctx)
	for range 3 {
		select {
		case <-waitAsync(b.ctx, w):
		case <-time.After(30 * time.Second):
			t.Fatal("a wait with no token outlived its bound")
		}
	}
}

// One token wakes one waiter: of two blocked waiters, one returns.
func TestOneTokenWakesOneWaiter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w1 := broker.NewWaiter(b.rdb, []string{"default"}, long, "w1")
	w2 := broker.NewWaiter(b.rdb, []string{"default"}, long, "w2")
	d1, d2 := waitAsync(b.ctx, w1), waitAsync(b.ctx, w2)
	blocked(t, b, 2)
	require.NoError(t, broker.PushWake(b.ctx, b.rdb, "default", 1))
	var first <-chan struct{}
	select {
	case <-d1:
		first = d2
	case <-d2:
		first = d1
	case <-time.After(30 * time.Second):
		t.Fatal("no waiter woke")
	}
	require.Equal(t, 1, blockedClients(b), "the other waiter still waits")
	w1.Stop(b.ctx)
	w2.Stop(b.ctx)
	<-first
}

func TestDueMessage(t *testing.T) {
	t.Parallel()
	at := time.Unix(1795461110, 0)
	q, sec, ok := broker.ParseDue(broker.DueMessage("q with space", at))
	require.True(t, ok)
	require.Equal(t, "q with space", q)
	require.Equal(t, at.Unix(), sec)
	for _, bad := range []string{"", "123", "x default", "123 "} {
		_, _, ok := broker.ParseDue(bad)
		require.False(t, ok, bad)
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestDues(t *testing.T) {
	t.Parallel()
	const key = "asynq:{default}:retry"
	start := time.Unix(1000, 0)
	newDues := func() (*broker.Dues, *fakeClock) {
		clk := &fakeClock{now: start}
		return broker.NewDues(time.Second, clk.Now), clk
	}
	t.Run("unknown set is checked", func(t *testing.T) {
		d, _ := newDues()
		require.True(t, d.Begin(key, 1000))
	})
	t.Run("empty set is not checked until the poll interval", func(t *testing.T) {
		d, clk := newDues()
		require.True(t, d.Begin(key, 1000))
		d.Done(key, -1, true)
		require.False(t, d.Begin(key, 1000))
		clk.Add(999 * time.Millisecond)
		require.False(t, d.Begin(key, 1000))
		clk.Add(time.Millisecond)
		require.True(t, d.Begin(key, 1001), "the periodic check finds what nobody announced")
	})
	t.Run("checked when the next task is due", func(t *testing.T) {
		d, _ := newDues()
		require.True(t, d.Begin(key, 1000))
		d.Done(key, 1001, true)
		require.False(t, d.Begin(key, 1000))
		require.True(t, d.Begin(key, 1001))
	})
	t.Run("lowered by a retry or an announcement", func(t *testing.T) {
		d, _ := newDues()
		require.True(t, d.Begin(key, 1000))
		d.Done(key, -1, true)
		d.Lower(key, 1000)
		require.True(t, d.Begin(key, 1000))
	})
	t.Run("a task added during a check is not forgotten", func(t *testing.T) {
		d, _ := newDues()
		require.True(t, d.Begin(key, 1000))
		d.Lower(key, 1000) // the check's reply may not include it
		d.Done(key, -1, true)
		require.True(t, d.Begin(key, 1000))
	})
	t.Run("a failed check is repeated", func(t *testing.T) {
		d, _ := newDues()
		require.True(t, d.Begin(key, 1000))
		d.Done(key, 0, false)
		require.True(t, d.Begin(key, 1000))
	})
	t.Run("sets are independent", func(t *testing.T) {
		d, _ := newDues()
		require.True(t, d.Begin(key, 1000))
		d.Done(key, math.MaxInt64, true)
		require.True(t, d.Begin("asynq:{default}:scheduled", 1000))
	})
}
