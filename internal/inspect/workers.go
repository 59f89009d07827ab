package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
)

// The worker registry's timings: package worker's heartbeat writes each
// worker's entry every HeartbeatInterval; a worker whose last heartbeat is
// older than GoneAfter is gone (killed, frozen or cut off from Redis); its
// entry is dropped KeepGone after its last heartbeat, and the registry
// keeps at most MaxWorkerEntries entries (the oldest heartbeats go first).
const (
	HeartbeatInterval = 5 * time.Second
	GoneAfter         = 3 * HeartbeatInterval
	KeepGone          = time.Hour
	MaxWorkerEntries  = 1000
)

// Worker states.
const (
	WorkerAlive = "alive"
	WorkerGone  = "gone"
)

// asynq's lease recovery: asynq's recoverer, which every worker serving
// the queue runs once a minute, takes back the tasks whose lease expired
// at least leaseSkew ago (asynq's recoverer.go).
const (
	leaseSkew       = 30 * time.Second
	recoverInterval = time.Minute
)

// WorkerEntry is one worker process as its heartbeat writes it in the
// registry (rkeys.Workers), and the fields `inspector workers --json` and
// GET /api/v1/workers show of it.
type WorkerEntry struct {
	// ID names the process: "host:pid:random".
	ID      string `json:"id"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	// Queues are the queues it serves with their priorities.
	Queues      map[string]int `json:"queues"`
	Concurrency int            `json:"concurrency"`
	Started     time.Time      `json:"started"`
	// LastHeartbeat is when it last wrote its entry.
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Tasks are the tasks it ran at its last heartbeat, oldest first;
	// for a gone worker, Workers keeps only those it still holds (see
	// markOrphans).
	Tasks []WorkerTask `json:"tasks"`
}

// WorkerTask is a task in flight on a worker.
type WorkerTask struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	Queue string `json:"queue"`
	// Delivery is asynq's ID of the delivery when it is not the task's
	// (the key of its lease).
	Delivery string    `json:"delivery,omitempty"`
	Started  time.Time `json:"started"`
	// RunningMS is how long it has run: until now on a live worker, until
	// the last heartbeat on a gone one (filled by Workers).
	RunningMS int64 `json:"running_ms"`
	// Orphaned (a gone worker's task that asynq still holds leased) and
	// when its lease expires; asynq's lease recovery puts it back on its
	// queue between RecoveryFrom and RecoveryBy (while a worker serves the
	// queue). Filled by Workers.
	Orphaned       bool       `json:"orphaned"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	RecoveryFrom   *time.Time `json:"recovery_from,omitempty"`
	RecoveryBy     *time.Time `json:"recovery_by,omitempty"`
}

// WorkerInfo is a worker as the operator's views show it: its entry, its
// state and, when gone, its orphaned tasks.
type WorkerInfo struct {
	WorkerEntry
	// State is WorkerAlive or WorkerGone.
	State string `json:"state"`
	// HeartbeatAgeMS is how long ago its last heartbeat was.
	HeartbeatAgeMS int64 `json:"heartbeat_age_ms"`
	// Orphaned counts its orphaned tasks (a gone worker's).
	Orphaned int `json:"orphaned"`
}

// Workers lists the worker registry as of now: live workers first, then
// gone ones, each group by host and pid. An entry older than KeepGone is
// left out (the next heartbeat of any worker drops it). A gone worker's
// tasks are only those it still holds (markOrphans: leased by it, and, by
// their record, still running on it), each Orphaned, with its lease
// expiry and recovery window: not its last heartbeat's list. It reads one
// hash (at most MaxWorkerEntries entries) and, for gone workers' tasks, a
// ZSCORE and an HMGET each in one pipeline.
func Workers(ctx context.Context, rdb redis.UniversalClient, now time.Time) ([]WorkerInfo, error) {
	ws, _, err := workers(ctx, rdb, now)
	return ws, err
}

// LostTask is a gone worker's task that asynq's lease recovery took back
// (the worker no longer holds its lease) while the task's record still
// says it runs on that worker: Worker is the record's (the events'
// worker, "host:pid").
type LostTask struct{ ID, Worker string }

// Recovered lists, as of now, the gone workers' tasks that asynq's lease
// recovery took back while their records still say they run on them (see
// record.Store.Recovered, which puts such a record back to pending).
func Recovered(ctx context.Context, rdb redis.UniversalClient, now time.Time) ([]LostTask, error) {
	_, lost, err := workers(ctx, rdb, now)
	return lost, err
}

// workers is Workers' list and Recovered's.
func workers(ctx context.Context, rdb redis.UniversalClient, now time.Time) ([]WorkerInfo, []LostTask, error) {
	raw, err := rdb.HGetAll(ctx, rkeys.Workers()).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("inspect: workers: %w", err)
	}
	out := make([]WorkerInfo, 0, len(raw))
	for _, v := range raw {
		var e WorkerEntry
		if json.Unmarshal([]byte(v), &e) != nil || now.Sub(e.LastHeartbeat) > KeepGone {
			continue
		}
		out = append(out, workerInfo(e, now))
	}
	lost, err := markOrphans(ctx, rdb, out)
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.State != b.State {
			return a.State == WorkerAlive
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.ID < b.ID
	})
	return out, lost, nil
}

// Slots sums the slots of the live workers of the registry as of now
// (Workers): total, their concurrency; busy, the tasks in flight at their
// last heartbeat (at most HeartbeatInterval old).
func Slots(ctx context.Context, rdb redis.UniversalClient, now time.Time) (busy, total int, err error) {
	ws, err := Workers(ctx, rdb, now)
	if err != nil {
		return 0, 0, err
	}
	for _, w := range ws {
		if w.State == WorkerAlive {
			busy += len(w.Tasks)
			total += w.Concurrency
		}
	}
	return busy, total, nil
}

// workerInfo is e's state as of now, with its tasks' run times.
func workerInfo(e WorkerEntry, now time.Time) WorkerInfo {
	w := WorkerInfo{WorkerEntry: e, State: WorkerAlive, HeartbeatAgeMS: max(0, now.Sub(e.LastHeartbeat).Milliseconds())}
	until := now
	if now.Sub(e.LastHeartbeat) > GoneAfter {
		w.State, until = WorkerGone, e.LastHeartbeat
	}
	if w.Tasks == nil {
		w.Tasks = []WorkerTask{}
	}
	for i := range w.Tasks {
		w.Tasks[i].RunningMS = max(0, until.Sub(w.Tasks[i].Started).Milliseconds())
	}
	return w
}

// leaseDuration is asynq's lease (its rdb.LeaseDuration): a live holder
// extends its deliveries' leases to now + leaseDuration every 5 s, so a
// gone worker's leases expire at most leaseDuration + HeartbeatInterval
// after its last registry heartbeat (leaseHeld allows another interval).
const leaseDuration = 30 * time.Second

// goneTask is what markOrphans reads of a gone worker's task: its lease
// and its record's state and worker.
type goneTask struct {
	w, t   int
	lease  *redis.FloatCmd
	record *redis.SliceCmd
}

// markOrphans settles the in-flight lists of gone workers, which their
// last heartbeat wrote: a gone worker keeps only the tasks it still holds
// — asynq still holds the task leased, with a lease the dead worker could
// have set (not one a later delivery took), and the task's record, when
// it names the worker running it, names this one while active. Those are
// orphaned until asynq's lease recovery takes them back; the others ended
// or run elsewhere, and are dropped from its list; of those, the ones
// whose record is still active on the gone worker are returned (lost:
// asynq took them back, the record does not know yet). One pipeline: a
// ZSCORE and an HMGET a task.
func markOrphans(ctx context.Context, rdb redis.UniversalClient, ws []WorkerInfo) ([]LostTask, error) {
	var refs []goneTask
	pipe := rdb.Pipeline()
	for i := range ws {
		if ws[i].State != WorkerGone {
			continue
		}
		for j, t := range ws[i].Tasks {
			id := t.Delivery
			if id == "" {
				id = t.ID
			}
			refs = append(refs, goneTask{w: i, t: j, lease: pipe.ZScore(ctx, broker.LeaseKey(t.Queue), id),
				record: pipe.HMGet(ctx, rkeys.Task(t.ID), record.FieldState, record.FieldWorker)})
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("inspect: workers: leases: %w", err)
	}
	held := make(map[[2]int]bool, len(refs))
	var lost []LostTask
	for _, r := range refs {
		w := &ws[r.w]
		lease, ok, runs := leaseHeld(w.WorkerEntry, r)
		if !ok {
			if runs {
				lost = append(lost, LostTask{ID: w.Tasks[r.t].ID, Worker: eventsWorker(w.WorkerEntry)})
			}
			continue
		}
		t := &w.Tasks[r.t]
		from, by := lease.Add(leaseSkew), lease.Add(leaseSkew+recoverInterval)
		t.Orphaned, t.LeaseExpiresAt, t.RecoveryFrom, t.RecoveryBy = true, &lease, &from, &by
		w.Orphaned++
		held[[2]int{r.w, r.t}] = true
	}
	for i := range ws {
		if ws[i].State == WorkerGone {
			kept := ws[i].Tasks[:0]
			for j, t := range ws[i].Tasks {
				if held[[2]int{i, j}] {
					kept = append(kept, t)
				}
			}
			ws[i].Tasks = kept
		}
	}
	return lost, nil
}

// leaseHeld reports whether the gone worker e still holds its task r
// read, and its lease's expiry; runs: the task's record says it is
// active on e (whether e holds its lease or not).
func leaseHeld(e WorkerEntry, r goneTask) (lease time.Time, held, runs bool) {
	mine := true
	if v, err := r.record.Result(); err == nil && len(v) == 2 {
		state, _ := v[0].(string)
		by, _ := v[1].(string)
		// not running (it waits, or ended), or another worker's delivery runs it
		mine = (state == "" || state == string(record.StateActive)) && (by == "" || by == eventsWorker(e))
		runs = state == string(record.StateActive) && by == eventsWorker(e)
	}
	score, err := r.lease.Result()
	if err != nil { // redis.Nil: no longer leased (recovered, or it ended)
		return time.Time{}, false, runs
	}
	lease = time.Unix(int64(score), 0).UTC()
	if lease.After(e.LastHeartbeat.Add(leaseDuration + 2*HeartbeatInterval)) {
		return time.Time{}, false, runs // a lease set after the worker died: another delivery's
	}
	return lease, mine, runs
}

// eventsWorker is how e's events and the task records name it
// ("host:pid", record.FieldWorker).
func eventsWorker(e WorkerEntry) string { return e.Host + ":" + strconv.Itoa(e.PID) }
