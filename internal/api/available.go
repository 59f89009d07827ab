package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/inspect"
)

// ErrAgentUnavailable is the sentinel of a fail-fast enqueue refused because
// the agent's circuit breaker is open: errors.Is(err, ErrAgentUnavailable)
// holds for every *UnavailableError.
var ErrAgentUnavailable = errors.New("agent unavailable")

// UnavailableError says which agent was refused, by which breaker, and when
// the breaker may admit a trial again.
type UnavailableError struct {
	// Agent is the agent the task was for.
	Agent string
	// BreakerKey is the agent's breaker (config breaker_key; the agent's
	// name when unset).
	BreakerKey string
	// State is the breaker's state (open).
	State breaker.State
	// OpenUntil is when the breaker may move to half-open and admit a trial
	// (Redis time, UTC).
	OpenUntil time.Time
}

func (e *UnavailableError) Error() string {
	key := ""
	if e.BreakerKey != e.Agent {
		key = fmt.Sprintf(" (breaker %q)", e.BreakerKey)
	}
	return fmt.Sprintf("agent %q is unavailable: its circuit breaker%s is %s until %s; not enqueued",
		e.Agent, key, e.State, e.OpenUntil.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrAgentUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrAgentUnavailable }

// ErrorBody is e as the API's (and `enqueuer --json`'s) agent_unavailable
// JSON object.
func (e *UnavailableError) ErrorBody() ErrorBody {
	b := ErrorBody{Code: CodeAgentUnavailable, Error: e.Error(), Agent: e.Agent, BreakerKey: e.BreakerKey, State: string(e.State)}
	if !e.OpenUntil.IsZero() {
		t := e.OpenUntil.UTC()
		b.OpenUntil = &t
	}
	return b
}

// CheckAvailable is CheckAvailableAt at time.Now.
func CheckAvailable(ctx context.Context, breakers *breaker.Breakers, cfg *config.Config, agent string) error {
	return CheckAvailableAt(ctx, breakers, cfg, agent, time.Now())
}

// CheckAvailableAt reports whether a task for agent may be enqueued under
// fail-fast: it returns a *UnavailableError when the agent's breaker
// (cfg.Agent(agent).BreakerKey) is open and its open_until is after now. A
// closed or half-open breaker, or an open one whose cooldown has passed (the
// next call would be a trial), is available: nil. A breaker that cannot be
// read (Redis down) is that error, wrapping breaker.ErrUnavailable:
// the caller decides (the API answers 503, the CLI exits 1).
func CheckAvailableAt(ctx context.Context, breakers *breaker.Breakers, cfg *config.Config, agent string, now time.Time) error {
	key := agent
	if cfg != nil {
		a, _ := cfg.Agent(agent)
		key = a.BreakerKey
	}
	snap, err := breakers.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("check agent %q: %w", agent, err)
	}
	if snap.State != breaker.StateOpen || snap.OpenUntil == nil || !snap.OpenUntil.After(now) {
		return nil
	}
	return &UnavailableError{Agent: agent, BreakerKey: key, State: snap.State, OpenUntil: snap.OpenUntil.UTC()}
}

// ErrBudgetExhausted is the sentinel of a fail-fast enqueue refused because
// the task's tenant or agent budget has no room left:
// errors.Is(err, ErrBudgetExhausted) holds for every *BudgetExhaustedError
// (and budget.ErrExhausted too).
var ErrBudgetExhausted = errors.New("budget exhausted")

// BudgetExhaustedError says which budget refused a fail-fast task, and
// when it has room again.
type BudgetExhaustedError struct {
	Agent, Tenant string
	Over          *budget.Over
	// ResetsAt is when the budget's window has room again (UTC).
	ResetsAt time.Time
}

func (e *BudgetExhaustedError) Error() string {
	return fmt.Sprintf("%s is exhausted until %s; not enqueued",
		e.Over.Budget.Text(e.Over.Unit), e.ResetsAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrBudgetExhausted) and errors.Is(err,
// budget.ErrExhausted) true.
func (e *BudgetExhaustedError) Is(target error) bool {
	return target == ErrBudgetExhausted || target == budget.ErrExhausted
}

// ErrorBody is e as the API's (and `enqueuer --json`'s) budget_exhausted
// JSON object.
func (e *BudgetExhaustedError) ErrorBody() ErrorBody {
	t := e.ResetsAt.UTC()
	return ErrorBody{Code: CodeBudgetExhausted, Error: e.Error(), Agent: e.Agent, Tenant: e.Tenant,
		Budget: e.Over.Budget.Text(e.Over.Unit), ResetsAt: &t}
}

// CheckBudgets reports whether a task of agent for tenant may be enqueued
// under fail-fast: a *BudgetExhaustedError when its tenant's or agent's
// budget has no room left (now + how long until it has is its ResetsAt),
// nil when both have room or none is set. An agent over its own budget
// with budget.fallback is not refused while one of its fallback agents
// has no budget or one with room (the worker serves the task there, as
// its breaker and limits admit; a fallback spends the same tenant
// budget, so a tenant over its budget is refused). A budget that cannot
// be read (Redis down) is that error: the caller decides (503, exit 1).
func CheckBudgets(ctx context.Context, keeper *budget.Keeper, cfg *config.Config, agent, tenant string, now time.Time) error {
	bs := inspect.BudgetsOf(cfg, agent, tenant)
	if len(bs) == 0 {
		return nil
	}
	over, err := keeper.Check(ctx, bs...)
	if err != nil {
		return fmt.Errorf("check budgets of agent %q, tenant %q: %w", agent, tenant, err)
	}
	if over == nil {
		return nil
	}
	// Check asks the tenant's budget first: an agent's Over means the
	// tenant's has room.
	if a, _ := cfg.Agent(agent); over.Budget.Kind == budget.Agent && a.Budget != nil && a.Budget.Fallback {
		for _, f := range a.Fallback {
			fa, _ := cfg.Agent(f)
			fb := inspect.BudgetOf(budget.Agent, f, fa.Budget)
			if fb == nil {
				return nil
			}
			fo, err := keeper.Check(ctx, *fb)
			if err != nil {
				return fmt.Errorf("check budget of agent %q's fallback %q: %w", agent, f, err)
			}
			if fo == nil {
				return nil
			}
		}
	}
	return &BudgetExhaustedError{Agent: agent, Tenant: tenant, Over: over, ResetsAt: now.Add(over.ResetsIn).UTC()}
}
