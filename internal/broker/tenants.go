package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// Tenant is what `inspector tenants` (and GET /api/v1/tenants, the
// console's Tenants page) shows of one tenant on one queue.
type Tenant struct {
	Queue string `json:"queue"`
	// Tenant is its name ("": the default tenant).
	Tenant string `json:"tenant"`
	// Pending counts its runs waiting in its lanes (the default tenant's
	// normal lane is asynq's pending list); ByPrio the same by priority
	// (only the priorities with runs).
	Pending int64            `json:"pending"`
	ByPrio  map[string]int64 `json:"pending_by_priority,omitempty"`
	// InFlight counts its runs in asynq's active list (by the lane their
	// task hash names; the dispatch counts only capped tenants').
	InFlight int64 `json:"in_flight"`
	// Concurrency is its cap (0: none); Weight its share.
	Concurrency int     `json:"concurrency"`
	Weight      float64 `json:"weight"`
	// Capped is true while it waits at its cap.
	Capped bool `json:"capped"`
	// OldestWaiting is when its oldest waiting run became pending (nil:
	// none waits, or it is not known).
	OldestWaiting *time.Time `json:"oldest_waiting,omitempty"`
}

// Waiting sums up a queue's tenants for `inspector stats`.
type Waiting struct {
	// Tenants counts the tenants with runs waiting or in flight (the
	// default tenant too).
	Tenants int
	// InLanes counts the runs waiting in tenants' lanes, beside asynq's
	// pending list (which asynq's own counts cover).
	InLanes int64
}

// prios are the priorities' codes, in the order they are served, and
// their names.
var prios = [3]struct{ code, name string }{{"h", High}, {"n", Normal}, {"l", Low}}

// laneKey is the list tenant's runs of priority code wait in on queue.
func laneKey(queue, code, tenant string) string {
	if tenant == "" && code == "n" {
		return PendingKey(queue)
	}
	return rkeys.FairLane(queue, code, tenant)
}

// Tenants reads the tenants of queue: every tenant of its registry with
// runs waiting or in flight, and the default tenant (always, with asynq's
// pending list as its normal lane), sorted by name, with c's settings.
// It costs four round trips whatever the number of tenants: the
// registry, one pipeline of the lanes' lengths and oldest runs, the capped
// set and asynq's active list, one pipeline of the active runs' tenants
// (bounded by the fleet's concurrency), and one of the oldest runs'
// pending_since.
func Tenants(ctx context.Context, rdb redis.Cmdable, queue string, c FairConfig) ([]Tenant, error) {
	out, err := read(ctx, rdb, queue, c, true)
	if err != nil {
		return nil, fmt.Errorf("fair: tenants of queue %s: %w", queue, err)
	}
	return out, nil
}

// CountTenants sums up the tenants of queue (Waiting): Snapshot without the
// oldest runs, two round trips.
func CountTenants(ctx context.Context, rdb redis.Cmdable, queue string) (Waiting, error) {
	ts, err := read(ctx, rdb, queue, FairConfig{}, false)
	if err != nil {
		return Waiting{}, fmt.Errorf("fair: tenants of queue %s: %w", queue, err)
	}
	var w Waiting
	for _, t := range ts {
		if t.Pending > 0 || t.InFlight > 0 {
			w.Tenants++
		}
		w.InLanes += t.Pending
		if t.Tenant == "" {
			w.InLanes -= t.ByPrio[Normal]
		}
	}
	return w, nil
}

// laneReads are a tenant's reads of the first pipeline.
type laneReads struct {
	lens   [3]*redis.IntCmd
	oldest [3]*redis.StringCmd
}

func read(ctx context.Context, rdb redis.Cmdable, queue string, c FairConfig, oldest bool) ([]Tenant, error) {
	names, err := rdb.SMembers(ctx, rkeys.FairTenants(queue)).Result()
	if err != nil {
		return nil, err
	}
	names = append(names, "")
	sort.Strings(names)
	names = dedupe(names)
	rs := make([]laneReads, len(names))
	var capped, active *redis.StringSliceCmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range names {
			for j, pr := range prios {
				key := laneKey(queue, pr.code, t)
				rs[i].lens[j] = p.LLen(ctx, key)
				if oldest {
					rs[i].oldest[j] = p.LIndex(ctx, key, -1)
				}
			}
		}
		capped = p.ZRange(ctx, rkeys.FairCapped(queue), 0, -1)
		active = p.LRange(ctx, ActiveKey(queue), 0, -1)
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, err
	}
	counts, err := activeCounts(ctx, rdb, queue, active.Val())
	if err != nil {
		return nil, err
	}
	isCapped := make(map[string]bool, len(capped.Val()))
	for _, t := range capped.Val() {
		isCapped[t] = true
	}
	out := make([]Tenant, 0, len(names))
	var oldestIDs [][]string
	for i, t := range names {
		s := c.Of(t)
		tn := Tenant{Queue: queue, Tenant: t, Concurrency: s.Concurrency, Weight: s.weight(), ByPrio: map[string]int64{},
			InFlight: counts[t], Capped: isCapped[t]}
		var ids []string
		for j, pr := range prios {
			n := rs[i].lens[j].Val()
			tn.Pending += n
			if n > 0 {
				tn.ByPrio[pr.name] = n
				if oldest {
					if id, err := rs[i].oldest[j].Result(); err == nil {
						ids = append(ids, id)
					}
				}
			}
		}
		if tn.Pending == 0 && tn.InFlight == 0 && !tn.Capped && t != "" {
			continue
		}
		out = append(out, tn)
		oldestIDs = append(oldestIDs, ids)
	}
	if oldest {
		if err := readOldest(ctx, rdb, queue, out, oldestIDs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// activeCounts counts the runs of asynq's active list ids by the tenant
// their task hash names (none: the default tenant), in one pipeline: the
// active list is bounded by the fleet's concurrency.
func activeCounts(ctx context.Context, rdb redis.Cmdable, queue string, ids []string) (map[string]int64, error) {
	counts := map[string]int64{}
	if len(ids) == 0 {
		return counts, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, TaskKey(queue, id), FieldTenant)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, err
	}
	for _, c := range cmds {
		counts[c.Val()]++ // "" for none: the default tenant
	}
	return counts, nil
}

// readOldest sets each tenant's OldestWaiting: the earliest pending_since
// of the oldest run of each of its lanes (ids[i] for ts[i]), in one
// pipeline.
func readOldest(ctx context.Context, rdb redis.Cmdable, queue string, ts []Tenant, ids [][]string) error {
	cmds := make([][]*redis.StringCmd, len(ts))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range ts {
			for _, id := range ids[i] {
				cmds[i] = append(cmds[i], p.HGet(ctx, TaskKey(queue, id), "pending_since"))
			}
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return err
	}
	for i := range ts {
		for _, cmd := range cmds[i] {
			ns, err := cmd.Int64()
			if err != nil {
				continue
			}
			at := time.Unix(0, ns).UTC()
			if ts[i].OldestWaiting == nil || at.Before(*ts[i].OldestWaiting) {
				ts[i].OldestWaiting = &at
			}
		}
	}
	return nil
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
