package redisx

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLingerFollowsTheArrivals: a leader waits for more calls only while
// calls arrive less than Linger apart on average, for about LingerCalls of
// them, never longer than Linger, and not at all once enough are queued;
// a pause makes the next caller go at once. Synthetic arrival times: no
// clock is read.
func TestLingerFollowsTheArrivals(t *testing.T) {
	t.Parallel()
	b := NewBatcher(nil, BatchOptions{Linger: time.Millisecond, LingerCalls: 4})
	t0 := time.Unix(1000, 0)
	b.arrived(t0)
	require.Zero(t, b.lingerFor(1), "a first caller never waits")

	// Calls 100µs apart: the average gap falls below Linger.
	at := t0
	for range 40 {
		at = at.Add(100 * time.Microsecond)
		b.arrived(at)
	}
	d := b.lingerFor(1)
	require.Greater(t, d, time.Duration(0), "fast arrivals: the leader waits for company")
	require.LessOrEqual(t, d, time.Millisecond)
	require.InDelta(t, float64(3*100*time.Microsecond), float64(d), float64(50*time.Microsecond), "about 3 more calls at the average gap")
	require.Less(t, b.lingerFor(3), d, "fewer to wait for with more queued")
	require.Zero(t, b.lingerFor(4), "enough queued: no wait")

	// Calls 5ms apart: the gap climbs past Linger and nobody waits.
	for range 40 {
		at = at.Add(5 * time.Millisecond)
		b.arrived(at)
	}
	require.Zero(t, b.lingerFor(1), "occasional callers never wait")

	// A wait that gathered nobody: the next lead goes at once, then one
	// waits again; nobody again: the next two go at once; company resets.
	for range 40 {
		at = at.Add(100 * time.Microsecond)
		b.arrived(at)
	}
	require.NotZero(t, b.lingerFor(1))
	b.learn(false)
	require.Zero(t, b.lingerFor(1))
	require.NotZero(t, b.lingerFor(1))
	b.learn(false)
	require.Zero(t, b.lingerFor(1))
	require.Zero(t, b.lingerFor(1))
	require.NotZero(t, b.lingerFor(1))
	b.learn(true)
	b.learn(false)
	require.Zero(t, b.lingerFor(1))
	require.NotZero(t, b.lingerFor(1), "company reset the backoff")
	for range 20 {
		b.learn(false)
	}
	require.Equal(t, maxLingerSkip, b.skip, "bounded")

	// Never longer than Linger, however many are wanted.
	c := NewBatcher(nil, BatchOptions{Linger: time.Millisecond, LingerCalls: 100})
	at = t0
	for range 40 {
		at = at.Add(500 * time.Microsecond)
		c.arrived(at)
	}
	require.Equal(t, time.Millisecond, c.lingerFor(1))

	// Negative Linger: never.
	off := NewBatcher(nil, BatchOptions{Linger: -1})
	at = t0
	for range 40 {
		at = at.Add(time.Microsecond)
		off.arrived(at)
	}
	require.Zero(t, off.lingerFor(1))
}
