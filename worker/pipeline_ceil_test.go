package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCeilToSecond: a deferral's delay is stretched to the next whole
// second (asynq truncates due times to seconds), never shortened.
func TestCeilToSecond(t *testing.T) {
	t.Parallel()
	base := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now   time.Time
		delay time.Duration
		want  time.Duration
	}{
		{base, time.Second, time.Second},
		{base, 300 * time.Millisecond, time.Second},
		{base.Add(700 * time.Millisecond), 300 * time.Millisecond, 300 * time.Millisecond},
		{base.Add(700 * time.Millisecond), 997 * time.Millisecond, 1300 * time.Millisecond},
		{base.Add(999 * time.Millisecond), 2 * time.Millisecond, 1001 * time.Millisecond},
		{base.Add(250 * time.Millisecond), 30 * time.Second, 30*time.Second + 750*time.Millisecond},
	} {
		got := ceilToSecond(tc.now, tc.delay)
		require.Equal(t, tc.want, got, "now %s delay %s", tc.now.Format("05.000"), tc.delay)
		require.GreaterOrEqual(t, got, tc.delay)
		require.Zero(t, tc.now.Add(got).Nanosecond())
	}
}
