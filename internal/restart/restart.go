// Package restart is agentq's delayed restart queue. A run that ends with a
// restartable class (network_transient, timeout, rate_limited,
// provider_error by default) is not dead-lettered at once: it is enqueued
// again as a fresh run after restart.delays[k] (1m, 2m, 4m by default), at
// most restart.max_restarts times, with the same parameters and its history
// kept.
//
// Scheduling is durable and idempotent. The restart is an ordinary asynq
// task scheduled in Redis, whose asynq task ID is derived from the task ID
// and the run number: a worker that crashes after scheduling and is
// redelivered the old run schedules nothing twice (the ID conflicts), and the
// task record's run number fences the stale delivery. The pending set
// (rkeys.RestartPending) is an index for `inspector restarts` and for the
// max_pending bound.
package restart

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// Config bounds restarts. It mirrors the `restart:` block of the config.
type Config struct {
	// MaxRestarts is how many restarts a task gets; zero: none (dead-letter
	// with reason restart_not_enabled).
	MaxRestarts int
	// Delays[k] is the wait before restart k+1; the last delay repeats.
	Delays []time.Duration
	// MaxPending bounds the restart queue; zero: unbounded.
	MaxPending int
}

// Reasons for dead-lettering instead of restarting (stable strings).
const (
	ReasonExhausted  = "restarts_exhausted"
	ReasonNotEnabled = "restart_not_enabled"
	ReasonQueueFull  = "restart_queue_full"
)

var (
	// ErrExhausted: the task has used all its restarts.
	ErrExhausted = errors.New("restarts exhausted")
	// ErrNotEnabled: restarts are off (max_restarts is 0).
	ErrNotEnabled = errors.New("restarts not enabled")
	// ErrQueueFull: the restart queue holds max_pending tasks already.
	ErrQueueFull = errors.New("restart queue full")
)

// Reason maps a Schedule error to its dead-letter reason ("" for others).
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrExhausted):
		return ReasonExhausted
	case errors.Is(err, ErrNotEnabled):
		return ReasonNotEnabled
	case errors.Is(err, ErrQueueFull):
		return ReasonQueueFull
	}
	return ""
}

// Scheduler schedules restarts.
type Scheduler struct {
	rdb    redis.UniversalClient
	client *tasks.Client
	now    func() time.Time
}

// NewScheduler returns a scheduler that enqueues through client.
func NewScheduler(rdb redis.UniversalClient, client *tasks.Client) *Scheduler {
	return &Scheduler{rdb: rdb, client: client, now: time.Now}
}

// scripts are the restart index's Lua (lua/*.lua).
var scripts = redisx.NewScripts("restart", luaFiles, nil)

//go:embed lua/*.lua
var luaFiles embed.FS

// Delay returns the wait before the next restart of a task that has used
// `used` restarts.
func (c Config) Delay(used int) (time.Duration, error) {
	if c.MaxRestarts <= 0 {
		return 0, ErrNotEnabled
	}
	if used >= c.MaxRestarts {
		return 0, fmt.Errorf("%w: %d of %d used", ErrExhausted, used, c.MaxRestarts)
	}
	if len(c.Delays) == 0 {
		return 0, ErrNotEnabled
	}
	k := used
	if k >= len(c.Delays) {
		k = len(c.Delays) - 1
	}
	return c.Delays[k], nil
}

// reserveScript puts a task in the restart index, bounded by max_pending,
// atomically (lua/reserve.lua documents its KEYS, ARGV and replies).
var reserveScript = scripts.Script("lua/reserve.lua")

// Schedule enqueues the next run of env after the configured delay and
// returns that run's envelope and the delay. It returns ErrExhausted,
// ErrNotEnabled or ErrQueueFull when the task must be dead-lettered instead.
//
// The task's slot in the restart index is reserved first (atomically
// against max_pending), then the run is enqueued: the restart run, which
// removes the task from the index when it starts (Started), can never run
// before the index entry exists. A failed enqueue gives the slot back.
// Scheduling the same run twice (a redelivered run after a crash) is not an
// error and enqueues nothing twice.
func (s *Scheduler) Schedule(ctx context.Context, env *tasks.Envelope, cfg Config) (*tasks.Envelope, time.Duration, error) {
	return s.ScheduleAfter(ctx, env, cfg, 0)
}

// ScheduleAfter is Schedule with a delay of at least atLeast: the run ended
// with a backend asking for a longer wait (Retry-After) than the next
// restart delay.
func (s *Scheduler) ScheduleAfter(ctx context.Context, env *tasks.Envelope, cfg Config, atLeast time.Duration) (*tasks.Envelope, time.Duration, error) {
	delay, err := cfg.Delay(env.Restarts)
	if err != nil {
		return nil, 0, err
	}
	delay = max(delay, atLeast)
	due := s.now().Add(delay)
	res, err := reserveScript.Run(ctx, s.rdb, []string{rkeys.RestartPending()},
		env.ID, due.UnixMilli(), max(cfg.MaxPending, 0)).Int64Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("restart: reserve a slot in the restart queue: %w", err)
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("restart: reserve a slot in the restart queue: unexpected reply %v", res)
	}
	if res[0] == 0 {
		return nil, 0, fmt.Errorf("%w: %d tasks waiting (max_pending %d)", ErrQueueFull, res[1], cfg.MaxPending)
	}
	next := *env
	next.Run++
	next.Restarts++
	next.Wait = nil // a resumed run's wait is its own
	if err := s.client.EnqueueRun(ctx, &next, delay); err != nil && !errors.Is(err, tasks.ErrDuplicate) {
		_ = s.rdb.ZRem(context.WithoutCancel(ctx), rkeys.RestartPending(), env.ID).Err()
		return nil, 0, fmt.Errorf("restart: schedule restart %d of %s: %w", next.Restarts, env.ID, err)
	}
	return &next, delay, nil
}

// ScheduleResume enqueues the next run of env, a run that suspended,
// after delay (when its wait ends at the latest), and returns that run's
// envelope: the same restarts (a resume uses none), one more resume, and
// the wait (its record JSON, record.Wait.JSON: tasks.Envelope.Wait), so
// that a redelivery of env after a crash before the suspend was recorded
// can record it.
// Scheduling the same run twice (a redelivered run after a crash) is not
// an error and enqueues nothing twice. No restart index: a waiting task
// is found by its record (state waiting) and asynq's scheduled set.
func (s *Scheduler) ScheduleResume(ctx context.Context, env *tasks.Envelope, delay time.Duration, wait json.RawMessage) (*tasks.Envelope, error) {
	next := *env
	next.Run++
	next.Resumes++
	next.Wait = wait
	if err := s.client.EnqueueRun(ctx, &next, delay); err != nil && !errors.Is(err, tasks.ErrDuplicate) {
		return nil, fmt.Errorf("restart: schedule resume %d of %s: %w", next.Resumes, env.ID, err)
	}
	return &next, nil
}

// Started removes id from the pending index: its restart run has been
// delivered. The worker calls it for every delivery of a restart run,
// whatever happens to it next (it may be dead-lettered before its breaker
// gate, fail to decode, name an unknown agent), so that every way a
// restart run ends frees its slot.
func (s *Scheduler) Started(ctx context.Context, id string) error {
	return s.rdb.ZRem(ctx, rkeys.RestartPending(), id).Err()
}

// removeIfScoreScript removes an index entry only if its due time is
// still the one a repair looked at (lua/remove_if_score.lua documents its KEYS, ARGV and replies).
var removeIfScoreScript = scripts.Script("lua/remove_if_score.lua")

// RepairGrace is how long past its due time an entry of the restart index
// must be before Repair looks at it: longer than the moment between
// reserving a slot and enqueueing its run.
const RepairGrace = time.Minute

// TaskLookup reports whether asynq holds the task with asynq ID id on
// queue (pending, scheduled, retrying or active). An *asynq.Inspector
// satisfies it through InspectorLookup.
type TaskLookup func(ctx context.Context, queue, id string) (bool, error)

// InspectorLookup is a TaskLookup on asynq's inspector: a task that waits
// or runs (pending, scheduled, retry, active) is found; an archived or
// completed one is not.
func InspectorLookup(insp *asynq.Inspector) TaskLookup {
	return func(_ context.Context, queue, id string) (bool, error) {
		info, err := insp.GetTaskInfo(queue, id)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
			return false, nil
		case err != nil:
			return false, err
		}
		switch info.State {
		case asynq.TaskStatePending, asynq.TaskStateScheduled, asynq.TaskStateRetry, asynq.TaskStateActive:
			return true, nil
		}
		return false, nil
	}
}

// Repair frees the slots of orphans: entries of the restart index due more
// than grace ago whose restart run is in no asynq queue any more (it was
// deleted with asynq's tools, or ended in a way that did not call
// Started: a worker of an older version). It returns how many it freed.
// An orphan's task is not touched: only its slot, which would otherwise
// count against max_pending forever. A run that still waits in its queue
// (workers busy or down) keeps its slot.
func (s *Scheduler) Repair(ctx context.Context, lookup TaskLookup, grace time.Duration) (int, error) {
	cutoff := s.now().Add(-grace).UnixMilli()
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, rkeys.RestartPending(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(cutoff, 10), Count: 1000,
	}).Result()
	if err != nil {
		return 0, fmt.Errorf("restart: repair: %w", err)
	}
	freed := 0
	for _, z := range zs {
		id := z.Member.(string)
		orphan, err := s.orphan(ctx, lookup, id)
		if err != nil {
			return freed, fmt.Errorf("restart: repair %s: %w", id, err)
		}
		if !orphan {
			continue
		}
		n, err := removeIfScoreScript.Run(ctx, s.rdb, []string{rkeys.RestartPending()}, id, int64(z.Score)).Int()
		if err != nil {
			return freed, fmt.Errorf("restart: repair %s: %w", id, err)
		}
		freed += n
	}
	return freed, nil
}

// orphan reports whether the restart run of task id is in no asynq queue:
// neither the record's run nor the one after it (a restart scheduled by a
// worker that died before recording it) exists.
func (s *Scheduler) orphan(ctx context.Context, lookup TaskLookup, id string) (bool, error) {
	v, err := s.rdb.HMGet(ctx, rkeys.Task(id), "run", "queue").Result()
	if err != nil {
		return false, err
	}
	run, queue := 0, tasks.DefaultQueue
	if r, ok := v[0].(string); ok {
		run, _ = strconv.Atoi(r)
	}
	if q, ok := v[1].(string); ok && q != "" {
		queue = q
	}
	for _, r := range []int{run, run + 1} {
		env := tasks.Envelope{ID: id, Run: r}
		if r == 0 {
			continue // run 0 is never a restart
		}
		found, err := lookup(ctx, queue, env.AsynqID())
		if err != nil || found {
			return false, err
		}
	}
	return true, nil
}

// Pending is a task waiting for its restart.
type Pending struct {
	ID      string    `json:"id"`
	Agent   string    `json:"agent"`
	Action  string    `json:"action"`
	DueAt   time.Time `json:"due_at"`
	Restart int       `json:"restart"`
	Error   string    `json:"error"`
	Class   string    `json:"error_class"`
}

// List returns the tasks waiting for a restart, soonest first.
func (s *Scheduler) List(ctx context.Context, limit int) ([]Pending, error) {
	limit = defaults.Positive(limit, 1000)
	zs, err := s.rdb.ZRangeWithScores(ctx, rkeys.RestartPending(), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("restart: list pending: %w", err)
	}
	cmds := make([]*redis.SliceCmd, len(zs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range zs {
			cmds[i] = p.HMGet(ctx, rkeys.Task(z.Member.(string)), "agent", "action", "restarts", "error", "error_class")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("restart: list pending: %w", err)
	}
	out := make([]Pending, 0, len(zs))
	for i, z := range zs {
		p := Pending{ID: z.Member.(string), DueAt: time.UnixMilli(int64(z.Score)).UTC()}
		v := cmds[i].Val()
		str := func(i int) string {
			if i < len(v) {
				if s, ok := v[i].(string); ok {
					return s
				}
			}
			return ""
		}
		p.Agent, p.Action, p.Error, p.Class = str(0), str(1), str(3), str(4)
		p.Restart, _ = strconv.Atoi(str(2))
		out = append(out, p)
	}
	return out, nil
}

// Count returns how many tasks wait for a restart.
func (s *Scheduler) Count(ctx context.Context) (int64, error) {
	return s.rdb.ZCard(ctx, rkeys.RestartPending()).Result()
}
