package resilience

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func constRand(v float64) func() float64 { return func() float64 { return v } }

func TestBackoffDelayTable(t *testing.T) {
	t.Parallel()
	def := Backoff{Initial: 500 * time.Millisecond, Max: 5 * time.Second}
	tests := []struct {
		name string
		b    Backoff
		n    int
		want time.Duration
	}{
		{"first_retry", def, 1, 500 * time.Millisecond},
		{"second_retry", def, 2, time.Second},
		{"third_retry", def, 3, 2 * time.Second},
		{"fourth_retry", def, 4, 4 * time.Second},
		{"capped", def, 5, 5 * time.Second},
		{"capped_far", def, 50, 5 * time.Second},
		{"n_zero_is_one", def, 0, 500 * time.Millisecond},
		{"n_negative_is_one", def, -7, 500 * time.Millisecond},
		{"huge_n_capped", def, math.MaxInt, 5 * time.Second},
		{"huge_n_no_max_saturates", Backoff{Initial: time.Second}, math.MaxInt, time.Duration(math.MaxInt64)},
		{"n_63_no_max_saturates", Backoff{Initial: 1}, 64, time.Duration(math.MaxInt64)},
		{"no_max_doubles", Backoff{Initial: time.Second}, 11, 1024 * time.Second},
		{"initial_above_max", Backoff{Initial: time.Minute, Max: time.Second}, 1, time.Second},
		{"zero_value", Backoff{}, 3, 0},
		{"negative_initial", Backoff{Initial: -time.Second, Max: time.Second}, 2, 0},
		{"jitter_low_end", Backoff{Initial: time.Second, Jitter: 0.2, Rand: constRand(0)}, 1, 800 * time.Millisecond},
		{"jitter_middle", Backoff{Initial: time.Second, Jitter: 0.2, Rand: constRand(0.5)}, 1, time.Second},
		{"jitter_full_low_end", Backoff{Initial: time.Second, Jitter: 1, Rand: constRand(0)}, 1, 0},
		{"jitter_clamped_above_one", Backoff{Initial: time.Second, Jitter: 7, Rand: constRand(0)}, 1, 0},
		{"jitter_negative_ignored", Backoff{Initial: time.Second, Jitter: -0.5, Rand: constRand(0)}, 1, time.Second},
		{"jitter_nan_ignored", Backoff{Initial: time.Second, Jitter: math.NaN(), Rand: constRand(0)}, 1, time.Second},
		{"rand_nan_treated_as_zero", Backoff{Initial: time.Second, Jitter: 0.5, Rand: constRand(math.NaN())}, 1, 500 * time.Millisecond},
		{"rand_negative_treated_as_zero", Backoff{Initial: time.Second, Jitter: 0.5, Rand: constRand(-3)}, 1, 500 * time.Millisecond},
		{"jitter_on_saturated_stays_valid", Backoff{Initial: time.Second, Jitter: 0.5, Rand: constRand(0.999999)}, math.MaxInt, time.Duration(math.MaxInt64)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.b.Delay(tc.n))
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	src := rand.New(rand.NewPCG(7, 11))
	b := Backoff{Initial: 500 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2, Rand: src.Float64}
	var sawLow, sawHigh bool
	for n := 1; n <= 8; n++ {
		base := min(500*time.Millisecond<<(n-1), 5*time.Second)
		lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
		for i := 0; i < 2000; i++ {
			d := b.Delay(n)
			require.GreaterOrEqual(t, d, lo, "n=%d", n)
			require.Less(t, d, hi, "n=%d", n)
			sawLow = sawLow || d < base-base/10
			sawHigh = sawHigh || d > base+base/10
		}
	}
	require.True(t, sawLow && sawHigh, "jitter should spread both ways")
}

func TestBackoffSeededDeterminism(t *testing.T) {
	t.Parallel()
	run := func() []time.Duration {
		src := rand.New(rand.NewPCG(42, 42))
		b := Backoff{Initial: 100 * time.Millisecond, Max: 3 * time.Second, Jitter: 0.3, Rand: src.Float64}
		out := make([]time.Duration, 20)
		for i := range out {
			out[i] = b.Delay(i + 1)
		}
		return out
	}
	a, b := run(), run()
	require.Equal(t, a, b)
	require.NotEqual(t, a[0], a[1], "seeded jitter still varies")
}

func TestBackoffDefaultRand(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Jitter: 0.5}
	for i := 0; i < 1000; i++ {
		d := b.Delay(1)
		require.GreaterOrEqual(t, d, 500*time.Millisecond)
		require.Less(t, d, 1500*time.Millisecond)
	}
}

func TestBackoffNeverNegativeMonotoneWithoutJitter(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		b := Backoff{
			Initial: time.Duration(r.Int64N(int64(time.Hour))) - time.Minute,
			Max:     time.Duration(r.Int64N(int64(24 * time.Hour))),
		}
		prev := time.Duration(0)
		for _, n := range []int{1, 2, 3, 10, 40, 63, 64, 65, 1000, math.MaxInt} {
			d := b.Delay(n)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.GreaterOrEqual(t, d, prev, "%+v n=%d", b, n)
			if b.Max > 0 {
				require.LessOrEqual(t, d, b.Max)
			}
			prev = d
		}
	}
}
