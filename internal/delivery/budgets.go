package delivery

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// Budgets in the pipeline (config budget on tenants and agents; the
// keeper is budget.Keeper). Before its breaker is asked, a task whose
// tenant or agent has a budget with no room left is not started: it is
// deferred (no attempt used, a history event naming the budget) until
// about when the window has room, at most budget.DeferMax at a time.
// An agent with budget.fallback sends its tasks to its fallback agents
// instead while its own budget has no room (a fallback agent with a
// budget of its own serves only while that has room, whatever sent the
// call to it). After each call its usage is debited from the tenant's
// budget and from the budget of the agent that served it. A task with a cap of its own
// (max_tokens, max_cost_usd) whose record's usage sum (every attempt's,
// every run's) reached it is dead-lettered (budget_exhausted) before its
// next attempt. Tasks with no budget and no cap cost no Redis command here.

// ReasonBudgetExhausted is the dead-letter reason of a task whose own cap
// (max_tokens, max_cost_usd) was reached.
const ReasonBudgetExhausted = "budget_exhausted"

// budgets is what the pipeline knows of budgets.
type budgets struct {
	keeper *budget.Keeper
	tenant func(string) *config.Budget // config.Config.TenantBudget
}

// of returns the budgets a call of env by sp counts against: its tenant's
// and sp's.
func (bs *budgets) of(env *tasks.Envelope, sp *Spec) []budget.Budget {
	var out []budget.Budget
	if b := inspect.BudgetOf(budget.Tenant, env.Tenant, bs.tenant(env.Tenant)); b != nil {
		out = append(out, *b)
	}
	if sp.budget != nil {
		out = append(out, *sp.budget)
	}
	return out
}

// gateBudgets is the pipeline's budget step, before the breaker: a task
// over its own cap is dead-lettered, a task whose tenant or agent is over
// budget is deferred — unless it is the agent's own budget, the agent has
// budget.fallback, and a fallback agent admits the call (budget, breaker,
// limits): that agent is returned (alt) and serves the attempt. done says
// the task must not start (answer is then ProcessTask's).
func (p *Executor) gateBudgets(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec) (alt *admitted, answer error, done bool) {
	if p.budgets == nil {
		return nil, nil, false
	}
	if env.MaxTokens > 0 || env.MaxCostUSD > 0 {
		spent, err := p.budgets.keeper.TaskSpent(ctx, env.ID)
		if err != nil {
			log.Warn("task's spending unavailable; the task waits for Redis", "err", err)
			return nil, p.deferBudget(ctx, log, env, "budget unavailable: Redis did not answer", 0), true
		}
		if why, over := budget.OverCap(spent, env.MaxTokens, env.MaxCostUSD); over {
			p.endRunSpan(env, nil, runDeadLettered, string(resilience.QuotaExhausted))
			return nil, p.deadLetter(ctx, log, env, p.report(env, 0, resilience.QuotaExhausted,
				"budget_exhausted: the task's own cap was reached: "+why), ReasonBudgetExhausted), true
		}
	}
	bs := p.budgets.of(env, sp)
	if len(bs) == 0 {
		return nil, nil, false
	}
	over, err := p.budgets.keeper.Check(ctx, bs...)
	if err != nil {
		log.Warn("budgets unavailable; the task waits for Redis", "err", err)
		return nil, p.deferBudget(ctx, log, env, "budget unavailable: Redis did not answer", 0), true
	}
	if over == nil {
		return nil, nil, false
	}
	why, wait := over.Budget.Text(over.Unit), over.ResetsIn
	// Check asks the tenant's budget first: an agent's Over means the
	// tenant's has room, which a fallback spends too.
	if over.Budget.Kind == budget.Agent && sp.budgetFallback {
		alt, soonest := p.fallBack(ctx, log, sp, 0, fallbackOverBudget)
		if alt != nil {
			alt.why = fallbackOverBudget + ": " + why
			log.Info("over budget: a fallback agent serves the task", "event", "fallback", "budget", why, "to", alt.sp.name)
			return alt, nil, false
		}
		if soonest > 0 && soonest < wait {
			wait = soonest // a fallback may admit before the budget has room
		}
	}
	return nil, p.deferBudget(ctx, log, env, why, wait), true
}

// budgetRoom reports whether fallback agent fs's own budget has room for
// a call (always, for an agent without a budget: no Redis command), and
// otherwise how long until it has. A budget Redis cannot read has no room.
func (p *Executor) budgetRoom(ctx context.Context, log *taskLog, fs *Spec) (room bool, wait time.Duration) {
	if fs.budget == nil || p.budgets == nil {
		return true, 0
	}
	over, err := p.budgets.keeper.Check(ctx, *fs.budget)
	if err != nil {
		log.Warn("fallback budget unavailable; skipping the fallback", "fallback", fs.name, "err", err)
		return false, 0
	}
	if over != nil {
		return false, over.ResetsIn
	}
	return true, 0
}

// deferBudget puts a task back for about retry (at least a second, at most
// budget.DeferMax), spread by jitter of up to a fifth of it, without
// using an attempt; why names the budget in its history event.
func (p *Executor) deferBudget(ctx context.Context, log *taskLog, env *tasks.Envelope, why string, retry time.Duration) error {
	wait := min(max(retry, time.Second), budget.DeferMax)
	wait += time.Duration(rand.Int64N(int64(wait/5) + 1))
	p.metrics.deferrals.WithLabelValues(p.metrics.agent(env.Agent)).Inc()
	if out, err := p.rec.apply(ctx, delivery(env, 0), record.Deferred(p.report(env, 0, "", ""), why, wait)); err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	log.Info("deferred: over budget", "event", "defer", "budget", why, "delay_ms", wait.Milliseconds())
	return deferUntil(wait, budgetDeferCause+": "+why)
}

// budgetDeferCause starts the error text a budget's deferral hands asynq.
const budgetDeferCause = "over budget"

// debitBudgets debits one call's usage u — the call of env served by sp —
// from the tenant's budget and sp's. It is called once per call (in
// call, with the usage the meter read), as soon as the call has ended,
// before its outcome is recorded: a later admission anywhere in the fleet
// sees it.
func (p *Executor) debitBudgets(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, u usage.Usage) {
	if p.budgets == nil || u.IsZero() {
		return
	}
	bg := context.WithoutCancel(ctx)
	if bs := p.budgets.of(env, sp); len(bs) > 0 {
		if err := p.budgets.keeper.Debit(bg, u, bs...); err != nil {
			log.Warn("could not debit budgets", "tokens", u.TotalTokens, "err", err)
		}
	}
}

// newBudgets returns the pipeline's budgets: cfg's, and the keeper of
// tasks' own caps.
func newBudgets(cfg *config.Config, rdb redis.UniversalClient, run redisx.Runner) *budgets {
	return &budgets{keeper: budget.New(rdb, limit.WithRunner(run)), tenant: cfg.TenantBudget}
}
