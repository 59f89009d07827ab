package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrSpec is wrapped by every error of ParseSpec.
var ErrSpec = errors.New("invalid schedule")

// parser reads the cron expressions: 5 fields (minute hour day-of-month
// month day-of-week), or 6 with seconds first, and the descriptors
// (@yearly, @monthly, @weekly, @daily, @hourly). @every is read by
// ParseSpec itself (see Spec).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed schedule: its ticks are the instants it fires at.
//
//   - A cron expression's ticks are the wall-clock times of its zone that
//     it matches, with two rules for daylight-saving changes: a wall-clock
//     time that the zone skips (spring forward: 02:30 on that day) is no
//     tick (none is invented at 03:30), and a wall-clock time that happens
//     twice (fall back: 01:30) is a tick once, at its first occurrence.
//   - "@every D" ticks at the whole multiples of D since the Unix epoch
//     (D: at least 1s, whole seconds), whatever the zone: every process
//     computes the same ticks without talking to the others.
type Spec struct {
	expr  string
	loc   *time.Location
	every time.Duration
	cron  *cron.SpecSchedule
}

// ParseSpec parses expr (a cron expression or "@every D") in the zone named
// timezone (an IANA name such as "Europe/Paris"; "" is UTC).
func ParseSpec(expr, timezone string) (*Spec, error) {
	loc, err := LoadZone(timezone)
	if err != nil {
		return nil, err
	}
	s := &Spec{expr: expr, loc: loc}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: @every: %v", ErrSpec, err)
		case d < time.Second || d%time.Second != 0:
			return nil, fmt.Errorf("%w: @every %s: want whole seconds, at least 1s", ErrSpec, d)
		}
		s.every = d
		return s, nil
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: %q: set the zone with timezone, not in the expression", ErrSpec, expr)
	}
	parsed, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrSpec, expr, err)
	}
	sp, ok := parsed.(*cron.SpecSchedule)
	if !ok { // @every is handled above; nothing else parses to another type
		return nil, fmt.Errorf("%w: %q: unsupported", ErrSpec, expr)
	}
	sp.Location = loc
	s.cron = sp
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%w: %q never fires", ErrSpec, expr)
	}
	return s, nil
}

// LoadZone loads the zone named name ("" → UTC).
func LoadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: unknown timezone %q", ErrSpec, name)
	}
	return loc, nil
}

// String is the expression as written.
func (s *Spec) String() string { return s.expr }

// Location is the zone of the schedule.
func (s *Spec) Location() *time.Location { return s.loc }

// Next is the first tick strictly after t (zero if none in five years).
func (s *Spec) Next(t time.Time) time.Time {
	if s.every > 0 {
		d := int64(s.every / time.Second)
		sec := t.Unix()
		n := (sec/d + 1) * d
		if sec < 0 && sec%d != 0 {
			n = (sec / d) * d // Go's division truncates toward zero
		}
		return time.Unix(n, 0).In(s.loc)
	}
	for {
		n := s.cron.Next(t) // in t's location
		if n.IsZero() {
			return n
		}
		n = n.In(s.loc)
		if s.matches(n) && !secondOccurrence(n) {
			return n
		}
		t = n
	}
}

// Prev is the latest tick at or before t, looking back at most one period
// (the gap between the two ticks after t) and at least one second; zero
// when there is none in that window.
func (s *Spec) Prev(t time.Time) time.Time {
	n1 := s.Next(t)
	if n1.IsZero() {
		return time.Time{}
	}
	n2 := s.Next(n1)
	period := time.Second
	if !n2.IsZero() && n2.Sub(n1) > period {
		period = n2.Sub(n1)
	}
	var last time.Time
	for c := s.Next(t.Add(-period - time.Second)); !c.IsZero() && !c.After(t); c = s.Next(c) {
		last = c
	}
	return last
}

// matches reports whether the wall-clock time of n matches the
// expression's second, minute and hour fields: the cron library may
// return the first instant after a skipped wall-clock time (03:30 for
// 02:30 on a spring-forward day), which is no tick.
func (s *Spec) matches(n time.Time) bool {
	w := n.In(s.loc)
	return s.cron.Second&(1<<uint(w.Second())) != 0 &&
		s.cron.Minute&(1<<uint(w.Minute())) != 0 &&
		s.cron.Hour&(1<<uint(w.Hour())) != 0
}

// secondOccurrence reports whether the wall-clock time of n (in its
// location) happened already, earlier, under the offset in force before a
// fall-back change: n lies within the first (before − after) of the
// zone period that began with the change.
func secondOccurrence(n time.Time) bool {
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, off := n.Zone()
	_, before := start.Add(-time.Second).Zone()
	back := time.Duration(before-off) * time.Second
	return back > 0 && n.Sub(start) < back
}
