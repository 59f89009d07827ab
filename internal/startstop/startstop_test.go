package startstop_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentq/agentq/internal/startstop"
)

// TestLoop: Start runs once, Stop cancels and waits, both idempotent; a
// service stopped before it started never starts; StopAll stops in
// reverse order; no goroutine outlives Stop.
func TestLoop(t *testing.T) {
	defer goleak.VerifyNone(t)
	var runs, ended atomic.Int32
	run := func(ctx context.Context) { runs.Add(1); <-ctx.Done(); ended.Add(1) }
	s := startstop.Func(run)
	s.Start(context.Background())
	s.Start(context.Background())
	s.Stop()
	s.Stop()
	require.EqualValues(t, 1, runs.Load())
	require.EqualValues(t, 1, ended.Load(), "Stop waited for the loop")
	s.Start(context.Background())
	require.EqualValues(t, 1, runs.Load(), "a stopped service does not start again")

	never := startstop.Func(run)
	never.Stop()
	never.Start(context.Background())
	require.EqualValues(t, 1, runs.Load(), "stopped before it started: never starts")

	var order []int
	mk := func(i int) startstop.Service {
		return startstop.Func(func(ctx context.Context) { <-ctx.Done() })
	}
	a, b := mk(1), mk(2)
	svcs := []startstop.Service{a, recordStop{b, &order, 2}, recordStop{a, &order, 1}}
	startstop.StartAll(context.Background(), svcs...)
	startstop.StopAll(svcs...)
	require.Equal(t, []int{1, 2}, order)

	ctx, cancel := context.WithCancel(context.Background())
	c := startstop.Func(run)
	c.Start(ctx)
	cancel() // the loop ends with its context, too
	c.Stop()
	require.EqualValues(t, 2, ended.Load())
}

type recordStop struct {
	startstop.Service
	order *[]int
	n     int
}

func (r recordStop) Stop() { *r.order = append(*r.order, r.n); r.Service.Stop() }

// TestGoFlush: the loop flushes on its ticks, and once more at Stop with a
// context that is still live though the loop's has ended; every error of
// a flush goes to failed; no goroutine outlives Stop.
func TestGoFlush(t *testing.T) {
	defer goleak.VerifyNone(t)
	var l startstop.Loop
	flushes := make(chan error, 100)
	var failed atomic.Int32
	errBoom := errors.New("boom")
	flush := func(ctx context.Context) error {
		flushes <- ctx.Err()
		return errBoom
	}
	require.True(t, l.GoFlush(context.Background(), time.Millisecond, time.Second, flush, func(err error) {
		require.ErrorIs(t, err, errBoom)
		failed.Add(1)
	}))
	require.NoError(t, <-flushes, "a tick's flush")
	l.Stop()
	n := len(flushes)
	require.Positive(t, n, "Stop flushed once more")
	for range n {
		require.NoError(t, <-flushes, "every flush, the last one at Stop too, has a live context")
	}
	require.EqualValues(t, n+1, failed.Load(), "each flush's error went to failed")
}

// TestGoFlushInFlightAtStop: a tick's flush still running when the loop's
// context ends keeps a live context to its end (ending it mid-flight could
// lose its batch, or count it twice when Redis applied it and the reply was
// lost), and the loop then flushes once more.
func TestGoFlushInFlightAtStop(t *testing.T) {
	defer goleak.VerifyNone(t)
	var l startstop.Loop
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inFlight, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	flushes := make(chan error, 100)
	flush := func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			close(inFlight)
			<-release
		}
		flushes <- ctx.Err()
		return nil
	}
	require.True(t, l.GoFlush(ctx, time.Millisecond, time.Minute, flush, func(err error) {
		t.Errorf("a flush failed: %v", err)
	}))
	<-inFlight
	cancel() // the loop's context has ended (as Stop does) when cancel returns
	close(release)
	l.Stop()
	require.NoError(t, <-flushes, "the flush in flight when the loop ended")
	require.NoError(t, <-flushes, "the last flush")
	require.Empty(t, flushes, "a flush after the last one")
}
