package schedule

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/tasks"
)

// The values of a schedule's overlap field.
const (
	OverlapAllow = "allow" // fire every tick (the default)
	OverlapSkip  = "skip"  // skip a tick while the last fired tick's task has not ended
)

// Def is one schedule: what to enqueue, when.
type Def struct {
	Name string
	Spec *Spec
	// Overlap is OverlapAllow ("" too) or OverlapSkip.
	Overlap string
	// Task is the task each tick enqueues (with the schedule's tenant in
	// Task.Tenant); its ID is set per tick (TickID).
	Task tasks.Task
}

// TickID is the task ID of schedule name's tick at t:
// "sched:NAME:20261125T101500Z" (UTC, to the second).
func TickID(name string, t time.Time) string {
	return "sched:" + name + ":" + t.UTC().Format("20060102T150405Z")
}

// Clock is the Scheduler's time: Now, and Wait, which returns after d or
// when ctx ends (false then).
type Clock interface {
	Now() time.Time
	Wait(ctx context.Context, d time.Duration) bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Options configure a Scheduler.
type Options struct {
	Clock  Clock        // zero: the system clock
	Logger *slog.Logger // zero: slog.Default
	// Observe, when set, is told of each tick this process handled: the
	// schedule and the outcome (fired, duplicate, skipped, error).
	Observe func(schedule, outcome string)
}

// Scheduler fires a process's schedules. Start runs it until ctx ends or
// Stop (startstop.Service).
type Scheduler struct {
	startstop.Loop
	rdb    redis.UniversalClient
	client *tasks.Client
	defs   []Def
	clock  Clock
	log    *slog.Logger
	obs    func(schedule, outcome string)
}

// New builds a Scheduler of defs enqueueing through client on rdb.
func New(rdb redis.UniversalClient, client *tasks.Client, defs []Def, o Options) *Scheduler {
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Scheduler{rdb: rdb, client: client, defs: slices.Clone(defs), clock: o.Clock, log: o.Logger, obs: o.Observe}
}

// Start begins firing; it returns at once.
func (s *Scheduler) Start(ctx context.Context) { s.Go(ctx, s.run) }

// Stop ends the loop and waits for it; idempotent.
func (s *Scheduler) Stop() { s.Loop.Stop() }

// Outcome says what Fire did with a tick.
type Outcome string

// The outcomes of Fire.
const (
	Fired     Outcome = "fired"     // this process enqueued the tick's task
	Duplicate Outcome = "duplicate" // another process had enqueued it
	Skipped   Outcome = "skipped"   // overlap skip: the last task had not ended
)

// retryDelay is how soon a tick whose enqueue failed (Redis unreachable)
// is tried again, for as long as it is the schedule's latest missed tick.
const retryDelay = time.Second

// run is the loop: the missed-tick policy once, then each tick as it
// comes (handle). cursors hold, per schedule, the latest tick handled;
// retry, the latest missed tick, to try again (zero: none).
func (s *Scheduler) run(ctx context.Context) {
	now := s.clock.Now()
	cursors := make([]time.Time, len(s.defs))
	retry := make([]time.Time, len(s.defs))
	for i, d := range s.defs {
		cursors[i] = now
		st, err := s.state(ctx, d.Name)
		if err != nil {
			s.log.Warn("schedule: read state", "schedule", d.Name, "err", err)
			continue
		}
		if !st.LastFire.IsZero() {
			if t := latest(d.Spec, st.LastFire, now); !t.IsZero() && !s.fire(ctx, d, t, "missed") {
				retry[i] = t
			}
		}
	}
	for ctx.Err() == nil {
		next := s.wake(cursors, retry, s.clock.Now())
		if next.IsZero() || !s.clock.Wait(ctx, next.Sub(s.clock.Now())) {
			return
		}
		now = s.clock.Now()
		for i, d := range s.defs {
			t := latest(d.Spec, cursors[i], now)
			if !t.IsZero() {
				cursors[i] = t
			} else if retry[i].IsZero() || now.Before(retry[i].Add(retryDelay)) {
				continue
			}
			retry[i] = s.handle(ctx, d, retry[i], t)
		}
	}
}

// handle fires schedule d's latest missed tick, missed (zero: none), and
// its new tick t (zero: none), and returns the latest tick still missed
// (zero: none). The ticks of a Redis outage are caught up as those no
// worker ran are (see run's missed-tick policy): once Redis answers, the
// latest of them fires — late, once — before t; the earlier ones are
// dropped. While missed still fails (Redis still down), t is not tried:
// it becomes the latest missed tick.
func (s *Scheduler) handle(ctx context.Context, d Def, missed, t time.Time) time.Time {
	if !missed.IsZero() && !s.fire(ctx, d, missed, "missed") {
		if t.After(missed) {
			return t
		}
		return missed
	}
	if !t.IsZero() && !s.fire(ctx, d, t, "tick") {
		return t
	}
	return time.Time{}
}

// wake is when the loop next has something to do: the earliest next tick,
// or a failed tick's retry.
func (s *Scheduler) wake(cursors, retry []time.Time, now time.Time) time.Time {
	var next time.Time
	for i, d := range s.defs {
		n := d.Spec.Next(cursors[i])
		if !retry[i].IsZero() {
			if r := now.Add(retryDelay); n.IsZero() || r.Before(n) {
				n = r
			}
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}

// fire fires one tick and logs a failure; it reports whether the tick was
// handled (false: try it again).
func (s *Scheduler) fire(ctx context.Context, d Def, t time.Time, why string) bool {
	out, err := s.Fire(ctx, d, t)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("schedule: fire", "schedule", d.Name, "tick", t.UTC(), "err", err)
			s.observe(d.Name, "error")
		}
		return false
	}
	s.observe(d.Name, string(out))
	s.log.Debug("schedule tick", "schedule", d.Name, "tick", t.UTC(), "outcome", out, "why", why)
	return true
}

func (s *Scheduler) observe(name, outcome string) {
	if s.obs != nil {
		s.obs(name, outcome)
	}
}

// recordTimeout bounds the write that records an enqueued fire.
const recordTimeout = 5 * time.Second

// maxWalk bounds the ticks latest walks when Prev's window misses.
const maxWalk = 100_000

// latest is the latest tick in (after, now], zero when none.
func latest(sp *Spec, after, now time.Time) time.Time {
	if p := sp.Prev(now); !p.IsZero() {
		if p.After(after) {
			return p
		}
		return time.Time{}
	}
	var last time.Time
	t := sp.Next(after)
	for i := 0; i < maxWalk && !t.IsZero() && !t.After(now); i++ {
		last, t = t, sp.Next(t)
	}
	return last
}

// Fire fires d's tick t: with overlap skip it first reads the state of the
// last fired tick's task, then enqueues the tick's task under TickID and
// records the fire.
func (s *Scheduler) Fire(ctx context.Context, d Def, t time.Time) (Outcome, error) {
	id := TickID(d.Name, t)
	if d.Overlap == OverlapSkip {
		busy, err := s.busy(ctx, d.Name, id)
		if err != nil {
			return "", err
		}
		if busy {
			return Skipped, s.record(ctx, d, fieldLastSkipped, t, "")
		}
	}
	task := d.Task
	task.ID = id
	res, err := s.client.Enqueue(ctx, task)
	if err != nil {
		return "", fmt.Errorf("schedule %s: enqueue %s: %w", d.Name, id, err)
	}
	// The task is enqueued: record the fire even when ctx ends meanwhile,
	// so a stopping scheduler never leaves a fired tick unrecorded.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := s.record(rctx, d, fieldLastFire, t, id); err != nil {
		return "", err
	}
	if res.Duplicate {
		return Duplicate, nil
	}
	return Fired, nil
}

// busy reports whether the schedule's last fired task (other than id)
// has not ended.
func (s *Scheduler) busy(ctx context.Context, name, id string) (bool, error) {
	st, err := s.state(ctx, name)
	if err != nil || st.LastTask == "" || st.LastTask == id {
		return false, err
	}
	v, err := s.client.Store().Get(ctx, st.LastTask)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("schedule %s: read task %s: %w", name, st.LastTask, err)
	}
	return !v.State.Terminal(), nil
}

// The fields of a schedule's state hash (rkeys.Schedule), F.<name> in
// lua/record.lua.
const (
	fieldLastFire    = "last_fire"
	fieldLastSkipped = "last_skipped"
	fieldLastTask    = "last_task"
)

// scripts are the schedules' Lua (lua/*.lua).
var scripts = redisx.NewScripts("schedule", luaFiles, map[string]map[string]string{
	"F": redisx.Quoted(fieldLastFire, fieldLastSkipped, fieldLastTask),
})

//go:embed lua/*.lua
var luaFiles embed.FS

// recordScript records a tick in a schedule's state, never moving it back
// (lua/record.lua documents its KEYS, ARGV and replies).
var recordScript = scripts.Script("lua/record.lua")

// record writes tick t of d under field (recordScript).
func (s *Scheduler) record(ctx context.Context, d Def, field string, t time.Time, id string) error {
	err := recordScript.Run(ctx, s.rdb, []string{rkeys.Schedule(d.Name)},
		field, t.UnixMilli(), id, stateTTL(d.Spec, t).Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("schedule %s: record %s: %w", d.Name, field, err)
	}
	return nil
}

// stateTTL keeps a schedule's state for a week past two of its periods.
func stateTTL(sp *Spec, t time.Time) time.Duration {
	n1 := sp.Next(t)
	n2 := sp.Next(n1)
	if n1.IsZero() || n2.IsZero() {
		return 7 * 24 * time.Hour
	}
	return 7*24*time.Hour + 2*n2.Sub(t)
}

// State is what Redis holds of a schedule.
type State struct {
	LastFire    time.Time `json:"last_fire"`
	LastTask    string    `json:"last_task_id"`
	LastSkipped time.Time `json:"last_skipped"`
}

func (s *Scheduler) state(ctx context.Context, name string) (State, error) {
	return ReadState(ctx, s.rdb, name)
}

// ReadState reads schedule name's state (zero when it never fired).
func ReadState(ctx context.Context, rdb redis.UniversalClient, name string) (State, error) {
	m, err := rdb.HGetAll(ctx, rkeys.Schedule(name)).Result()
	if err != nil {
		return State{}, fmt.Errorf("schedule %s: read state: %w", name, err)
	}
	return State{LastFire: msTime(m[fieldLastFire]), LastTask: m[fieldLastTask], LastSkipped: msTime(m[fieldLastSkipped])}, nil
}

func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Status is a schedule as the operators' tools show it.
type Status struct {
	Name        string      `json:"name"`
	Cron        string      `json:"cron"`
	Timezone    string      `json:"timezone"`
	Agent       string      `json:"agent"`
	Action      string      `json:"action,omitempty"`
	Queue       string      `json:"queue"`
	Overlap     string      `json:"overlap"`
	NextFire    *time.Time  `json:"next_fire"`
	LastFire    *time.Time  `json:"last_fire"`
	LastSkipped *time.Time  `json:"last_skipped,omitempty"`
	LastTaskID  string      `json:"last_task_id,omitempty"`
	LastState   tasks.State `json:"last_task_state,omitempty"`
}

// Statuses reads the state of defs at now: next fire, last fire, the last
// task's ID and state ("" when its record is gone).
func Statuses(ctx context.Context, rdb redis.UniversalClient, store *tasks.Store, defs []Def, now time.Time) ([]Status, error) {
	out := make([]Status, 0, len(defs))
	for _, d := range defs {
		st, err := ReadState(ctx, rdb, d.Name)
		if err != nil {
			return nil, err
		}
		q := d.Task.Queue
		if q == "" {
			q = "default"
		}
		ov := d.Overlap
		if ov == "" {
			ov = OverlapAllow
		}
		s := Status{Name: d.Name, Cron: d.Spec.String(), Timezone: d.Spec.Location().String(), Agent: d.Task.Agent,
			Action: d.Task.Action, Queue: q, Overlap: ov, LastTaskID: st.LastTask,
			NextFire: timePtr(d.Spec.Next(now)), LastFire: timePtr(st.LastFire), LastSkipped: timePtr(st.LastSkipped)}
		if st.LastTask != "" {
			v, err := store.Get(ctx, st.LastTask)
			switch {
			case err == nil:
				s.LastState = v.State
			case !errors.Is(err, tasks.ErrNotFound):
				return nil, fmt.Errorf("schedule %s: read task %s: %w", d.Name, st.LastTask, err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
