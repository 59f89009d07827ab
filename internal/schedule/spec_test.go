package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ticks lists the ticks of s in (from, to].
func ticks(s *Spec, from, to time.Time) []time.Time {
	var out []time.Time
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, t)
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func utcs(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}

func TestParseSpecForms(t *testing.T) {
	t.Parallel()
	from := utc("2026-11-25T10:14:03Z")
	cases := []struct {
		expr, tz string
		want     []string // the first ticks after from
	}{
		{"15 10 * * *", "", []string{"2026-11-25T10:15:00Z", "2026-11-26T10:15:00Z"}},
		{"*/20 * * * * *", "", []string{"2026-11-25T10:14:20Z", "2026-11-25T10:14:40Z"}},
		{"@hourly", "", []string{"2026-11-25T11:00:00Z", "2026-11-25T12:00:00Z"}},
		{"@daily", "Europe/Paris", []string{"2026-11-25T23:00:00Z", "2026-11-26T23:00:00Z"}},
		{"@every 2s", "", []string{"2026-11-25T10:14:04Z", "2026-11-25T10:14:06Z"}},
		{"@every 1m", "Asia/Kolkata", []string{"2026-11-25T10:15:00Z", "2026-11-25T10:16:00Z"}},
		{"0 9 * * MON-FRI", "America/New_York", []string{"2026-11-25T14:00:00Z", "2026-11-26T14:00:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSpec(c.expr, c.tz)
			require.NoError(t, err)
			got := ticks(s, from, from.Add(72*time.Hour))
			require.GreaterOrEqual(t, len(got), 2)
			require.Equal(t, c.want, utcs(got[:2]))
		})
	}
}

func TestParseSpecErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ expr, tz, want string }{
		{"61 * * * *", "", "invalid schedule"},
		{"* * *", "", "invalid schedule"},
		{"@every 1500ms", "", "whole seconds"},
		{"@every 0s", "", "whole seconds"},
		{"@every soon", "", "@every"},
		{"* * * * *", "Mars/Olympus", "unknown timezone"},
		{"0 0 30 2 *", "", "never fires"},
		{"CRON_TZ=UTC * * * * *", "", "timezone"},
	} {
		_, err := ParseSpec(c.expr, c.tz)
		require.ErrorIs(t, err, ErrSpec, c.expr)
		require.ErrorContains(t, err, c.want, c.expr)
	}
}

// TestEveryIsAligned: every process computes the same @every ticks,
// whenever it starts.
func TestEveryIsAligned(t *testing.T) {
	t.Parallel()
	s, err := ParseSpec("@every 2s", "")
	require.NoError(t, err)
	a := utc("2026-11-25T10:14:03Z")
	require.Equal(t, s.Next(a), s.Next(a.Add(900*time.Millisecond)))
	require.Equal(t, utc("2026-11-25T10:14:02Z"), s.Prev(a))
	require.Equal(t, utc("2026-11-25T10:14:04Z"), s.Prev(utc("2026-11-25T10:14:04Z")))
}

// TestDSTSpringForward: on 2026-03-08 New York skips 02:00–03:00: a
// 02:30 schedule does not fire that day (no tick is invented at 03:30),
// and a half-hourly one goes from 01:30 EST to 03:00 EDT.
func TestDSTSpringForward(t *testing.T) {
	t.Parallel()
	daily, err := ParseSpec("30 2 * * *", "America/New_York")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"},
		utcs(ticks(daily, utc("2026-03-07T00:00:00Z"), utc("2026-03-10T00:00:00Z"))))

	half, err := ParseSpec("*/30 * * * *", "America/New_York")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-03-08T06:00:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"},
		utcs(ticks(half, utc("2026-03-08T05:45:00Z"), utc("2026-03-08T07:30:00Z"))),
		"01:00 EST, 01:30 EST, 03:00 EDT, 03:30 EDT")
}

// TestDSTFallBack: on 2026-11-01 New York repeats 01:00–02:00: a 01:30
// schedule fires once (at 01:30 EDT), and a half-hourly one does not fire
// the repeated wall-clock times again.
func TestDSTFallBack(t *testing.T) {
	t.Parallel()
	daily, err := ParseSpec("30 1 * * *", "America/New_York")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		utcs(ticks(daily, utc("2026-10-31T00:00:00Z"), utc("2026-11-03T00:00:00Z"))))

	half, err := ParseSpec("*/30 * * * *", "America/New_York")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z"},
		utcs(ticks(half, utc("2026-11-01T04:45:00Z"), utc("2026-11-01T07:30:00Z"))),
		"01:00 EDT, 01:30 EDT, (01:00 and 01:30 EST are repeats), 02:00 EST, 02:30 EST")
}

// TestNoWallClockTwiceInAYear: over a year of a DST zone, an hourly and a
// per-minute schedule never fire one wall-clock time twice, every tick
// matches the expression, and Prev finds each tick again.
func TestNoWallClockTwiceInAYear(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"America/New_York", "Europe/London", "Australia/Lord_Howe"} {
		s, err := ParseSpec("7 * * * *", tz)
		require.NoError(t, err)
		seen := map[string]bool{}
		from := utc("2026-01-01T00:00:00Z")
		for _, tk := range ticks(s, from, from.AddDate(1, 0, 0)) {
			w := tk.In(s.Location()).Format("2006-01-02T15:04:05")
			require.False(t, seen[w], "%s: %s fired twice", tz, w)
			seen[w] = true
			require.Equal(t, 7, tk.In(s.Location()).Minute(), "%s: %s", tz, w)
			require.Equal(t, tk, s.Prev(tk.Add(time.Minute)))
		}
		require.Greater(t, len(seen), 8700, tz)
	}
}
