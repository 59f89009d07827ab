package resilience

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff computes the wait before a retry: exponential growth from Initial,
// capped at Max, then spread by ±Jitter so that many workers retrying the
// same backend do not arrive together.
//
// The zero value waits 0 before every retry.
type Backoff struct {
	// Initial is the wait before the first retry; ≤ 0 means 0.
	Initial time.Duration
	// Max caps the exponential part (jitter may add up to Jitter·Max on top);
	// ≤ 0 means no cap other than the largest time.Duration.
	Max time.Duration
	// Jitter is the fraction (0..1) by which a delay d is spread uniformly over
	// [d·(1−Jitter), d·(1+Jitter)). Values outside 0..1 are clamped; 0 means
	// none.
	Jitter float64
	// Rand returns a float in [0,1); nil means math/rand/v2.Float64. Tests
	// inject a seeded source for reproducible delays.
	Rand func() float64
}

// Delay returns the wait before the n-th retry (n ≥ 1; n < 1 counts as 1):
// min(Max, Initial·2^(n−1)), then ±Jitter. It never overflows for huge n and
// never returns a negative duration.
func (b Backoff) Delay(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := b.Initial
	if d <= 0 {
		return 0
	}
	limit := time.Duration(math.MaxInt64)
	if b.Max > 0 {
		limit = b.Max
	}
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	if d > limit {
		d = limit
	}

	j := b.Jitter
	if math.IsNaN(j) || j <= 0 {
		return d
	}
	if j > 1 {
		j = 1
	}
	rnd := b.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	r := rnd()
	if math.IsNaN(r) || r < 0 {
		r = 0
	} else if r >= 1 {
		r = math.Nextafter(1, 0)
	}
	f := float64(d) * (1 + j*(2*r-1))
	switch {
	case f <= 0:
		return 0
	case f >= math.MaxInt64:
		return time.Duration(math.MaxInt64)
	default:
		return time.Duration(f)
	}
}
