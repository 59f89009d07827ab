package console

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/charts"
)

// addSynthetic fills the window before now with made-up minutes in Redis
// (a wave of pending work and attempts), for the screenshots' chart.
func (s *Sampler) addSynthetic(t *testing.T, now time.Time, window time.Duration) {
	t.Helper()
	ctx := context.Background()
	n := int(window / time.Minute)
	for i := n - 1; i >= 0; i-- {
		at := now.Add(-time.Duration(i) * time.Minute)
		x := float64(n-i) / float64(n)
		w := math.Sin(x*math.Pi*3) + 1
		q := charts.Queues{Pending: int(40*w) + 5, Active: int(8*w) + 2, Scheduled: 12, Retry: int(6 * (1 - math.Cos(x*math.Pi*5)))}
		require.NoError(t, charts.RecordQueues(ctx, s.rdb, at, q, 0))
		c := charts.NewCounter(s.rdb, charts.CounterOptions{Now: func() time.Time { return at }})
		for range int(30*w) + 10 {
			c.Succeeded()
		}
		for range int(3 * (1 - math.Cos(x*math.Pi*5))) {
			c.Failed()
		}
		require.NoError(t, c.Flush(ctx))
	}
}
