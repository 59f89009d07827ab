package webhook

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redact"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// MaxScan bounds how many tasks Statuses and Retry look at (the due,
// leased and given-up sets, each up to MaxScan).
const MaxScan = 10000

// Status is one webhook's deliveries, as `inspector webhooks` shows them.
type Status struct {
	Name string `json:"name"`
	// URL is the webhook's URL, redacted (no userinfo, no query), when the
	// config is known.
	URL string `json:"url,omitempty"`
	// Pending counts the deliveries still to make (due, waiting for a
	// retry, or being made); Failing those among them that have failed at
	// least once; GivenUp the deliveries given up after max_age.
	Pending int `json:"pending"`
	Failing int `json:"failing"`
	GivenUp int `json:"given_up"`
	// LastError is the webhook's last failure and LastErrorAt when it was
	// (zero: none); LastOKAt is its last delivery.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	LastOKAt    time.Time `json:"last_ok_at,omitzero"`
	// NextTry is when the next of its pending deliveries is due (zero:
	// none pending).
	NextTry time.Time `json:"next_try,omitzero"`
	// Truncated is true when there were more than MaxScan tasks to look at:
	// the counts are a lower bound.
	Truncated bool `json:"truncated,omitempty"`
}

// FailingNow reports whether the webhook's last outcome was a failure.
func (s Status) FailingNow() bool { return !s.LastErrorAt.IsZero() && s.LastErrorAt.After(s.LastOKAt) }

// tasksWithDeliveries lists the tasks in the due, leased and given-up sets
// (at most MaxScan of each), and whether any set had more.
func tasksWithDeliveries(ctx context.Context, rdb redis.UniversalClient) ([]string, bool, error) {
	var cmds []*redis.StringSliceCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range []string{rkeys.WebhooksDue(), rkeys.WebhooksLeased(), rkeys.WebhooksGivenUp()} {
			cmds = append(cmds, p.ZRange(ctx, k, 0, MaxScan))
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("webhooks: list tasks: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	truncated := false
	for _, c := range cmds {
		ids := c.Val()
		if len(ids) > MaxScan {
			ids, truncated = ids[:MaxScan], true
		}
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out, truncated, nil
}

// deliveries reads the deliveries hashes of ids (field -> JSON per task).
func deliveries(ctx context.Context, rdb redis.UniversalClient, ids []string) ([]map[string]string, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, rkeys.TaskHooks(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: read deliveries: %w", err)
	}
	out := make([]map[string]string, len(ids))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// Statuses reports every webhook of hooks (and any other that has
// deliveries), sorted by name.
func Statuses(ctx context.Context, rdb redis.UniversalClient, hooks map[string]Hook) ([]Status, error) {
	by := map[string]*Status{}
	get := func(name string) *Status {
		s, ok := by[name]
		if !ok {
			s = &Status{Name: name}
			if h, ok := hooks[name]; ok {
				s.URL = redact.URL(h.URL)
			}
			by[name] = s
		}
		return s
	}
	for name := range hooks {
		get(name)
	}
	ids, truncated, err := tasksWithDeliveries(ctx, rdb)
	if err != nil {
		return nil, err
	}
	all, err := deliveries(ctx, rdb, ids)
	if err != nil {
		return nil, err
	}
	for _, m := range all {
		for f, raw := range m {
			_, name, ok := splitField(f)
			var dl Delivery
			if !ok || json.Unmarshal([]byte(raw), &dl) != nil {
				continue
			}
			s := get(name)
			if dl.GivenUp != 0 {
				s.GivenUp++
				continue
			}
			s.Pending++
			if dl.Attempts > 0 {
				s.Failing++
			}
			if next := time.UnixMilli(dl.Next); s.NextTry.IsZero() || next.Before(s.NextTry) {
				s.NextTry = next
			}
		}
	}
	st, err := rdb.HGetAll(ctx, rkeys.WebhooksStatus()).Result()
	if err != nil {
		return nil, fmt.Errorf("webhooks: read status: %w", err)
	}
	for k, v := range st {
		name, kind, ok := cutLast(k, ":")
		if !ok {
			continue
		}
		s := get(name)
		switch kind {
		case "ok":
			var ms int64
			if _, err := fmt.Sscan(v, &ms); err == nil {
				s.LastOKAt = time.UnixMilli(ms).UTC()
			}
		case "error":
			var le lastError
			if json.Unmarshal([]byte(v), &le) == nil {
				s.LastError, s.LastErrorAt = le.Error, time.UnixMilli(le.At).UTC()
			}
		}
	}
	out := make([]Status, 0, len(by))
	for _, s := range by {
		s.Truncated = truncated
		if !s.NextTry.IsZero() {
			s.NextTry = s.NextTry.UTC()
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

//go:embed lua/retry.lua lua/repair.lua
var statusLua embed.FS

// The scripts of Retry and Repair, the Delivery JSON's names (J) rendered
// from Go.
var (
	statusScripts = redisx.NewScripts("webhook", statusLua, map[string]map[string]string{
		"J": redisx.Quoted("given_up", "first", "next"),
	})
	retryScript  = statusScripts.Script("lua/retry.lua")
	repairScript = statusScripts.Script("lua/repair.lua")
)

// Retry makes every pending or given-up delivery to the webhook name due
// now (a given-up one with a fresh max_age) and returns how many.
func Retry(ctx context.Context, rdb redis.UniversalClient, name string, now time.Time) (int, error) {
	ids, _, err := tasksWithDeliveries(ctx, rdb)
	if err != nil {
		return 0, err
	}
	all, err := deliveries(ctx, rdb, ids)
	if err != nil {
		return 0, err
	}
	total := 0
	for i, m := range all {
		var fields []any
		for f := range m {
			if _, n, ok := splitField(f); ok && n == name {
				fields = append(fields, f)
			}
		}
		if len(fields) == 0 {
			continue
		}
		// The deliveries hash is in the task's slot and the due set in
		// {webhooks}: on a Redis Cluster they are two steps.
		n, err := retryScript.Run(ctx, rdb, []string{rkeys.TaskHooks(ids[i])},
			append([]any{ids[i], now.UnixMilli()}, fields...)...).Int()
		if err != nil {
			return total, fmt.Errorf("webhooks: retry %s of %s: %w", name, ids[i], err)
		}
		if n > 0 {
			if err := rdb.ZAddArgs(ctx, rkeys.WebhooksDue(), redis.ZAddArgs{LT: true, Members: []redis.Z{{Score: float64(now.UnixMilli()), Member: ids[i]}}}).Err(); err != nil {
				return total, fmt.Errorf("webhooks: retry %s of %s: %w", name, ids[i], err)
			}
		}
		total += n
	}
	return total, nil
}

// Repair, on a Redis Cluster, makes due every task whose outbox holds
// entries but which is in neither the due nor the leased set (the store's
// second step after the record write was lost), scanning at most
// repairPages pages of each master per pass and going on from there the
// next time. It returns how many tasks it made due. One worker of the
// fleet repairs per RepairEvery (Start's fleet claim).
func (d *Deliverer) Repair(ctx context.Context) (int, error) {
	cc, ok := d.rdb.(*redis.ClusterClient)
	if !ok {
		return 0, nil
	}
	prefix, suffix, _ := strings.Cut(rkeys.TaskOutbox("\x00"), "\x00")
	var mu sync.Mutex
	var ids []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		addr := c.Options().Addr
		mu.Lock()
		cursor := d.cursors[addr]
		mu.Unlock()
		for range repairPages {
			keys, next, err := c.Scan(ctx, cursor, rkeys.TaskOutbox("*"), 1000).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				if id, ok := strings.CutPrefix(k, prefix); ok {
					if id, ok := strings.CutSuffix(id, suffix); ok {
						ids = append(ids, id)
					}
				}
			}
			mu.Unlock()
			cursor = next
			if cursor == 0 {
				break
			}
		}
		mu.Lock()
		d.cursors[addr] = cursor
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("webhooks: repair: %w", err)
	}
	made := 0
	for _, id := range ids {
		n, err := repairScript.Run(ctx, d.rdb, []string{rkeys.WebhooksDue(), rkeys.WebhooksLeased()}, id, d.o.Now().UnixMilli()).Int()
		if err != nil {
			return made, fmt.Errorf("webhooks: repair: %w", err)
		}
		made += n
	}
	return made, nil
}

// repairPages bounds the SCAN pages (of 1000 keys) of one master per
// repair pass.
const repairPages = 100
