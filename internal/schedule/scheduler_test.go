package schedule

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// fakeClock jumps to the end of every wait; a wait that would pass end
// ends the loop instead.
type fakeClock struct {
	mu       sync.Mutex
	now, end time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Wait(ctx context.Context, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.Add(d).After(c.end) || ctx.Err() != nil {
		return false
	}
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return true
}

type fixture struct {
	rdb    redis.UniversalClient
	client *tasks.Client
}

func setup(t *testing.T) fixture {
	t.Helper()
	rdb := redistest.Start(t).Client()
	return fixture{rdb: rdb, client: tasks.NewClient(rdb)}
}

func (f fixture) def(t *testing.T, name, expr, tz string) Def {
	t.Helper()
	sp, err := ParseSpec(expr, tz)
	require.NoError(t, err)
	return Def{Name: name, Spec: sp, Task: tasks.Task{Agent: "tool", Action: "tick"}}
}

// fired lists the task IDs of the ticks of schedule name in Redis, sorted.
func (f fixture) fired(t *testing.T, name string) []string {
	t.Helper()
	keys, err := f.rdb.Keys(context.Background(), rkeys.Task(TickID(name, time.Time{})[:len("sched:"+name+":")]+"*")).Result()
	require.NoError(t, err)
	var ids []string
	for _, k := range keys {
		id := strings.TrimSuffix(strings.TrimPrefix(k, rkeys.Prefix+"{task:"), "}")
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// runUntil runs a scheduler of defs on a fake clock from from to end.
func (f fixture) runUntil(defs []Def, from, end time.Time) {
	s := New(f.rdb, f.client, defs, Options{Clock: &fakeClock{now: from, end: end}})
	s.run(context.Background())
}

func TestTickID(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 11, 25, 11, 15, 0, 0, time.FixedZone("CET", 3600))
	require.Equal(t, "sched:nightly:20261125T101500Z", TickID("nightly", tick))
	require.NoError(t, tasks.ValidateID(TickID("a.b-c_d", tick)))
}

// TestFireOncePerTickAcrossSchedulers: three schedulers firing the same
// tick at once enqueue one task.
func TestFireOncePerTickAcrossSchedulers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	d := f.def(t, "s", "@every 2s", "")
	d.Task.Tenant, d.Task.Params = "acme", []byte(`{"n":1}`)
	tick := utc("2026-11-25T10:15:00Z")
	outs := make(chan Outcome, 3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			out, err := New(f.rdb, tasks.NewClient(f.rdb), []Def{d}, Options{}).Fire(context.Background(), d, tick)
			require.NoError(t, err)
			outs <- out
		})
	}
	wg.Wait()
	close(outs)
	var got []string
	for o := range outs {
		got = append(got, string(o))
	}
	sort.Strings(got)
	require.Equal(t, []string{"duplicate", "duplicate", "fired"}, got)
	require.Equal(t, []string{"sched:s:20261125T101500Z"}, f.fired(t, "s"))
	st, err := ReadState(context.Background(), f.rdb, "s")
	require.NoError(t, err)
	require.Equal(t, tick, st.LastFire)
	require.Equal(t, "sched:s:20261125T101500Z", st.LastTask)
	v, err := f.client.Store().Get(context.Background(), st.LastTask)
	require.NoError(t, err)
	require.Equal(t, "acme", v.Tenant, "the schedule's tenant is the task's")
	require.Equal(t, "tick", v.Action)
}

// TestLoopAcrossDST: the loop, on an injected clock, fires each tick of a
// spring-forward and a fall-back day once, none invented; two loops over
// the same days fire nothing more.
func TestLoopAcrossDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, from, to        string
		spring, fall, halfDay []string
		day                   string
	}{{
		name: "spring forward", from: "2026-03-07T00:00:00Z", to: "2026-03-10T00:00:00Z", day: ":20260308T",
		spring:  []string{"20260307T073000Z", "20260309T063000Z"}, // 02:30 EST; none on the 8th; 02:30 EDT
		fall:    []string{"20260307T063000Z", "20260308T063000Z", "20260309T053000Z"},
		halfDay: []string{"20260308T060000Z", "20260308T063000Z"}, // 01:00, 01:30 EST; 02:xx does not exist
	}, {
		name: "fall back", from: "2026-10-31T00:00:00Z", to: "2026-11-03T00:00:00Z", day: ":20261101T",
		spring: []string{"20261031T063000Z", "20261101T073000Z", "20261102T073000Z"},
		fall:   []string{"20261031T053000Z", "20261101T053000Z", "20261102T063000Z"}, // 01:30 EDT once
		// 01:00, 01:30 EDT, then 02:00, 02:30 EST: the repeated 01:xx EST not again
		halfDay: []string{"20261101T050000Z", "20261101T053000Z", "20261101T070000Z", "20261101T073000Z"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			defs := []Def{f.def(t, "spring", "30 2 * * *", "America/New_York"), f.def(t, "fall", "30 1 * * *", "America/New_York"),
				f.def(t, "half", "*/30 1-2 * * *", "America/New_York")}
			for range 2 { // a second run over the same days fires nothing more
				f.runUntil(defs, utc(c.from), utc(c.to))
			}
			ids := func(name string, only string) []string {
				var out []string
				for _, id := range f.fired(t, name) {
					if strings.Contains(id, only) {
						out = append(out, strings.TrimPrefix(id, "sched:"+name+":"))
					}
				}
				return out
			}
			require.Equal(t, c.spring, ids("spring", ""))
			require.Equal(t, c.fall, ids("fall", ""))
			require.Equal(t, c.halfDay, ids("half", c.day))
		})
	}
}

// TestMissedTickPolicy: a scheduler that starts fires the latest tick
// missed since the recorded last fire, never the backlog; a schedule that
// never fired starts with its next tick.
func TestMissedTickPolicy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	d := f.def(t, "m", "*/10 * * * *", "Europe/Paris")
	fresh := f.def(t, "fresh", "*/10 * * * *", "Europe/Paris")
	s := New(f.rdb, f.client, []Def{d}, Options{})
	_, err := s.Fire(ctx, d, utc("2026-11-25T10:00:00Z"))
	require.NoError(t, err)

	start := utc("2026-11-25T10:55:00Z") // 10:10 … 10:50 were missed
	f.runUntil([]Def{d, fresh}, start, start)
	require.Equal(t, []string{"sched:m:20261125T100000Z", "sched:m:20261125T105000Z"}, f.fired(t, "m"))
	require.Empty(t, f.fired(t, "fresh"))

	f.runUntil([]Def{d, fresh}, start, start.Add(10*time.Minute))
	require.Equal(t, []string{"sched:m:20261125T100000Z", "sched:m:20261125T105000Z", "sched:m:20261125T110000Z"}, f.fired(t, "m"))
	require.Equal(t, []string{"sched:fresh:20261125T110000Z"}, f.fired(t, "fresh"))
}

// TestOverlapSkip: with overlap skip a tick is skipped while the last
// fired task has not ended; with allow it is fired.
func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	skip := f.def(t, "skip", "@every 1m", "")
	skip.Overlap = OverlapSkip
	allow := f.def(t, "allow", "@every 1m", "")
	s := New(f.rdb, f.client, []Def{skip, allow}, Options{})
	t1, t2, t3 := utc("2026-11-25T10:01:00Z"), utc("2026-11-25T10:02:00Z"), utc("2026-11-25T10:03:00Z")
	for _, c := range []struct {
		d    Def
		t    time.Time
		want Outcome
	}{{skip, t1, Fired}, {allow, t1, Fired}, {skip, t2, Skipped}, {allow, t2, Fired}, {skip, t1, Fired}} {
		out, err := s.Fire(ctx, c.d, c.t)
		require.NoError(t, err)
		if c.d.Name == "skip" && c.t == t1 && out != Fired {
			require.Equal(t, Duplicate, out)
			continue
		}
		require.Equal(t, c.want, out, "%s at %s", c.d.Name, c.t)
	}
	st, err := ReadState(ctx, f.rdb, "skip")
	require.NoError(t, err)
	require.Equal(t, t2, st.LastSkipped)
	require.Equal(t, TickID("skip", t1), st.LastTask)

	_, err = f.client.Cancel(ctx, TickID("skip", t1), "test")
	require.NoError(t, err)
	out, err := s.Fire(ctx, skip, t3)
	require.NoError(t, err)
	require.Equal(t, Fired, out, "the last task ended")
	require.Equal(t, []string{TickID("skip", t1), TickID("skip", t3)}, f.fired(t, "skip"))
}

// TestStartStop: Start returns at once, the loop ends with its context,
// and Stop is idempotent.
func TestStartStop(t *testing.T) {
	t.Parallel()
	f := setup(t)
	s := New(f.rdb, f.client, []Def{f.def(t, "ss", "@every 1s", "")}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	require.Eventually(t, func() bool { return len(f.fired(t, "ss")) >= 1 }, 20*time.Second, 50*time.Millisecond)
	cancel()
	s.Stop()
	s.Stop()
	n := len(f.fired(t, "ss"))
	st, err := ReadState(context.Background(), f.rdb, "ss")
	require.NoError(t, err)
	require.False(t, st.LastFire.IsZero())
	require.Len(t, f.fired(t, "ss"), n)
	var never Scheduler
	never.Stop()
}

// hookClock is a fakeClock that runs hook before each wait (n counts them).
type hookClock struct {
	fakeClock
	n    int
	hook func(n int)
}

func (c *hookClock) Wait(ctx context.Context, d time.Duration) bool {
	c.n++
	c.hook(c.n)
	return c.fakeClock.Wait(ctx, d)
}

// TestTickRetriedWhileRedisIsDown: a tick whose enqueue fails (Redis
// down) is tried again until it lands, and observed as an error then as
// fired.
func TestTickRetriedWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	f := fixture{rdb: rdb, client: tasks.NewClient(rdb)}
	d := f.def(t, "r", "@every 1m", "")
	from := utc("2026-11-25T10:00:30Z")
	clock := &hookClock{fakeClock: fakeClock{now: from, end: from.Add(60 * time.Second)}}
	clock.hook = func(n int) {
		switch n {
		case 1: // before the 10:01 tick
			srv.Stop()
		case 3: // two failed tries later
			srv.Restart()
		}
	}
	var outcomes []string
	s := New(rdb, f.client, []Def{d}, Options{Clock: clock, Observe: func(_, o string) { outcomes = append(outcomes, o) }})
	s.run(context.Background())
	require.Equal(t, []string{"error", "error", "fired"}, outcomes)
	require.Equal(t, []string{"sched:r:20261125T100100Z"}, f.fired(t, "r"))
}

// TestOutageCatchesUpItsLastTick: the ticks of a schedule that fall in a
// Redis outage are caught up as those no worker ran are: once Redis
// answers again, the latest of them fires — once — before the next
// tick; the earlier ones are dropped, and no tick fires twice.
func TestOutageCatchesUpItsLastTick(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAOF())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	f := fixture{rdb: rdb, client: tasks.NewClient(rdb)}
	d := f.def(t, "o", "@every 1s", "")
	from := utc("2026-11-25T10:00:30.5Z")
	clock := &hookClock{fakeClock: fakeClock{now: from, end: from.Add(6 * time.Second)}}
	clock.hook = func(n int) {
		switch n {
		case 2: // after the 10:00:31 tick: the 32, 33 and 34 ticks fall in the outage
			srv.Stop()
		case 5: // back before the 35 tick
			srv.Restart()
		}
	}
	var outcomes []string
	s := New(rdb, f.client, []Def{d}, Options{Clock: clock, Observe: func(_, o string) { outcomes = append(outcomes, o) }})
	s.run(context.Background())
	require.Equal(t, []string{"fired", "error", "error", "error", "fired", "fired", "fired"}, outcomes,
		"the outage's last tick is caught up once, then the ticks go on")
	require.Equal(t, []string{"sched:o:20261125T100031Z", "sched:o:20261125T100034Z",
		"sched:o:20261125T100035Z", "sched:o:20261125T100036Z"}, f.fired(t, "o"))
	st, err := ReadState(context.Background(), rdb, "o")
	require.NoError(t, err)
	require.Equal(t, utc("2026-11-25T10:00:36Z"), st.LastFire)
}
