package delivery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// admitted is an agent whose breaker admitted a call of the task: the
// task's own agent, or one of its fallback agents.
type admitted struct {
	sp   *Spec
	adm  breaker.Admission
	lim  limit.Admission // the admission of sp's limits (zero: none)
	next int             // index in the primary's fallback list of the next agent to fall back to
	// why says, for a fallback agent, why the call went to it (the class
	// label of agentq_fallbacks_total, and for over_budget the budget):
	// the fallback field of its call's history event. "" for the task's
	// own agent.
	why string
}

// gate asks the breaker of the task's agent sp for a call. An open
// breaker defers the task without using an attempt, unless the breaker of
// one of its fallback agents admits it. It returns the admitted agent, or
// nil and ProcessTask's answer (a deferral).
func (p *Executor) gate(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec) (*admitted, error) {
	adm, err := p.admit(ctx, sp)
	if err != nil {
		log.Warn("breaker state unavailable; using the last state seen", "err", err)
	}
	p.metrics.breakerState.WithLabelValues(sp.breakerKey).Set(StateValue(adm.State))
	if adm.Allowed {
		return p.gateLimits(ctx, log, env, sp, adm)
	}
	alt, soonest := p.fallBack(ctx, log, sp, 0, fallbackBreakerOpen)
	if alt != nil {
		return alt, nil
	}
	if soonest > 0 && soonest < adm.RetryIn {
		adm.RetryIn = soonest // a fallback may admit before the primary does
	}
	return nil, p.deferTask(ctx, log, env, sp, adm)
}

// gateLimits asks the limits of sp, whose breaker admitted the call (adm).
// Over a limit, a fallback agent that admits the call serves it; else the
// task waits in its worker for capacity (waitLimit), or is deferred.
func (p *Executor) gateLimits(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, adm breaker.Admission) (*admitted, error) {
	la := p.admitLimit(ctx, log, sp)
	if la.Allowed {
		return &admitted{sp: sp, adm: adm, lim: la}, nil
	}
	if alt, _ := p.fallBack(ctx, log, sp, 0, fallbackOverLimit); alt != nil {
		p.release(ctx, sp, adm)
		return alt, nil
	}
	la, err := p.waitLimit(ctx, log, sp, la)
	if la.Allowed {
		return &admitted{sp: sp, adm: adm, lim: la}, nil
	}
	p.release(ctx, sp, adm)
	if err != nil {
		return nil, putBack() // the worker is shutting down
	}
	return nil, p.deferLimit(ctx, log, env, sp, la)
}

// fallbackOverLimit is the class label of agentq_fallbacks_total when the
// primary's limits did not admit the call.
const fallbackOverLimit = "over_limit"

// fallbackBreakerOpen is the class label of agentq_fallbacks_total when the
// primary's breaker did not admit the call.
const fallbackBreakerOpen = "breaker_open"

// fallbackOverBudget is the class label of agentq_fallbacks_total when the
// primary's own budget had no room and it has budget.fallback (budgets.go).
const fallbackOverBudget = "over_budget"

// admit asks sp's breaker for a call: Allow, or AllowTask for an agent
// with a health probe (its tasks are never half-open trials).
func (p *Executor) admit(ctx context.Context, sp *Spec) (breaker.Admission, error) {
	if p.noGate {
		return breaker.Admission{Allowed: true, State: breaker.StateClosed}, nil
	}
	if sp.probed {
		return p.breakers.AllowTask(ctx, sp.breakerKey, sp.breaker)
	}
	return p.breakers.Allow(ctx, sp.breakerKey, sp.breaker)
}

// release gives back an admission whose call was never made.
func (p *Executor) release(ctx context.Context, sp *Spec, adm breaker.Admission) {
	if !p.noGate {
		_, _ = p.breakers.Record(ctx, sp.breakerKey, sp.breaker, adm, breaker.OutcomeIgnore)
	}
}

// fallBack returns the first agent of primary's fallback list, from index
// from on, whose budget (budgetRoom), breaker and limits admit a call; why
// labels agentq_fallbacks_total. It returns nil when none admits, and then
// the shortest wait the denials gave (0: none).
func (p *Executor) fallBack(ctx context.Context, log *taskLog, primary *Spec, from int, why string) (alt *admitted, soonest time.Duration) {
	for i := from; i < len(primary.fallback); i++ {
		fs := primary.fallback[i]
		if room, wait := p.budgetRoom(ctx, log, fs); !room {
			if wait > 0 && (soonest == 0 || wait < soonest) {
				soonest = wait
			}
			continue
		}
		a, err := p.admit(ctx, fs)
		if err != nil {
			log.Warn("fallback breaker state unavailable; using the last state seen", "fallback", fs.name, "err", err)
		}
		p.metrics.breakerState.WithLabelValues(fs.breakerKey).Set(StateValue(a.State))
		if a.Allowed {
			la := p.admitLimit(ctx, log, fs)
			if !la.Allowed {
				p.release(ctx, fs, a)
				if la.RetryIn > 0 && (soonest == 0 || la.RetryIn < soonest) {
					soonest = la.RetryIn
				}
				continue
			}
			p.metrics.fallbacks.WithLabelValues(p.metrics.agent(primary.name), p.metrics.agent(fs.name), why).Inc()
			return &admitted{sp: fs, adm: a, lim: la, next: i + 1, why: why}, 0
		}
		p.metrics.rejections.WithLabelValues(fs.breakerKey).Inc()
		if a.RetryIn > 0 && (soonest == 0 || a.RetryIn < soonest) {
			soonest = a.RetryIn
		}
	}
	return nil, soonest
}

// deferTask puts a task back until its breaker may admit a trial. Deferred
// tasks wake spread out (jitter) so they do not stampede; those not admitted
// defer again.
func (p *Executor) deferTask(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, adm breaker.Admission) error {
	wait := adm.RetryIn
	if wait < 50*time.Millisecond {
		wait = 50 * time.Millisecond
	}
	if adm.State == breaker.StateHalfOpen && wait > time.Second {
		// A trial is in flight: look again soon rather than at its lease expiry.
		wait = time.Second
	}
	wait += time.Duration(rand.Int64N(int64(wait/5) + 1))
	p.metrics.deferrals.WithLabelValues(p.metrics.agent(env.Agent)).Inc()
	p.metrics.rejections.WithLabelValues(sp.breakerKey).Inc()
	if out, err := p.rec.apply(ctx, delivery(env, 0), record.Deferred(p.report(env, 0, "", ""), fmt.Sprintf("breaker %q is %s", sp.breakerKey, adm.State), wait)); err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	log.Info("deferred: breaker open", "event", "defer", "breaker_key", sp.breakerKey, "state", adm.State, "delay_ms", wait.Milliseconds())
	return deferUntil(wait, fmt.Sprintf("deferred: breaker %q is %s", sp.breakerKey, adm.State))
}
