package durx_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/durx"
)

// TestAddSaturates (#23 item 6): a retention plus a delay near the largest
// duration is the largest duration, never a negative lifetime.
func TestAddSaturates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"plain", []time.Duration{time.Hour, time.Minute}, time.Hour + time.Minute},
		{"retention plus a huge delay", []time.Duration{7 * 24 * time.Hour, 2561900 * time.Hour}, durx.Max},
		{"max plus one", []time.Duration{durx.Max, 1}, durx.Max},
		{"max plus max", []time.Duration{durx.Max, durx.Max, durx.Max}, durx.Max},
		{"negative", []time.Duration{math.MinInt64, -1}, math.MinInt64},
		{"back from max", []time.Duration{durx.Max, time.Hour, -time.Hour}, durx.Max - time.Hour},
	} {
		require.Equal(t, tc.want, durx.Add(tc.in...), tc.name)
	}
}

func TestMillisAndCeilSeconds(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1500*time.Millisecond, durx.Millis(1500))
	require.Equal(t, time.Duration(0), durx.Millis(-5))
	require.Equal(t, durx.Max, durx.Millis(math.MaxInt64))
	require.Equal(t, durx.Max, durx.Millis(int64(durx.Max/time.Millisecond)+1))
	require.Equal(t, int64(2), durx.CeilSeconds(1500*time.Millisecond))
	require.Equal(t, int64(1), durx.CeilSeconds(time.Second))
	require.Equal(t, int64(0), durx.CeilSeconds(-time.Second))
	require.Equal(t, int64(durx.Max/time.Second)+1, durx.CeilSeconds(durx.Max))
}
