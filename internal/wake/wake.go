// Package wake is the worker's listener of the fleet's pub/sub
// announcements (a startstop service): a breaker's close wakes the tasks
// deferred on it, a producer's due announcement lowers the forwarder's
// next check.
package wake

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/agentq/agentq/internal/broker"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/tasks"
)

// Bounds of one wake-up scan of a queue's retry set.
const (
	wakePageSize = 500
	wakeMaxPages = 200 // 100,000 tasks
)

// healthCheck is how long the subscription goes without a message before
// go-redis PINGs it (its default: 3 s, a third of an idle worker's
// commands to Redis). A dead connection found later only delays what a
// missed message delays anyway (see Listener), and the fleet's look finds
// a due task within worker.poll_interval.
const healthCheck = 30 * time.Second

// Options are a Listener's.
type Options struct {
	// Keys maps each breaker key the worker gates on to the agents gated
	// by it (an agent's own key, and the keys of its fallback chain).
	Keys map[string][]string
	// Queues are the queues the worker serves, sorted.
	Queues []string
	// Dues is the forwarder's clock of due tasks, lowered by a due
	// announcement.
	Dues *broker.Dues
	// Logger; nil: slog.Default.
	Logger *slog.Logger
}

// Listener follows the worker's two pub/sub channels, on one subscription,
// from Start until its context ends or Stop:
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
type Listener struct {
	startstop.Loop
	rdb    redis.UniversalClient
	rec    *record.Store
	keys   map[string][]string
	queues []string
	dues   *broker.Dues
	log    *slog.Logger
}

// New is the listener on rdb, reading task records through rec.
func New(rdb redis.UniversalClient, rec *record.Store, o Options) *Listener {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Listener{rdb: rdb, rec: rec, keys: o.Keys, queues: o.Queues, dues: o.Dues, log: o.Logger}
}

// Start listens until ctx ends or Stop (once: see startstop.Loop).
func (l *Listener) Start(ctx context.Context) { l.Go(ctx, l.listen) }

// Stop ends the listener and waits for it; idempotent.
func (l *Listener) Stop() { l.Loop.Stop() }

func (l *Listener) listen(ctx context.Context) {
	ps := l.rdb.Subscribe(ctx, rkeys.BreakerChannel(), rkeys.DueChannel())
	defer ps.Close()
	ch := ps.Channel(redis.WithChannelHealthCheckInterval(healthCheck))
	insp := asynq.NewInspectorFromRedisClient(l.rdb)
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if m.Channel == rkeys.DueChannel() {
				if q, at, ok := broker.ParseDue(m.Payload); ok && l.serves(q) {
					l.dues.Lower(broker.ScheduledKey(q), at)
				}
				continue
			}
			l.breakerEvent(ctx, insp, m.Payload)
		}
	}
}

// breakerEvent handles one message of rkeys.BreakerChannel: a close of a
// breaker in l.keys wakes the tasks deferred on it.
func (l *Listener) breakerEvent(ctx context.Context, insp *asynq.Inspector, payload string) {
	var ev struct {
		Key        string `json:"key"`
		State      string `json:"state"`
		Generation int64  `json:"generation"`
		Kind       string `json:"kind"` // "count": a failure count changed, no transition
	}
	if json.Unmarshal([]byte(payload), &ev) != nil || ev.State != string(breaker.StateClosed) || ev.Kind != "" {
		return
	}
	agents, ok := l.keys[ev.Key]
	if !ok {
		return
	}
	// One worker scans per close: the first to claim this generation.
	won, err := l.rdb.SetNX(ctx, rkeys.BreakerWake(ev.Key, ev.Generation), 1, time.Hour).Result()
	if err != nil || !won {
		return
	}
	if n := l.wake(ctx, insp, agents); n > 0 {
		l.log.Info("breaker closed: deferred tasks woken", "breaker_key", ev.Key, "tasks", n)
	}
}

// deferredOf lists the tasks of agents want in queue q's retry set that
// wait on a deferral: their record's state is deferred (a retry of a
// failed attempt is not, whatever its error said).
func (l *Listener) deferredOf(ctx context.Context, insp *asynq.Inspector, q string, want map[string]bool) []string {
	var ids, taskIDs []string
	for page := 1; page <= wakeMaxPages; page++ {
		infos, err := insp.ListRetryTasks(q, asynq.PageSize(wakePageSize), asynq.Page(page))
		if err != nil {
			if !errors.Is(err, asynq.ErrQueueNotFound) {
				l.log.Warn("waking deferred tasks: cannot list retry set", "queue", q, "err", err)
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
	states, err := l.rec.States(ctx, taskIDs)
	if err != nil {
		l.log.Warn("waking deferred tasks: cannot read their records", "queue", q, "err", err)
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
func (l *Listener) serves(q string) bool { return slices.Contains(l.queues, q) }

// wake moves the deferred tasks of agents from the retry sets of this
// worker's queues to pending, wakes idle workers for them, and returns how
// many it moved.
func (l *Listener) wake(ctx context.Context, insp *asynq.Inspector, agents []string) int {
	want := map[string]bool{}
	for _, a := range agents {
		want[a] = true
	}
	moved := 0
	for _, q := range l.queues {
		ids := l.deferredOf(ctx, insp, q, want)
		n := 0
		for _, id := range ids {
			// To its lane (package internal/broker), as its forward would.
			if ok, err := broker.RunNow(ctx, l.rdb, q, broker.RetryKey(q), id, time.Now().UnixNano()); ok && err == nil {
				n++
			} else if err := insp.RunTask(q, id); err == nil {
				n++
			}
		}
		if err := broker.PushWake(ctx, l.rdb, q, n); err != nil {
			l.log.Warn("waking deferred tasks: cannot wake idle workers; they find the tasks within worker.poll_interval", "queue", q, "err", err)
		}
		moved += n
	}
	return moved
}
