package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// newScheduler returns a scheduler on a fresh real redis-server, with its
// clock fixed at t0.
func newScheduler(t *testing.T) (*Scheduler, redis.UniversalClient, *asynq.Inspector) {
	t.Helper()
	rdb := redistest.Start(t).Client()
	s := NewScheduler(rdb, tasks.NewClient(rdb))
	s.now = func() time.Time { return t0 }
	return s, rdb, asynq.NewInspectorFromRedisClient(rdb)
}

func envelope(id string, restarts int) *tasks.Envelope {
	return &tasks.Envelope{ID: id, Agent: "llm", Action: "chat", Params: json.RawMessage(`{"q":"hi"}`),
		CorrelationID: "corr-" + id, Queue: tasks.DefaultQueue, Restarts: restarts, Run: restarts, EnqueuedAt: t0}
}

// scheduled lists the IDs of the asynq tasks scheduled on the default queue
// (none when the queue was never used).
func scheduled(t *testing.T, insp *asynq.Inspector) []string {
	t.Helper()
	tis, err := insp.ListScheduledTasks(tasks.DefaultQueue, asynq.PageSize(1000))
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	require.NoError(t, err)
	ids := make([]string, len(tis))
	for i, ti := range tis {
		ids[i] = ti.ID
	}
	return ids
}

func TestConfigDelay(t *testing.T) {
	t.Parallel()
	d := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute}
	for _, tc := range []struct {
		name    string
		cfg     Config
		used    int
		want    time.Duration
		wantErr error
	}{
		{"first restart", Config{MaxRestarts: 3, Delays: d}, 0, time.Minute, nil},
		{"third restart", Config{MaxRestarts: 3, Delays: d}, 2, 4 * time.Minute, nil},
		{"exhausted", Config{MaxRestarts: 3, Delays: d}, 3, 0, ErrExhausted},
		{"last delay repeats", Config{MaxRestarts: 5, Delays: d}, 4, 4 * time.Minute, nil},
		{"max_restarts 0", Config{MaxRestarts: 0, Delays: d}, 0, 0, ErrNotEnabled},
		{"no delays", Config{MaxRestarts: 2}, 0, 0, ErrNotEnabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.cfg.Delay(tc.used)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", ErrExhausted), "restarts_exhausted"},
		{ErrNotEnabled, "restart_not_enabled"},
		{fmt.Errorf("%w: 1 tasks waiting", ErrQueueFull), "restart_queue_full"},
		{errors.New("redis: connection refused"), ""},
		{nil, ""},
	} {
		require.Equal(t, tc.want, Reason(tc.err), "%v", tc.err)
	}
}

// TestScheduleEnqueuesNextRun: the restart is an asynq task "ID#run",
// scheduled after the configured delay, whose envelope keeps the params and
// counts the restart; the task is listed as pending with its due time.
func TestScheduleEnqueuesNextRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb, insp := newScheduler(t)
	cfg := Config{MaxRestarts: 3, Delays: []time.Duration{time.Minute, 2 * time.Minute}, MaxPending: 10}

	env := envelope("t-1", 1)
	store := record.NewStore(rdb)
	_, err := store.Create(ctx, record.New{ID: env.ID, Seed: record.SeedOf(env), State: tasks.StateActive})
	require.NoError(t, err)

	next, delay, err := s.Schedule(ctx, env, cfg)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, delay)
	require.Equal(t, 2, next.Restarts)
	require.Equal(t, 2, next.Run)
	require.Equal(t, 1, env.Restarts, "the caller's envelope is not changed")

	info, err := insp.GetTaskInfo(tasks.DefaultQueue, "t-1#2")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateScheduled, info.State)
	require.WithinDuration(t, time.Now().Add(2*time.Minute), info.NextProcessAt, 10*time.Second)
	got, err := tasks.Decode(info.Payload)
	require.NoError(t, err)
	require.JSONEq(t, `{"q":"hi"}`, string(got.Params))
	require.Equal(t, "corr-t-1", got.CorrelationID)
	require.Equal(t, 2, got.Restarts)
	require.Equal(t, 2, got.Run)

	// The pipeline records the restart in the task record; List reads it.
	_, err = store.Apply(ctx, record.Delivery{ID: "t-1", Run: env.Run, Restarts: env.Restarts, Attempt: 1},
		record.Restarting(record.Attempt{Attempt: 1, ErrorClass: "timeout", Error: "agent timed out"},
			record.NextRun{Run: next.Run, Restarts: next.Restarts}, delay))
	require.NoError(t, err)
	list, err := s.List(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []Pending{{ID: "t-1", Agent: "llm", Action: "chat", DueAt: t0.Add(2 * time.Minute),
		Restart: 2, Error: "agent timed out", Class: "timeout"}}, list)
	n, err := s.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	require.NoError(t, s.Started(ctx, "t-1"))
	n, err = s.Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestScheduleResumeCarriesWait: a resume's envelope carries the wait
// that suspended its run (tasks.Envelope.Wait: a redelivery of the
// suspended run records it after a crash); a restart of that resumed run
// does not (its wait was the previous run's).
func TestScheduleResumeCarriesWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, insp := newScheduler(t)
	wait := json.RawMessage(`{"kind":"signal","signal":"go","due":"2030-01-01T00:00:00Z"}`)
	next, err := s.ScheduleResume(ctx, envelope("t-w", 0), time.Hour, wait)
	require.NoError(t, err)
	require.Equal(t, 1, next.Resumes)
	info, err := insp.GetTaskInfo(tasks.DefaultQueue, next.AsynqID())
	require.NoError(t, err)
	got, err := tasks.Decode(info.Payload)
	require.NoError(t, err)
	require.JSONEq(t, string(wait), string(got.Wait))
	require.Equal(t, 1, got.Resumes)

	restarted, _, err := s.Schedule(ctx, got, Config{MaxRestarts: 3, Delays: []time.Duration{time.Hour}, MaxPending: 10})
	require.NoError(t, err)
	require.Empty(t, restarted.Wait)
	info, err = insp.GetTaskInfo(tasks.DefaultQueue, restarted.AsynqID())
	require.NoError(t, err)
	got, err = tasks.Decode(info.Payload)
	require.NoError(t, err)
	require.Empty(t, got.Wait)
}

// TestScheduleIdempotent: a run scheduled twice (a redelivery after a
// crash) enqueues one restart and holds one slot.
func TestScheduleIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, insp := newScheduler(t)
	cfg := Config{MaxRestarts: 3, Delays: []time.Duration{time.Hour}, MaxPending: 1}
	for i := 0; i < 3; i++ {
		next, _, err := s.Schedule(ctx, envelope("dup", 0), cfg)
		require.NoError(t, err, "try %d", i)
		require.Equal(t, 1, next.Restarts)
	}
	require.Equal(t, []string{"dup#1"}, scheduled(t, insp))
	n, err := s.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// TestScheduleRefused: exhausted, disabled and full restart queues refuse
// with their sentinel and schedule nothing.
func TestScheduleRefused(t *testing.T) {
	t.Parallel()
	d := []time.Duration{time.Hour}
	for _, tc := range []struct {
		name     string
		cfg      Config
		restarts int
		fill     int // tasks already waiting
		want     error
		reason   string
	}{
		{"exhausted", Config{MaxRestarts: 2, Delays: d}, 2, 0, ErrExhausted, ReasonExhausted},
		{"not enabled", Config{MaxRestarts: 0, Delays: d}, 0, 0, ErrNotEnabled, ReasonNotEnabled},
		{"queue full", Config{MaxRestarts: 3, Delays: d, MaxPending: 1}, 0, 1, ErrQueueFull, ReasonQueueFull},
		{"queue over full", Config{MaxRestarts: 3, Delays: d, MaxPending: 2}, 1, 3, ErrQueueFull, ReasonQueueFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, rdb, insp := newScheduler(t)
			for i := 0; i < tc.fill; i++ {
				require.NoError(t, rdb.ZAdd(ctx, rkeys.RestartPending(), redis.Z{Score: 1, Member: fmt.Sprint("other-", i)}).Err())
			}
			next, _, err := s.Schedule(ctx, envelope("x", tc.restarts), tc.cfg)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, next)
			require.Equal(t, tc.reason, Reason(err))
			require.Empty(t, scheduled(t, insp), "nothing was scheduled")
			n, err := s.Count(ctx)
			require.NoError(t, err)
			require.EqualValues(t, tc.fill, n, "the restart index is unchanged")
		})
	}
}

// TestScheduleQueueFull: with max_pending 1, of two tasks that need a
// restart one is scheduled and the other refused with restart_queue_full;
// once the first restart has started, there is room again.
func TestScheduleQueueFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, insp := newScheduler(t)
	cfg := Config{MaxRestarts: 3, Delays: []time.Duration{time.Hour}, MaxPending: 1}

	_, _, err := s.Schedule(ctx, envelope("a", 0), cfg)
	require.NoError(t, err)
	_, _, err = s.Schedule(ctx, envelope("b", 0), cfg)
	require.ErrorIs(t, err, ErrQueueFull)
	require.Equal(t, ReasonQueueFull, Reason(err))
	_, err = insp.GetTaskInfo(tasks.DefaultQueue, "b#1")
	require.ErrorIs(t, err, asynq.ErrTaskNotFound)

	// A task already waiting is not refused by its own slot.
	_, _, err = s.Schedule(ctx, envelope("a", 0), cfg)
	require.NoError(t, err)

	require.NoError(t, s.Started(ctx, "a"))
	_, _, err = s.Schedule(ctx, envelope("b", 0), cfg)
	require.NoError(t, err)
	list, err := s.List(ctx, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "b", list[0].ID)
}

// TestScheduleQueueBoundConcurrent: many workers scheduling at once never
// overshoot max_pending: the check and the reservation are one step.
func TestScheduleQueueBoundConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, insp := newScheduler(t)
	const maxPending, n = 5, 60
	cfg := Config{MaxRestarts: 3, Delays: []time.Duration{time.Hour}, MaxPending: maxPending}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, full := 0, 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.Schedule(ctx, envelope(fmt.Sprint("c-", i), 0), cfg)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrQueueFull):
				full++
			default:
				t.Errorf("schedule: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, maxPending, ok)
	require.Equal(t, n-maxPending, full)
	cnt, err := s.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, maxPending, cnt)
	require.Len(t, scheduled(t, insp), maxPending)
}

// TestScheduleRedisDown: with Redis unreachable Schedule returns an error
// that is none of the dead-letter sentinels (the pipeline keeps the task).
func TestScheduleRedisDown(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	s := NewScheduler(rdb, tasks.NewClient(rdb))
	_, _, err := s.Schedule(context.Background(), envelope("r", 0), Config{MaxRestarts: 1, Delays: []time.Duration{time.Second}, MaxPending: 3})
	require.Error(t, err)
	require.Equal(t, "", Reason(err))
}

// TestRepairFreesOrphans (#11 item 4): a slot whose restart run is in no
// asynq queue (deleted with asynq's tools) is freed once it is overdue by
// the grace, so it stops counting against max_pending; a slot whose run
// still waits in its queue, or that is not overdue yet, is kept.
func TestRepairFreesOrphans(t *testing.T) {
	t.Parallel()
	s, rdb, insp := newScheduler(t)
	ctx := context.Background()
	now := time.Now()
	s.now = func() time.Time { return now }
	cfg := Config{MaxRestarts: 3, Delays: []time.Duration{time.Second}, MaxPending: 2}

	// Two restarts fill the restart queue (max_pending 2).
	for _, id := range []string{"deleted", "waiting"} {
		env := envelope(id, 0)
		_, err := record.NewStore(rdb).Create(ctx, record.New{ID: id, Seed: record.SeedOf(env), State: tasks.StatePending})
		require.NoError(t, err)
		next, _, err := s.Schedule(ctx, env, cfg)
		require.NoError(t, err)
		_, err = record.NewStore(rdb).Apply(ctx, record.Delivery{ID: id, Run: env.Run, Restarts: env.Restarts},
			record.RestartRecovered(record.Attempt{}, record.NextRun{Run: next.Run, Restarts: next.Restarts}))
		require.NoError(t, err)
	}
	_, _, err := s.Schedule(ctx, envelope("third", 0), cfg)
	require.ErrorIs(t, err, ErrQueueFull)

	// The run of "deleted" is deleted with asynq's tools: its slot leaks.
	require.NoError(t, insp.DeleteTask(tasks.DefaultQueue, "deleted#1"))

	// Not overdue by the grace yet: nothing is freed.
	n, err := s.Repair(ctx, InspectorLookup(insp), RepairGrace)
	require.NoError(t, err)
	require.Equal(t, 0, n)

	// Later: the orphan is freed, the slot of the run that still waits is kept.
	now = now.Add(RepairGrace + 2*time.Second)
	n, err = s.Repair(ctx, InspectorLookup(insp), RepairGrace)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	ids, err := rdb.ZRange(ctx, rkeys.RestartPending(), 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"waiting"}, ids)

	// The freed slot takes a new restart.
	_, _, err = s.Schedule(ctx, envelope("third", 0), cfg)
	require.NoError(t, err)
}
