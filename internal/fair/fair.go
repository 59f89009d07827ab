package fair

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/rkeys"
)

// Settings are one tenant's dispatch settings.
type Settings struct {
	// Weight is the tenant's share of dispatches while others have work
	// too (a tenant of weight 3 is served three times as often as one of
	// weight 1). Zero means 1.
	Weight float64
	// Concurrency caps the tenant's runs in flight on a queue, fleet-wide
	// (0: no cap).
	Concurrency int
}

func (s Settings) weight() float64 {
	if s.Weight <= 0 {
		return 1
	}
	return s.Weight
}

// Config is the fleet's tenant configuration: the named tenants and the
// settings every other tenant (the default tenant "" too) takes.
type Config struct {
	Named   map[string]Settings
	Default Settings
}

// Of returns the settings of tenant.
func (c Config) Of(tenant string) Settings {
	if s, ok := c.Named[tenant]; ok {
		return s
	}
	return c.Default
}

// DequeueArgs are the arguments DequeueLua takes after asynq's two: the
// lane prefix, the default weight and the default concurrency.
func (c Config) DequeueArgs(queue string) []any {
	return []any{rkeys.FairLanePrefix(queue), c.Default.weight(), c.Default.Concurrency}
}

// DequeueKeys are the keys DequeueLua takes after asynq's four.
func DequeueKeys(queue string) []string {
	return []string{rkeys.FairReady(queue), rkeys.FairCapped(queue), rkeys.FairInflight(queue),
		rkeys.FairConf(queue), rkeys.FairState(queue)}
}

// ReleaseKeys are the keys agentq_release takes for queue: in flight,
// capped, ready.
func ReleaseKeys(queue string) []string {
	return []string{rkeys.FairInflight(queue), rkeys.FairCapped(queue), rkeys.FairReady(queue)}
}

// Publish writes c's named tenants' settings to queue's settings hash,
// which the dequeue reads (the default settings travel with each dequeue).
// Every worker publishes at start; they should share one configuration.
func Publish(ctx context.Context, rdb redis.Cmdable, queue string, c Config) error {
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, rkeys.FairConf(queue))
		if len(c.Named) > 0 {
			vals := make([]any, 0, 2*len(c.Named))
			for name, s := range c.Named {
				vals = append(vals, name, strconv.FormatFloat(s.weight(), 'g', -1, 64)+" "+strconv.Itoa(s.Concurrency))
			}
			p.HSet(ctx, rkeys.FairConf(queue), vals...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fair: publish the tenants' settings of queue %s: %w", queue, err)
	}
	return nil
}

// Tenant is what `inspector tenants` shows of one tenant on one queue.
type Tenant struct {
	Queue  string `json:"queue"`
	Tenant string `json:"tenant"`
	// Pending counts its runs waiting in its lanes, by priority.
	Pending  int64            `json:"pending"`
	ByPrio   map[string]int64 `json:"pending_by_priority,omitempty"`
	InFlight int64            `json:"in_flight"`
	// Concurrency is its cap (0: none); Weight its share.
	Concurrency int     `json:"concurrency"`
	Weight      float64 `json:"weight"`
	// Capped is true while it waits at its cap.
	Capped bool `json:"capped"`
	// OldestWaiting is when its oldest waiting run became pending (nil:
	// none waits).
	OldestWaiting *time.Time `json:"oldest_waiting,omitempty"`
}

// Snapshot reads the tenants of queue: every tenant in its registry, and
// the default tenant (with asynq's pending list as its normal lane).
func Snapshot(ctx context.Context, rdb redis.UniversalClient, queue string, c Config) ([]Tenant, error) {
	names, err := rdb.SMembers(ctx, rkeys.FairTenants(queue)).Result()
	if err != nil {
		return nil, fmt.Errorf("fair: tenants of queue %s: %w", queue, err)
	}
	names = append(names, "")
	sort.Strings(names)
	names = dedupe(names)
	type reads struct {
		lens, oldest [3]*redis.Cmd
		inflight     *redis.StringCmd
		capped       *redis.FloatCmd
	}
	rs := make([]reads, len(names))
	codes := [3]string{"h", "n", "l"}
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range names {
			for j, code := range codes {
				key := rkeys.FairLane(queue, code, t)
				if t == "" && code == "n" {
					key = asynqcompat.PendingKey(queue)
				}
				rs[i].lens[j] = p.Do(ctx, "llen", key)
				rs[i].oldest[j] = p.Do(ctx, "lindex", key, -1)
			}
			rs[i].inflight = p.HGet(ctx, rkeys.FairInflight(queue), t)
			rs[i].capped = p.ZScore(ctx, rkeys.FairCapped(queue), t)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("fair: tenants of queue %s: %w", queue, err)
	}
	out := make([]Tenant, 0, len(names))
	for i, t := range names {
		s := c.Of(t)
		tn := Tenant{Queue: queue, Tenant: t, Concurrency: s.Concurrency, Weight: s.weight(), ByPrio: map[string]int64{}}
		var oldest []string
		for j, code := range codes {
			n, _ := rs[i].lens[j].Int64()
			tn.Pending += n
			if n > 0 {
				tn.ByPrio[[3]string{High, Normal, Low}[j]] = n
				if id, err := rs[i].oldest[j].Text(); err == nil {
					oldest = append(oldest, id)
				}
			}
			_ = code
		}
		tn.InFlight, _ = rs[i].inflight.Int64()
		tn.Capped = rs[i].capped.Err() == nil
		tn.OldestWaiting = oldestOf(ctx, rdb, queue, oldest)
		if tn.Pending == 0 && tn.InFlight == 0 && t != "" {
			continue
		}
		out = append(out, tn)
	}
	return out, nil
}

// oldestOf is the earliest pending_since of the runs ids (the oldest of
// each lane of a tenant); nil when none is known.
func oldestOf(ctx context.Context, rdb redis.UniversalClient, queue string, ids []string) *time.Time {
	var best *time.Time
	for _, id := range ids {
		ns, err := rdb.HGet(ctx, asynqcompat.TaskKey(queue, id), "pending_since").Int64()
		if err != nil {
			continue
		}
		at := time.Unix(0, ns).UTC()
		if best == nil || at.Before(*best) {
			best = &at
		}
	}
	return best
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

// Label is the name metrics give tenant: named tenants by name, the
// default tenant "default", every other "other" (bounded label series).
func (c Config) Label(tenant string) string {
	if tenant == "" {
		return "default"
	}
	if _, ok := c.Named[tenant]; ok {
		return tenant
	}
	return "other"
}

// ParseSettings reads a settings hash value ("<weight> <concurrency>").
func ParseSettings(v string) (Settings, bool) {
	w, c, ok := strings.Cut(v, " ")
	if !ok {
		return Settings{}, false
	}
	wf, err1 := strconv.ParseFloat(w, 64)
	ci, err2 := strconv.Atoi(c)
	return Settings{Weight: wf, Concurrency: ci}, err1 == nil && err2 == nil
}
