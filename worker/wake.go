package worker

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/agentq/agentq/internal/fair"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/wakeup"
	"github.com/agentq/agentq/tasks"
)

// Bounds of one wake-up scan of a queue's retry set.
const (
	wakePageSize = 500
	wakeMaxPages = 200 // 100,000 tasks
)

// listen follows the worker's two pub/sub channels, on one subscription,
// until ctx ends:
//
//   - breaker transitions (rkeys.BreakerChannel): when a breaker this
//     worker gates on closes — an operator's `inspector breaker reset`, or a
//     half-open trial that succeeded — the tasks deferred on it are moved
//     from asynq's retry set back to pending, so they run at once rather
//     than when their deferral would have ended (a trip or a cooldown may be
//     minutes long). Every worker listens; the first to claim the close (per
//     breaker generation) does the scan.
//   - due announcements (rkeys.DueChannel): a producer scheduled a task of
//     one of this worker's queues; the forwarder moves it when it is due.
//
// A missed message (Redis unreachable at that moment) only means deferred
// tasks wake at their deferral time, and a scheduled task is forwarded at
// the next periodic check (worker.poll_interval), as without this loop.
func (w *Worker) listen(ctx context.Context) {
	keys := map[string][]string{} // breaker key -> agents gated by it
	for name, sp := range w.specs {
		keys[sp.breakerKey] = append(keys[sp.breakerKey], name)
		// A task deferred because its whole fallback chain was open may
		// run as soon as any agent of the chain closes.
		for _, f := range sp.fallback {
			keys[f.breakerKey] = append(keys[f.breakerKey], name)
		}
	}
	ps := w.rdb.Subscribe(ctx, rkeys.BreakerChannel(), rkeys.DueChannel())
	defer ps.Close()
	ch := ps.Channel()
	insp := asynq.NewInspectorFromRedisClient(w.rdb)
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if m.Channel == rkeys.DueChannel() {
				if q, at, ok := wakeup.ParseDue(m.Payload); ok && w.serves(q) {
					w.dues.Lower(asynqcompat.ScheduledKey(q), at)
				}
				continue
			}
			w.breakerEvent(ctx, insp, keys, m.Payload)
		}
	}
}

// breakerEvent handles one message of rkeys.BreakerChannel: a close of a
// breaker in keys wakes the tasks deferred on it.
func (w *Worker) breakerEvent(ctx context.Context, insp *asynq.Inspector, keys map[string][]string, payload string) {
	var ev struct {
		Key        string `json:"key"`
		State      string `json:"state"`
		Generation int64  `json:"generation"`
		Kind       string `json:"kind"` // "count": a failure count changed, no transition
	}
	if json.Unmarshal([]byte(payload), &ev) != nil || ev.State != string(breaker.StateClosed) || ev.Kind != "" {
		return
	}
	agents, ok := keys[ev.Key]
	if !ok {
		return
	}
	// One worker scans per close: the first to claim this generation.
	won, err := w.rdb.SetNX(ctx, rkeys.BreakerWake(ev.Key, ev.Generation), 1, time.Hour).Result()
	if err != nil || !won {
		return
	}
	if n := w.wake(ctx, insp, agents); n > 0 {
		w.log.Info("breaker closed: deferred tasks woken", "breaker_key", ev.Key, "tasks", n)
	}
}

// deferredOf lists the tasks of agents want in queue q's retry set that
// wait on a deferral: their record's state is deferred (a retry of a
// failed attempt is not, whatever its error said).
func (w *Worker) deferredOf(ctx context.Context, insp *asynq.Inspector, q string, want map[string]bool) []string {
	var ids, taskIDs []string
	for page := 1; page <= wakeMaxPages; page++ {
		infos, err := insp.ListRetryTasks(q, asynq.PageSize(wakePageSize), asynq.Page(page))
		if err != nil {
			if !errors.Is(err, asynq.ErrQueueNotFound) {
				w.log.Warn("waking deferred tasks: cannot list retry set", "queue", q, "err", err)
			}
			break
		}
		for _, ti := range infos {
			if env, err := tasks.Decode(ti.Payload); err == nil && want[env.Agent] {
				ids, taskIDs = append(ids, ti.ID), append(taskIDs, env.ID)
			}
		}
		if len(infos) < wakePageSize {
			break
		}
	}
	states, err := w.rec.States(ctx, taskIDs)
	if err != nil {
		w.log.Warn("waking deferred tasks: cannot read their records", "queue", q, "err", err)
		return nil
	}
	var out []string
	for i, st := range states {
		if st == record.StateDeferred {
			out = append(out, ids[i])
		}
	}
	return out
}

// serves reports whether the worker serves queue q.
func (w *Worker) serves(q string) bool { return slices.Contains(w.queues(), q) }

// queues are the queues the worker serves, sorted.
func (w *Worker) queues() []string { return queueList(w.cfg) }

// wake moves the deferred tasks of agents from the retry sets of this
// worker's queues to pending, wakes idle workers for them, and returns how
// many it moved.
func (w *Worker) wake(ctx context.Context, insp *asynq.Inspector, agents []string) int {
	want := map[string]bool{}
	for _, a := range agents {
		want[a] = true
	}
	moved := 0
	for _, q := range w.queues() {
		ids := w.deferredOf(ctx, insp, q, want)
		n := 0
		for _, id := range ids {
			// To its lane (package internal/fair), as its forward would.
			if ok, err := fair.RunNow(ctx, w.rdb, q, asynqcompat.RetryKey(q), id, time.Now().UnixNano()); ok && err == nil {
				n++
			} else if err := insp.RunTask(q, id); err == nil {
				n++
			}
		}
		if err := wakeup.Push(ctx, w.rdb, q, n); err != nil {
			w.log.Warn("waking deferred tasks: cannot wake idle workers; they find the tasks within worker.poll_interval", "queue", q, "err", err)
		}
		moved += n
	}
	return moved
}
