// Package inspect gathers the operator's views that more than one front end
// shows: queue, dead-letter, restart and breaker counts (`inspector stats`,
// the console's Overview and its sampler) and the configured agents'
// breaker references (`GET /api/v1/agents`, the console's Agents page)
// and the schedules' status (Schedules).
package inspect

import (
	"context"
	"fmt"
	"sort"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/restart"
)

// Stats is `inspector stats --json` (fields may be added, never renamed).
type Stats struct {
	Queues          []QueueStats     `json:"queues"`
	DeadLetters     int64            `json:"dead_letters"`
	DeadLetterAgent map[string]int64 `json:"dead_letters_by_agent"`
	DeadLetterClass map[string]int64 `json:"dead_letters_by_class"`
	RestartsPending int64            `json:"restarts_pending"`
	BreakersOpen    int              `json:"breakers_open"`
	Breakers        int              `json:"breakers"`
}

// QueueStats is one asynq queue's size, from asynq's Inspector and the
// queue's tenants (fair dispatch).
type QueueStats struct {
	Queue string `json:"queue"`
	// Pending counts the runs waiting for a worker: asynq's pending list
	// and the runs waiting in tenants' lanes (PendingInLanes of them).
	Pending        int   `json:"pending"`
	PendingInLanes int64 `json:"pending_in_lanes"`
	// Tenants counts the tenants with runs waiting or in flight (the
	// default tenant too).
	Tenants   int `json:"tenants"`
	Active    int `json:"active"`
	Scheduled int `json:"scheduled"`
	Retry     int `json:"retry"`
	Processed int `json:"processed_today"`
	Failed    int `json:"failed_today"`
	// Paused: the queue is paused (`inspector queue pause`): its tasks
	// are held, none starts.
	Paused bool `json:"paused"`
}

// Queues reads every asynq queue's sizes, today's counts and its tenants'
// lanes (broker.CountTenants), sorted by name. A queue asynq has never seen is not
// listed.
func Queues(rdb redis.UniversalClient) ([]QueueStats, error) {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	qs, err := insp.Queues()
	if err != nil {
		return nil, fmt.Errorf("inspect: queues: %w", err)
	}
	sort.Strings(qs)
	out := make([]QueueStats, 0, len(qs))
	for _, q := range qs {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			return nil, fmt.Errorf("inspect: queue %s: %w", q, err)
		}
		w, err := broker.CountTenants(context.Background(), rdb, q)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		out = append(out, QueueStats{Queue: q, Pending: info.Pending + int(w.InLanes), PendingInLanes: w.InLanes, Tenants: w.Tenants,
			Active: info.Active, Scheduled: info.Scheduled, Retry: info.Retry, Processed: info.Processed, Failed: info.Failed,
			Paused: info.Paused})
	}
	return out, nil
}

// Collect reads the whole of Stats. breakers lists the breakers (nil: a
// plain breaker.New(rdb)); list, when not nil, receives the
// breaker snapshots it read, for callers that show them too.
func Collect(ctx context.Context, rdb redis.UniversalClient, breakers *breaker.Breakers) (Stats, []breaker.Snapshot, error) {
	st := Stats{Queues: []QueueStats{}}
	var err error
	if st.Queues, err = Queues(rdb); err != nil {
		return st, nil, err
	}
	dlq := deadletter.NewStore(rdb)
	if st.DeadLetters, err = dlq.Count(ctx); err != nil {
		return st, nil, err
	}
	if st.DeadLetterAgent, st.DeadLetterClass, err = dlq.CountBy(ctx); err != nil {
		return st, nil, err
	}
	if st.RestartsPending, err = restart.NewScheduler(rdb, nil).Count(ctx); err != nil {
		return st, nil, err
	}
	if breakers == nil {
		breakers = breaker.New(rdb)
	}
	bl, err := breakers.List(ctx)
	if err != nil {
		return st, nil, err
	}
	st.Breakers = len(bl)
	for _, b := range bl {
		if b.State == breaker.StateOpen {
			st.BreakersOpen++
		}
	}
	return st, bl, nil
}

// AgentRefs names cfg's agents (sorted) with their breaker keys, fallbacks
// and whether they have a health probe, for breaker.Breakers.Summaries.
func AgentRefs(cfg *config.Config) []AgentRef {
	return AgentRefsOf(cfg, cfg.AgentNames())
}

// AgentRefsOf is AgentRefs for the agents called names, in that order; a
// name cfg does not configure (a Go-function agent registered in code) has
// the settings config.Config.Agent gives it. It is the one builder of the
// `GET /api/v1/agents` view: the HTTP API, the console and the worker's
// ops listener all list agents through it.
func AgentRefsOf(cfg *config.Config, names []string) []AgentRef {
	refs := make([]AgentRef, 0, len(names))
	for _, name := range names {
		a, _ := cfg.Agent(name)
		ref := AgentRef{Name: name, BreakerKey: a.BreakerKey, Fallback: a.Fallback, Probe: a.Health != nil}
		if l := a.Limits; l != nil {
			ref.LimitKey = l.Key
			ref.Limits = limit.Config{Requests: l.Requests, Tokens: l.Tokens, Per: l.Per, Concurrency: l.Concurrency}
		}
		ref.Budget = BudgetOf(budget.Agent, name, a.Budget)
		refs = append(refs, ref)
	}
	return refs
}

// BreakerKeys returns the breaker keys of cfg's agents (an agent's
// breaker_key, its name by default), sorted, without repeats: the keys an
// operator may trip or reset besides those already in Redis
// (breaker.Breakers.CheckKey).
func BreakerKeys(cfg *config.Config) []string {
	var keys []string
	for _, ref := range AgentRefs(cfg) {
		keys = append(keys, ref.BreakerKey)
	}
	return sortedUnique(keys)
}

// LimitKeys returns the keys a provider's pause can be on for cfg's
// agents, sorted, without repeats: each agent's limits key and the breaker
// key of each HTTP or exec agent without limits (its provider's replies
// pause that key fleet-wide too: PauseOnlyKeys) — the keys `inspector limits resume`
// knows besides those in Redis (limit.Limiter.CheckKey).
func LimitKeys(cfg *config.Config) []string {
	var keys []string
	for _, ref := range AgentRefs(cfg) {
		if ref.LimitKey != "" {
			keys = append(keys, ref.LimitKey)
		}
	}
	for k := range PauseOnlyKeys(cfg) {
		keys = append(keys, k)
	}
	return sortedUnique(keys)
}

// PauseOnlyKeys maps the breaker key of each pause-only agent of cfg
// (PauseOnly) to those agents (sorted): a provider's reply saying the key
// is exhausted pauses that key fleet-wide, as it pauses a limits key,
// though no limits are counted on it.
func PauseOnlyKeys(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	for _, name := range cfg.AgentNames() {
		a, _ := cfg.Agent(name)
		if PauseOnly(a) {
			out[a.BreakerKey] = append(out[a.BreakerKey], name)
		}
	}
	return out
}

// PauseOnly reports whether a (an agent as config.Config.Agent resolves
// it) has a pause-only key: it configures no limits, and its runner
// reports its provider's replies — an HTTP agent's headers, an exec
// agent's ActionResponse retry_after and headers — so a reply saying the
// key is exhausted pauses its breaker key fleet-wide.
func PauseOnly(a config.Agent) bool {
	return a.Limits == nil && (a.HTTP != nil || a.Exec != nil)
}

func sortedUnique(ss []string) []string {
	sort.Strings(ss)
	out := ss[:0]
	for i, s := range ss {
		if s != "" && (i == 0 || s != ss[i-1]) {
			out = append(out, s)
		}
	}
	return out
}
