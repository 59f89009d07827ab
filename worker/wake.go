package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// deferCause is the error text a deferral hands asynq (TaskInfo.LastErr of
// a deferred task); wakeDeferred recognises deferred tasks by it.
const deferCause = "breaker open"

// Bounds of one wake-up scan of a queue's retry set.
const (
	wakePageSize = 500
	wakeMaxPages = 200 // 100,000 tasks
)

// wakeDeferred listens to breaker transitions (rkeys.BreakerChannel) until
// ctx ends. When a breaker this worker gates on closes — an operator's
// `inspector breaker reset`, or a half-open trial that succeeded — the
// tasks deferred on it are moved from asynq's retry set back to pending,
// so they run at once rather than when their deferral would have ended
// (a trip or a cooldown may be minutes long). Every worker listens; the
// first to claim the close (per breaker generation) does the scan. A missed message (Redis
// unreachable at that moment) only means the tasks wake at their deferral
// time, as without this loop.
func (w *Worker) wakeDeferred(ctx context.Context) {
	keys := map[string][]string{} // breaker key -> agents gated by it
	for name, sp := range w.specs {
		keys[sp.breakerKey] = append(keys[sp.breakerKey], name)
		// A task deferred because its whole fallback chain was open may
		// run as soon as any agent of the chain closes.
		for _, f := range sp.fallback {
			keys[f.breakerKey] = append(keys[f.breakerKey], name)
		}
	}
	ps := w.rdb.Subscribe(ctx, rkeys.BreakerChannel())
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
			var ev struct {
				Key        string `json:"key"`
				State      string `json:"state"`
				Generation int64  `json:"generation"`
				Kind       string `json:"kind"` // "count": a failure count changed, no transition
			}
			if json.Unmarshal([]byte(m.Payload), &ev) != nil || ev.State != string(resilience.StateClosed) || ev.Kind != "" {
				continue
			}
			if agents, ok := keys[ev.Key]; ok {
				// One worker scans per close: the first to claim this generation.
				won, err := w.rdb.SetNX(ctx, rkeys.BreakerWake(ev.Key, ev.Generation), 1, time.Hour).Result()
				if err != nil || !won {
					continue
				}
				n := w.wake(insp, agents)
				if n > 0 {
					w.log.Info("breaker closed: deferred tasks woken", "breaker_key", ev.Key, "tasks", n)
				}
			}
		}
	}
}

// wake moves the deferred tasks of agents from the retry sets of this
// worker's queues to pending and returns how many it moved.
func (w *Worker) wake(insp *asynq.Inspector, agents []string) int {
	want := map[string]bool{}
	for _, a := range agents {
		want[a] = true
	}
	queues := make([]string, 0, len(w.cfg.Worker.Queues))
	for q := range w.cfg.Worker.Queues {
		queues = append(queues, q)
	}
	if len(queues) == 0 {
		queues = []string{tasks.DefaultQueue}
	}
	sort.Strings(queues)
	moved := 0
	for _, q := range queues {
		var ids []string
		for page := 1; page <= wakeMaxPages; page++ {
			infos, err := insp.ListRetryTasks(q, asynq.PageSize(wakePageSize), asynq.Page(page))
			if err != nil {
				if !errors.Is(err, asynq.ErrQueueNotFound) {
					w.log.Warn("waking deferred tasks: cannot list retry set", "queue", q, "err", err)
				}
				break
			}
			for _, ti := range infos {
				if ti.LastErr != deferCause {
					continue
				}
				if env, err := tasks.Decode(ti.Payload); err == nil && want[env.Agent] {
					ids = append(ids, ti.ID)
				}
			}
			if len(infos) < wakePageSize {
				break
			}
		}
		for _, id := range ids {
			if err := insp.RunTask(q, id); err == nil {
				moved++
			}
		}
	}
	return moved
}
