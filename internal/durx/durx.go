// Package durx does the duration arithmetic of lifetimes and delays
// without overflow: a sum or a conversion past the largest time.Duration
// (about 292 years) saturates at it instead of wrapping to a negative
// value, which Redis would take as "expire now".
package durx

import (
	"math"
	"time"
)

// Max is the largest duration.
const Max = time.Duration(math.MaxInt64)

// Add returns the sum of ds, saturated at Max (and, for negative terms,
// at the smallest duration).
func Add(ds ...time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		switch {
		case d > 0 && sum > Max-d:
			sum = Max
		case d < 0 && sum < math.MinInt64-d:
			sum = math.MinInt64
		default:
			sum += d
		}
	}
	return sum
}

// Millis is ms milliseconds, saturated at Max; a negative ms is zero.
func Millis(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > int64(Max/time.Millisecond):
		return Max
	}
	return time.Duration(ms) * time.Millisecond
}

// CeilSeconds is d in whole seconds, rounded up (a TTL that outlives d),
// without overflow; a negative d is zero.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
