// Package defaults fills an option's default in one line: the options of
// the services and stores take zero (or a negative value) as "unset".
package defaults

import (
	"log/slog"
	"time"
)

// Number is an option's numeric type: a count, a size, a duration, a rate.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64
}

// Positive returns v when it is above zero and def otherwise.
func Positive[T Number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Clock returns now, or time.Now when it is nil (an option's injected
// clock).
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// Logger returns l, or slog.Default() when it is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
