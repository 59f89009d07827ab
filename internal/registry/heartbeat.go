// Package registry keeps a worker process's entry in the worker registry
// (rkeys.Workers, read with inspect.Workers): Heartbeat, a startstop
// service.
package registry

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/buildinfo"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/tasks"
)

// BuildVersion is v, or, when v is "", agentq's version
// (buildinfo.Version).
func BuildVersion(v string) string {
	if v != "" {
		return v
	}
	return buildinfo.Version()
}

// Heartbeat keeps a worker process's entry in the worker registry
// (rkeys.Workers; read with inspect.Workers): from Start, and then every
// inspect.HeartbeatInterval, it writes the entry (its identity, queues,
// concurrency and the tasks Track says are in flight) in one small script
// call, which also drops the entries of workers gone for inspect.KeepGone.
// An idle worker costs Redis that one write per interval and nothing
// else. Stop (idempotent) ends the loop and removes the entry: a worker
// that shut down cleanly left no task behind. A worker killed with
// SIGKILL stops writing; readers show it gone after inspect.GoneAfter.
type Heartbeat struct {
	startstop.Loop
	rdb      redis.UniversalClient
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration

	mu    sync.Mutex
	entry inspect.WorkerEntry
	tasks map[string]inspect.WorkerTask // in flight, by delivery ID
}

// NewHeartbeat is the registry entry of this process (host and pid from
// the OS, a random suffix to the ID) serving queues with concurrency, at
// version (BuildVersion's).
// now is the clock (nil: time.Now), interval the heartbeat's (zero:
// inspect.HeartbeatInterval).
func NewHeartbeat(rdb redis.UniversalClient, queues map[string]int, concurrency int, version string, log *slog.Logger,
	now func() time.Time, interval time.Duration) *Heartbeat {
	if now == nil {
		now = time.Now
	}
	if interval <= 0 {
		interval = inspect.HeartbeatInterval
	}
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	pid := os.Getpid()
	return &Heartbeat{rdb: rdb, log: log, now: now, interval: interval, tasks: map[string]inspect.WorkerTask{},
		entry: inspect.WorkerEntry{
			ID: host + ":" + strconv.Itoa(pid) + ":" + tasks.NewID()[:8], Host: host, PID: pid, Version: BuildVersion(version),
			Queues: maps.Clone(queues), Concurrency: concurrency, Started: now().UTC(),
		}}
}

// ID is the worker's ID in the registry.
func (h *Heartbeat) ID() string { return h.entry.ID }

// Track notes a task in flight (its delivery's asynq ID, which is also
// the key of its lease) until the returned func is called. It touches no
// Redis: the next heartbeat writes it.
func (h *Heartbeat) Track(delivery, id, agent, queue string) (done func()) {
	t := inspect.WorkerTask{ID: id, Agent: agent, Queue: queue, Started: h.now().UTC()}
	if delivery != id {
		t.Delivery = delivery
	}
	h.mu.Lock()
	h.tasks[delivery] = t
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.tasks, delivery)
		h.mu.Unlock()
	}
}

// Start writes the entry now and then every interval until ctx ends or Stop.
func (h *Heartbeat) Start(ctx context.Context) {
	h.Go(ctx, func(ctx context.Context) {
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			if err := h.Beat(ctx); err != nil && ctx.Err() == nil {
				h.log.Warn("worker registry: heartbeat not written; the next one tries again", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// Stop ends the loop and removes the entry (once).
func (h *Heartbeat) Stop() {
	if !h.Loop.Stop() || !h.Started() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pipe := h.rdb.TxPipeline()
	pipe.HDel(ctx, rkeys.Workers(), h.entry.ID)
	pipe.ZRem(ctx, rkeys.WorkersBeats(), h.entry.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		h.log.Warn("worker registry: entry not removed; it shows as gone until dropped", "err", err)
	}
}

// Beat writes the entry once (Start's loop calls it).
func (h *Heartbeat) Beat(ctx context.Context) error {
	now := h.now().UTC()
	h.mu.Lock()
	e := h.entry
	e.LastHeartbeat = now
	e.Tasks = slices.SortedFunc(maps.Values(h.tasks), func(a, b inspect.WorkerTask) int {
		return a.Started.Compare(b.Started)
	})
	h.mu.Unlock()
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("worker registry: %w", err)
	}
	err = heartbeatScript.Run(ctx, h.rdb, []string{rkeys.Workers(), rkeys.WorkersBeats()},
		e.ID, b, now.UnixMilli(), inspect.KeepGone.Milliseconds(), inspect.MaxWorkerEntries, heartbeatDropMax).Err()
	if err != nil {
		return fmt.Errorf("worker registry: heartbeat: %w", err)
	}
	return nil
}

// heartbeatDropMax bounds the entries one heartbeat drops.
const heartbeatDropMax = 100

//go:embed lua/heartbeat.lua
var heartbeatLua embed.FS

// heartbeatScript writes the entry and drops the old ones
// (lua/heartbeat.lua).
var heartbeatScript = redisx.NewScripts("registry", heartbeatLua, nil).Script("lua/heartbeat.lua")
