// Package children is the children repair: the fleet's service that
// finishes what a crash cut in a children wait (see "Child tasks" in
// docs/DESIGN.md). A parent waiting for children is in the index
// rkeys.WaitingChildren (record.Store.SetChildren puts it there, scored
// with when to look); every RepairInterval one worker of the fleet looks
// at the parents that are due: it enqueues the children that do not
// exist (a spawn cut after the Waiting write), reports the ended children
// the parent has not heard of (a report cut after the child's end), and
// resumes the parent when its wait is complete but its run was not made
// pending (a resume cut between child_end.lua and the RunNow). A parent
// no longer waiting for children leaves the index; one whose look found
// nothing to finish is looked at again IdleBackoff intervals later.
package children

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// RepairInterval is how often the fleet runs the children repair (one
// worker per interval, by claim).
const RepairInterval = 30 * time.Second

// batch bounds how many due parents one repair looks at.
const batch = 100

// IdleBackoff is how much later than RepairInterval the repair looks
// again at a parent whose look found nothing to finish: a wait that goes
// well costs the repair one look per 5 minutes, not per interval.
const IdleBackoff = 10

// Options are a Repairer's.
type Options struct {
	// Holder is the repair claim's value (the worker's ID).
	Holder string
	// Interval is the repair's; zero: RepairInterval.
	Interval time.Duration
	// Logger; nil: slog.Default.
	Logger *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Repairer is the children repair, a service (Start, Stop).
type Repairer struct {
	*fleet.Every
	rdb    redis.UniversalClient
	client *tasks.Client
	rec    *record.Store
	log    *slog.Logger
	now    func() time.Time
	every  time.Duration
}

// New returns the children repair of the tasks client's Redis.
func New(rdb redis.UniversalClient, client *tasks.Client, rec *record.Store, o Options) *Repairer {
	if o.Interval <= 0 {
		o.Interval = RepairInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Repairer{rdb: rdb, client: client, rec: rec, log: o.Logger, now: o.Now, every: o.Interval}
	r.Every = fleet.One(rdb, o.Interval, fleet.Job{Key: rkeys.ChildrenRepairClaim(), Run: r.repair},
		fleet.Options{Holder: o.Holder, Delay: true})
	return r
}

// repair is one look at the due parents, logged.
func (r *Repairer) repair(ctx context.Context) {
	if _, err := r.Repair(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("children repair failed", "err", err)
	}
}

// Repair looks at the parents of the index that are due (at most a
// batch), and returns how many it looked at.
func (r *Repairer) Repair(ctx context.Context) (int, error) {
	now := r.now()
	ids, err := r.rdb.ZRangeByScore(ctx, rkeys.WaitingChildren(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: batch}).Result()
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if err := r.parent(ctx, id, now); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// parent repairs the children wait of parent id.
func (r *Repairer) parent(ctx context.Context, id string, now time.Time) error {
	f, err := r.rdb.HMGet(ctx, rkeys.Task(id), record.FieldState, record.FieldRun, record.FieldChildrenRun).Result()
	if err != nil {
		return err
	}
	state, _ := f[0].(string)
	if state != string(record.StateWaiting) || f[1] != f[2] {
		return r.rdb.ZRem(ctx, rkeys.WaitingChildren(), id).Err()
	}
	fixed, err := r.finish(ctx, id)
	if err != nil {
		r.log.Warn("children repair: a parent's children", "task_id", id, "err", err)
	}
	wait := r.every
	if !fixed && err == nil {
		wait *= IdleBackoff
	}
	next := now.Add(wait).UnixMilli()
	return r.rdb.ZAddXX(ctx, rkeys.WaitingChildren(), redis.Z{Score: float64(next), Member: id}).Err()
}

// finish spawns parent's children that have no record, reports the ended
// ones it has not heard of, then resumes it when its wait is complete;
// fixed says it found something to do.
func (r *Repairer) finish(ctx context.Context, parent string) (fixed bool, err error) {
	ends, err := r.rec.ChildEnds(ctx, parent)
	if err != nil {
		return false, err
	}
	var specs map[string][]byte
	for _, e := range ends {
		switch {
		case e.Recorded || (e.State != "" && !e.State.Terminal()):
			continue
		case e.State.Terminal():
			err = r.client.ReportChild(ctx, parent, e.ID)
		case specs == nil:
			if specs, err = r.specs(ctx, parent); err == nil {
				err = r.spawn(ctx, specs[e.ID])
			}
		default:
			err = r.spawn(ctx, specs[e.ID])
		}
		if err != nil {
			return true, err
		}
		fixed = true
	}
	return fixed, r.client.ReportChildEnd(ctx, parent, tasks.ChildEnd{})
}

// specs reads parent's child specs.
func (r *Repairer) specs(ctx context.Context, parent string) (map[string][]byte, error) {
	m, err := r.rec.ChildSpecs(ctx, parent)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

// spawn enqueues the child whose stored envelope is spec.
func (r *Repairer) spawn(ctx context.Context, spec []byte) error {
	env, err := tasks.Decode(spec)
	if err != nil {
		return err
	}
	return r.client.SpawnChild(ctx, env)
}
