package console

import (
	"math"
	"time"
)

// addSynthetic fills the window before now with made-up samples (a wave of
// pending work and runs), for the screenshots' chart.
func (s *Sampler) addSynthetic(now time.Time, window time.Duration) {
	n := int(window / s.opts.Every)
	for i := n; i > 0; i-- {
		at := now.Add(-time.Duration(i) * s.opts.Every)
		x := float64(n-i) / float64(n)
		w := math.Sin(x*math.Pi*3) + 1
		smp := Sample{At: at.UTC(), Pending: int(40*w) + 5, Active: int(8*w) + 2, Scheduled: 12, Retry: int(6 * (1 - math.Cos(x*math.Pi*5)))}
		s.mu.Lock()
		if k := len(s.samples); k > 0 {
			smp.processed = s.samples[k-1].processed + int(30*w) + 10
			smp.failedToday = s.samples[k-1].failedToday + int(3*(1-math.Cos(x*math.Pi*5)))
		}
		s.mu.Unlock()
		s.add(smp)
	}
}
