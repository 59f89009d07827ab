package inspect

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/limit"
)

// AgentSummary is one agent's health: the /api/v1/agents view of both the
// HTTP API and the worker's ops endpoints. Fields may be added, never
// renamed.
type AgentSummary struct {
	Agent string `json:"agent"`
	breaker.Snapshot
	// Fallback lists the agent's fallback agents, in order (omitted when
	// none).
	Fallback []string `json:"fallback,omitempty"`
	// Probe is the agent's health-probe view, shared by every worker: the
	// last probe's time, outcome, latency and error, and the success rate
	// over the recent probes. Omitted for an agent without a probe; null
	// fields until its first probe.
	Probe *breaker.ProbeStatus `json:"probe,omitempty"`
	// Limits is the agent's provider limits: the configuration and the
	// fleet-wide usage of its limits key (see limit.Status). Omitted for an
	// agent without limits.
	Limits *limit.Status `json:"limits,omitempty"`
	// Budget is the agent's budget: its configuration, what its window
	// used and has left (see budget.Status). Omitted for an agent without
	// a budget.
	Budget *budget.Status `json:"budget,omitempty"`
}

// AgentRef names an agent for Summaries.
type AgentRef struct {
	Name       string
	BreakerKey string
	Fallback   []string
	// Probe is true for an agent with a health probe.
	Probe bool
	// LimitKey is the agent's limits key ("": no limits), Limits its
	// configured limits (shown instead of those registered in Redis).
	LimitKey string
	Limits   limit.Config
	// Budget is the agent's budget (nil: none).
	Budget *budget.Budget
}

// Summaries reads the breaker in b (and, for an agent with a probe, the
// probe view, for an agent with limits its limits' status, and for an
// agent with a budget its budget's, from rdb) of each agent, in order.
func Summaries(ctx context.Context, rdb redis.UniversalClient, b *breaker.Breakers, agents []AgentRef) ([]AgentSummary, error) {
	out := make([]AgentSummary, 0, len(agents))
	for _, a := range agents {
		snap, err := b.Get(ctx, a.BreakerKey)
		if err != nil {
			return nil, err
		}
		sum := AgentSummary{Agent: a.Name, Snapshot: snap, Fallback: a.Fallback}
		if a.Probe {
			st, _, err := b.ProbeStatus(ctx, a.BreakerKey)
			if err != nil {
				return nil, err
			}
			sum.Probe = &st
		}
		if a.LimitKey != "" {
			st, err := limit.New(rdb).Status(ctx, a.LimitKey)
			if err != nil {
				return nil, err
			}
			st.SetConfig(a.Limits)
			sum.Limits = &st
		}
		if a.Budget != nil {
			st, err := budget.New(rdb).Status(ctx, *a.Budget)
			if err != nil {
				return nil, err
			}
			sum.Budget = &st
		}
		out = append(out, sum)
	}
	return out, nil
}
