package defaults_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/defaults"
)

// TestPositive: zero and negative values take the default, positive ones
// stay, for counts, durations and rates alike.
func TestPositive(t *testing.T) {
	t.Parallel()
	require.Equal(t, 5, defaults.Positive(0, 5))
	require.Equal(t, 5, defaults.Positive(-1, 5))
	require.Equal(t, 3, defaults.Positive(3, 5))
	require.Equal(t, time.Second, defaults.Positive(time.Duration(0), time.Second))
	require.Equal(t, time.Minute, defaults.Positive(time.Minute, time.Second))
	require.InDelta(t, 0.5, defaults.Positive(-0.1, 0.5), 0)
	require.InDelta(t, 0.2, defaults.Positive(0.2, 0.5), 0)
}

// TestClockAndLogger: a nil clock is time.Now and a nil logger
// slog.Default(); a given one is kept.
func TestClockAndLogger(t *testing.T) {
	t.Parallel()
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, fixed, defaults.Clock(func() time.Time { return fixed })())
	require.WithinDuration(t, time.Now(), defaults.Clock(nil)(), time.Minute)
	l := slog.New(slog.NewTextHandler(io.Discard, nil))
	require.Same(t, l, defaults.Logger(l))
	require.Same(t, slog.Default(), defaults.Logger(nil))
}
