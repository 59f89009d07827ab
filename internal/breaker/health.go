package breaker

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// Health is an agent's (a breaker key's) health, derived from its breaker.
// The names are stable (JSON, /api/v1/agents).
type Health string

// Health values.
const (
	// HealthHealthy: closed, no consecutive failures.
	HealthHealthy Health = "healthy"
	// HealthDegraded: closed with failures below the threshold, or half-open.
	HealthDegraded Health = "degraded"
	// HealthUnhealthy: open.
	HealthUnhealthy Health = "unhealthy"
)

// HealthOf derives the health from a state and its consecutive failures.
func HealthOf(state State, consecutiveFailures int) Health {
	switch state {
	case StateOpen:
		return HealthUnhealthy
	case StateHalfOpen:
		return HealthDegraded
	}
	if consecutiveFailures > 0 {
		return HealthDegraded
	}
	return HealthHealthy
}

// Snapshot is one breaker as stored in Redis. Its JSON is the stable
// breaker shape of DESIGN.md §3 (fields may be added, never renamed).
//
// State is the stored state: an OPEN breaker past its open_until still reads
// "open" until the next Allow moves it to half_open. SuccessCount and
// LastSuccessAt lag by up to one flush interval (happy-path successes are
// batched in each process). OpenUntil is set only while open.
type Snapshot struct {
	Key                 string     `json:"key"`
	State               State      `json:"state"`
	Health              Health     `json:"health"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	FailureCount        int64      `json:"failure_count"`
	SuccessCount        int64      `json:"success_count"`
	OpenUntil           *time.Time `json:"open_until"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	Generation          int64      `json:"generation"`
	TrialsInFlight      int        `json:"trials_in_flight"`
	// Rate mode: the counted calls and failures in the current window,
	// and the distinct tasks whose calls failed in it (0 in consecutive
	// mode). Successes batched in a process arrive within a flush.
	WindowCalls    int64 `json:"window_calls"`
	WindowFailures int64 `json:"window_failures"`
	FailingTasks   int64 `json:"failing_tasks"`
}

// snapshotScript reads a breaker (lua/snapshot.lua documents its KEYS,
// ARGV and replies).
var snapshotScript = windowScript("snapshot.lua")

// Get returns the snapshot of the breaker of key; a key never used reads as
// a healthy closed breaker with zero counts.
func (b *Breakers) Get(ctx context.Context, key string) (Snapshot, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	res, err := snapshotScript.Run(ctx, b.rdb, breakerKeys(key), b.nowArg()).Result()
	if err != nil {
		return Snapshot{}, b.wrap(key, "get", err)
	}
	return parseSnapshot(key, res)
}

// Health returns the snapshot of key; it is Get under the name the agents
// view uses.
func (b *Breakers) Health(ctx context.Context, key string) (Snapshot, error) {
	return b.Get(ctx, key)
}

// List returns the snapshot of every key in the breaker index, sorted by key,
// in two round trips.
func (b *Breakers) List(ctx context.Context) ([]Snapshot, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	keys, err := b.rdb.SMembers(ctx, rkeys.Breakers()).Result()
	if err != nil {
		return nil, b.wrap("*", "list", err)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return []Snapshot{}, nil
	}
	calls := make([]redisx.Call, len(keys))
	now := b.nowArg()
	for i, k := range keys {
		calls[i] = redisx.Call{Script: snapshotScript, Keys: breakerKeys(k), Args: []any{now}}
	}
	rs := redisx.Pipelined(ctx, b.rdb, calls)
	out := make([]Snapshot, 0, len(keys))
	for i, k := range keys {
		if rs[i].Err != nil {
			return nil, b.wrap("*", "list", rs[i].Err)
		}
		s, err := parseSnapshot(k, rs[i].Val)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSnapshot(key string, res any) (Snapshot, error) {
	a, ok := res.([]any)
	if !ok || len(a) != 5 {
		return Snapshot{}, fmt.Errorf("breaker %q: unexpected snapshot reply %#v", key, res)
	}
	flat, _ := a[0].([]any)
	trials, _ := a[1].(int64)
	wcalls, _ := a[2].(int64)
	wfails, _ := a[3].(int64)
	ntasks, _ := a[4].(int64)
	h := map[string]string{}
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		h[k] = v
	}
	num := func(f string) int64 { n, _ := strconv.ParseInt(h[f], 10, 64); return n }
	ts := func(f string) *time.Time {
		if n := num(f); n > 0 {
			t := time.UnixMilli(n)
			return &t
		}
		return nil
	}
	s := Snapshot{
		Key:                 key,
		State:               State(h[fieldState]),
		ConsecutiveFailures: int(num(fieldConsecutiveFailures)),
		FailureCount:        num(fieldFailureCount),
		SuccessCount:        num(fieldSuccessCount),
		LastFailureAt:       ts(fieldLastFailureAt),
		LastSuccessAt:       ts(fieldLastSuccessAt),
		Generation:          num(fieldGeneration),
		TrialsInFlight:      int(trials),
		WindowCalls:         wcalls,
		WindowFailures:      wfails,
		FailingTasks:        ntasks,
	}
	if s.State == "" {
		s.State = StateClosed
	}
	if s.State == StateOpen {
		s.OpenUntil = ts(fieldOpenUntil)
	}
	s.Health = HealthOf(s.State, s.ConsecutiveFailures)
	if s.Health == HealthHealthy && wfails > 0 {
		s.Health = HealthDegraded // rate mode: failures in the window
	}
	return s, nil
}
