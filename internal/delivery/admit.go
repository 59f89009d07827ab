package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/budget"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// admitTask is the delivery's admission: the checks of a redelivery, the
// task's deadline, its budgets, then its agent's breaker and limits. It
// returns the agent admitted to serve the attempt (the task's own, or a
// fallback agent), or nil and ProcessTask's answer when the attempt must
// not be made now.
func (p *Executor) admitTask(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec) (*admitted, error) {
	if answer, done := p.redelivered(ctx, log, env); done {
		return nil, answer
	}
	if answer, done := p.pastDeadline(ctx, log, env); done {
		return nil, answer
	}
	g, answer, done := p.gateBudgets(ctx, log, env, sp)
	if done {
		return nil, answer
	}
	if g != nil { // a fallback serving while sp's budget has no room
		return g, nil
	}
	return p.gate(ctx, log, env, sp)
}

// redelivered runs the checks of a redelivery (asynq retry count > 0: a
// retry, or a run recovered from a dead worker's lease) before its gate.
// done is true when the delivery must not run: answer is then
// ProcessTask's answer.
//
//   - a run whose restart is already in asynq is superseded: dropped;
//   - a run that has already ended is acked without calling the agent;
//   - a retry, which asynq schedules in whole seconds and so may deliver
//     up to a second early, waits for the rest of its computed delay; so
//     does the first delivery of a delayed run (Envelope.NotBefore).
func (p *Executor) redelivered(ctx context.Context, log *taskLog, env *tasks.Envelope) (answer error, done bool) {
	if metaOf(ctx).retried == 0 {
		// A first delivery of a delayed run (a scheduled task, a
		// restart) may likewise come up to a second early. One that comes
		// earlier than asynq's rounding can make it was made due on
		// purpose (a suspended run resumed by a signal: broker.Resume):
		// it runs at once.
		if env.NotBefore > 0 && time.Until(time.UnixMilli(env.NotBefore)) <= maxDueWait {
			if err := waitUntilDue(ctx, time.UnixMilli(env.NotBefore)); err != nil {
				return putBack(), true
			}
		}
		return nil, false
	}
	if p.superseded(ctx, log, env) {
		log.Warn("dropping a redelivered run whose next run (a restart or a resume) was already scheduled", "run", env.Run)
		return nil, true
	}
	rs, ended := p.ended(ctx, log, env)
	if ended {
		return nil, true
	}
	if err := waitUntilDue(ctx, rs.NextAttemptAt); err != nil {
		return putBack(), true
	}
	return nil, false
}

// superseded reports whether env's next run already exists in asynq: a
// worker that scheduled a restart or a resume (a suspend) and died before
// recording it leaves the record at this run, so Begin's fence cannot
// tell, and asynq's lease recovery redelivers this run (recoverNext
// records what the dead worker did not). Only redeliveries (retries) are checked,
// at one lookup each; an error counts as "not superseded" (run it rather
// than lose it).
func (p *Executor) superseded(ctx context.Context, log *taskLog, env *tasks.Envelope) bool {
	if p.insp == nil || p.rdb == nil {
		return false
	}
	q := metaOf(ctx).queue
	next := *env
	next.Run++
	// One EXISTS answers the usual case (no next run) in one command
	// rather than asynq's lookup (a SISMEMBER and a script).
	if n, err := p.rdb.Exists(ctx, broker.TaskKey(q, next.AsynqID())).Result(); err != nil || n == 0 {
		return false
	}
	info, err := p.insp.GetTaskInfo(q, next.AsynqID())
	if err != nil {
		return false
	}
	// Record the restart or suspend the dead worker did not, unless the
	// next run has moved the record on already.
	if n, err := tasks.Decode(info.Payload); err == nil {
		out, err := p.recoverNext(ctx, log, env, n, info.NextProcessAt)
		if err == nil && out == record.Canceled {
			p.dropRun(ctx, n) // the task was canceled before the restart was recorded
		}
	}
	return true
}

// recoverNext records next, the run a dead worker scheduled after env
// (due at due), as that worker would have: a resume (one more Resumes:
// the run suspended) as the suspend it was, state waiting with the wait
// next carries (tasks.Envelope.Wait), resumed at once when the signal it
// waits for was sent already; a restart as recovered (RestartRecovered).
// The suspend is written as the dead attempt's (the redelivery's retry
// count), so that the record learns of the signal.
func (p *Executor) recoverNext(ctx context.Context, log *taskLog, env, next *tasks.Envelope, due time.Time) (record.Outcome, error) {
	nr := record.NextRun{Run: next.Run, Restarts: next.Restarts}
	if next.Resumes <= env.Resumes || len(next.Wait) == 0 {
		return p.rec.apply(ctx, delivery(env, 0), record.RestartRecovered(p.report(env, 0, "", ""), nr))
	}
	var w struct {
		Signal string `json:"signal"`
	}
	_ = json.Unmarshal(next.Wait, &w)
	n := max(metaOf(ctx).retried, 1)
	rw := record.Wait{JSON: next.Wait, Signal: w.Signal, Resumes: next.Resumes}
	out, ready, err := p.rec.wait(ctx, delivery(env, n), record.Waiting(p.report(env, n, "", ""), nr, rw, max(time.Until(due), 0)))
	if err == nil && out == record.Applied {
		p.resumeIfReady(context.WithoutCancel(ctx), log, next, ready)
	}
	return out, err
}

// resumeIfReady makes next, a resumed run, pending at once when ready:
// the signal its wait waits for was sent before the wait was recorded.
func (p *Executor) resumeIfReady(ctx context.Context, log *taskLog, next *tasks.Envelope, ready bool) {
	if !ready {
		return
	}
	if _, err := broker.Resume(ctx, p.rdb, next.Queue, next.AsynqID(), time.Now().UnixNano()); err != nil {
		log.Warn("could not resume a task whose signal came before its wait; it resumes at its timeout", "err", err)
	}
}

// dropRun deletes run (a restart this worker scheduled for a task that was
// canceled meanwhile) from its queue and frees its restart-index slot.
func (p *Executor) dropRun(ctx context.Context, run *tasks.Envelope) {
	if p.insp != nil {
		_ = p.insp.DeleteTask(run.Queue, run.AsynqID())
	}
	_ = p.restarts.Started(context.WithoutCancel(ctx), run.ID)
}

// ended reports whether a redelivery's run has already ended: its outcome
// was recorded (succeeded, or dead-lettered: the dead letter is written
// before the record, so a dead letter of this run counts too) but asynq
// never got the ack — the worker died in between, or Redis was out longer
// than asynq's lease. Such a delivery is acked without calling the agent;
// a dead letter whose record was not yet marked is marked now. It also
// returns the record's state (zero when unreadable: run the delivery
// rather than lose it).
func (p *Executor) ended(ctx context.Context, log *taskLog, env *tasks.Envelope) (record.RunState, bool) {
	rs, err := p.rec.runState(ctx, env.ID)
	if err != nil {
		return record.RunState{}, false
	}
	if rs.Ended(env.Run) {
		log.Warn("acking a redelivery of a run that has already ended; the agent is not called again",
			"run", env.Run, "state", rs.State)
		return rs, true
	}
	if rs.Exists && rs.Run != env.Run {
		return rs, false // another run: Begin's fence decides
	}
	e, err := p.dlq.Get(ctx, env.ID)
	if err != nil || e.Run != env.Run || e.Agent != env.Agent {
		return rs, false
	}
	rep := p.report(env, 0, resilience.Class(e.ErrorClass), e.Error)
	rep.ClassifiedBy = e.ClassifiedBy
	_, _ = p.rec.apply(ctx, delivery(env, 0), record.DeadLettered(rep, e.Reason))
	log.Warn("acking a redelivery of a run that was dead-lettered; the agent is not called again", "run", env.Run)
	return rs, true
}

// maxDueWait bounds the in-handler wait for an early retry: asynq's
// whole-second rounding plus its forwarder tick.
const maxDueWait = 2 * time.Second

// waitUntilDue sleeps until due (a retry's next attempt time), at most
// maxDueWait; it returns ctx's error when the worker shuts down meanwhile.
// A zero due (no record of it) runs now rather than not at all.
func waitUntilDue(ctx context.Context, due time.Time) error {
	if due.IsZero() {
		return nil
	}
	wait := time.Until(due)
	if wait <= 0 {
		return nil
	}
	if wait > maxDueWait {
		wait = maxDueWait
	}
	return startstop.Sleep(ctx, wait)
}

// putBack: back to the queue at once without using an attempt (the
// worker is shutting down).
func putBack() error {
	return &delayed{kind: answerPutBack, cause: "interrupted by worker shutdown"}
}

// A task's deadline, in the delivery (the sweeper, for the tasks no worker
// takes in time, is internal/deadline; it dead-letters through ExpireWaiting):
//
//   - a delivery taken at or after the deadline is dead-lettered without
//     calling the agent (pastDeadline);
//   - a call is given the time left to the deadline when that is shorter
//     than its agent's timeout (callDeadline), and a call the deadline cut
//     is told apart from an ordinary timeout (callResult.deadline): it does
//     not count against its agent's breaker;
//   - a failed attempt whose retry or restart would be due at or after the
//     deadline, or that the deadline cut, is dead-lettered instead
//     (overDeadline).

// pastDeadline dead-letters a delivery of env taken at or after its
// deadline, without calling the agent: done is true when it did, and
// answer is then ProcessTask's answer.
func (p *Executor) pastDeadline(ctx context.Context, log *taskLog, env *tasks.Envelope) (answer error, done bool) {
	if !env.PastDeadline(time.Now()) {
		return nil, false
	}
	p.endRunSpan(env, nil, runDeadLettered, string(resilience.Timeout))
	rep := p.report(env, 0, resilience.Timeout, deadlineText(env, "before the task could start"))
	return p.deadLetter(ctx, log, env, rep, ReasonDeadlineExceeded), true
}

// ExpireWaiting dead-letters env, past its deadline while it waited in
// state (the deadline sweep's find). expired: this call dead-lettered it;
// err: Redis could not take the write (try again next tick).
func (p *Executor) ExpireWaiting(ctx context.Context, env *tasks.Envelope, state string) (expired bool, err error) {
	log := &taskLog{base: p.log, env: env}
	rep := p.report(env, 0, resilience.Timeout, deadlineText(env, "while the task was waiting ("+state+")"))
	answer := p.deadLetter(ctx, log, env, rep, ReasonDeadlineExceeded)
	var d *delayed
	if errors.As(answer, &d) {
		return false, errors.New(d.cause)
	}
	return answer == nil, nil
}

// deadlineText is the error of a task whose deadline passed when (a
// phrase: "before the task could start").
func deadlineText(env *tasks.Envelope, when string) string {
	return fmt.Sprintf("deadline exceeded: the task's deadline (%s) passed %s",
		env.DeadlineTime().UTC().Format(time.RFC3339Nano), when)
}

// Budgets in the delivery (config budget on tenants and agents; the
// keeper is budget.Keeper). Before its breaker is asked, a task whose
// tenant or agent has a budget with no room left is not started: it is
// deferred (no attempt used, a history event naming the budget and when
// it has room again: `budget "tenant acme" tokens 100/1h0m0s exhausted;
// room again at <RFC 3339>`) until about when the window has room, at
// most budget.DeferMax at a time.
// An agent with budget.fallback sends its tasks to its fallback agents
// instead while its own budget has no room (a fallback agent with a
// budget of its own serves only while that has room, whatever sent the
// call to it). After each call its usage is debited from the tenant's
// budget and from the budget of the agent that served it. A task with a cap of its own
// (max_tokens, max_cost_usd) whose record's usage sum (every attempt's,
// every run's) reached it is dead-lettered (budget_exhausted) before its
// next attempt. Tasks with no budget and no cap cost no Redis command here.

// gateBudgets is the delivery's budget step, before the breaker: a task
// over its own cap is dead-lettered, a task whose tenant or agent is over
// budget is deferred — unless it is the agent's own budget, the agent has
// budget.fallback, and a fallback agent admits the call (budget, breaker,
// limits): that agent is returned (alt) and serves the attempt. done says
// the task must not start (answer is then ProcessTask's).
func (p *Executor) gateBudgets(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec) (alt *admitted, answer error, done bool) {
	if p.budgets == nil {
		return nil, nil, false
	}
	if why, err := p.overCaps(ctx, env); err != nil {
		log.Warn("task's spending unavailable; the task waits for Redis", "err", err)
		return nil, p.deferBudget(ctx, log, env, "budget unavailable: Redis did not answer", 0), true
	} else if why != "" {
		p.endRunSpan(env, nil, runDeadLettered, string(resilience.QuotaExhausted))
		return nil, p.deadLetter(ctx, log, env, p.report(env, 0, resilience.QuotaExhausted,
			"budget_exhausted: "+why), ReasonBudgetExhausted), true
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
	room := p.now().Add(over.ResetsIn).UTC().Format(time.RFC3339)
	return nil, p.deferBudget(ctx, log, env, why+" exhausted; room again at "+room, wait), true
}

// overCaps says which cap env is over ("": none): its own (a root's
// covers its whole tree: budget.Keeper.TreeSpent), or, for a task of a
// tree, the root's (env.TreeMaxTokens, env.TreeMaxCostUSD). A task with
// no cap and no tree cap costs no command.
func (p *Executor) overCaps(ctx context.Context, env *tasks.Envelope) (string, error) {
	if env.MaxTokens > 0 || env.MaxCostUSD > 0 {
		spent, err := p.ownSpent(ctx, env)
		if err != nil {
			return "", err
		}
		if why, over := budget.OverCap(spent, env.MaxTokens, env.MaxCostUSD); over {
			return "the task's own cap was reached: " + why, nil
		}
	}
	if env.Root == "" || (env.TreeMaxTokens == 0 && env.TreeMaxCostUSD == 0) {
		return "", nil
	}
	spent, err := p.budgets.keeper.TreeSpent(ctx, env.Root)
	if err != nil {
		return "", err
	}
	if why, over := budget.OverCap(spent, env.TreeMaxTokens, env.TreeMaxCostUSD); over {
		return "the cap of its tree (root " + env.Root + ") was reached: " + why, nil
	}
	return "", nil
}

// ownSpent is what env's own cap is checked against: a root's tree's
// spending, a child's own.
func (p *Executor) ownSpent(ctx context.Context, env *tasks.Envelope) (budget.Spent, error) {
	if env.Root == "" {
		return p.budgets.keeper.TreeSpent(ctx, env.ID)
	}
	return p.budgets.keeper.TaskSpent(ctx, env.ID)
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
	if out, err := p.rec.apply(ctx, delivery(env, 0), record.Deferred(p.report(env, 0, "", ""), record.WaitingBudget, why, wait)); err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	log.Info("deferred: over budget", "event", "defer", "budget", why, "delay_ms", wait.Milliseconds())
	return deferUntil(wait, budgetDeferCause+": "+why)
}

// budgetDeferCause starts the error text a budget's deferral hands asynq.
const budgetDeferCause = "over budget"

// deferUntil: a breaker's deferral; back after d without using an attempt.
func deferUntil(d time.Duration, cause string) error {
	return &delayed{kind: answerDefer, delay: d, cause: cause}
}

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
	p.metrics.breakerState.Set(sp.breakerKey, adm.State)
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
// primary's own budget had no room and it has budget.fallback (gateBudgets).
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
		p.metrics.breakerState.Set(fs.breakerKey, a.State)
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
	if out, err := p.rec.apply(ctx, delivery(env, 0), record.Deferred(p.report(env, 0, "", ""), record.WaitingBreaker, fmt.Sprintf("breaker %q is %s", sp.breakerKey, adm.State), wait)); err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	log.Info("deferred: breaker open", "event", "defer", "breaker_key", sp.breakerKey, "state", adm.State, "delay_ms", wait.Milliseconds())
	return deferUntil(wait, fmt.Sprintf("deferred: breaker %q is %s", sp.breakerKey, adm.State))
}

// admitLimit asks sp's limits for a call once, without waiting. An agent
// without limits admits; a limiter Redis cannot reach refuses
// (limit.Unavailable): the task waits, and is deferred, as for
// any limit.
func (p *Executor) admitLimit(ctx context.Context, log *taskLog, sp *Spec) limit.Admission {
	if sp.limits == nil || p.limiter == nil {
		return limit.Admission{Allowed: true}
	}
	if sp.limits.pauseOnly {
		return p.pauses.admit(ctx, log, p.limiter, sp.limits.key)
	}
	a, err := p.limiter.Admit(ctx, sp.limits.key, sp.limits.cfg)
	if err != nil && ctx.Err() == nil {
		log.Warn("limits unavailable; the call waits for Redis", "limit_key", sp.limits.key, "err", err)
	}
	if !a.Allowed {
		p.metrics.limitRefusals.WithLabelValues(sp.limits.key, string(a.Limit)).Inc()
	}
	return a
}

// waitLimit waits in sp's line for its limits to admit a call, at most
// limitWaitMax. It returns the admission, or the last refusal (ok false)
// when the wait would be longer; err is ctx's when the worker shuts down.
func (p *Executor) waitLimit(ctx context.Context, log *taskLog, sp *Spec, last limit.Admission) (limit.Admission, error) {
	line := p.lines.get(sp.limits.key)
	deadline := time.Now().Add(limitWaitMax)
	if last.RetryIn > limitWaitMax {
		return last, nil // a long wait (a pause, a token window): defer at once
	}
	timer := time.NewTimer(limitWaitMax)
	defer timer.Stop()
	select {
	case line.turn <- struct{}{}:
	case <-timer.C:
		// The line was busy all along: capacity is being used; come back
		// soon (deferLimit spreads the returns).
		last.RetryIn = 0
		return last, nil
	case <-ctx.Done():
		return last, ctx.Err()
	}
	defer func() { <-line.turn }()
	for {
		a := p.admitLimit(ctx, log, sp)
		if a.Allowed {
			return a, nil
		}
		last = a
		wait := a.RetryIn
		if wait <= 0 {
			wait = limitPoll
		}
		// A little jitter, so the heads of several workers do not ask at
		// the same millisecond.
		wait += time.Millisecond + time.Duration(rand.Int64N(int64(min(wait/10, 10*time.Millisecond))+1))
		if time.Until(deadline) < wait {
			return last, nil
		}
		if err := sleepOrFreed(ctx, wait, line.freed); err != nil {
			return last, err
		}
	}
}

// limitWaitMax bounds how long a task waits in its worker for capacity
// before it is deferred instead: short enough not to hold a worker slot
// for long, long enough that a request limit's next windows are served
// from within the workers (a deferral comes back on asynq's whole-second
// clock, which would leave capacity unused at the end of a burst).
const limitWaitMax = 5 * time.Second

// limitPoll is how soon a line's head asks again when the concurrency
// limit refused it and no call of its key ended in this process: a slot
// freed by another worker is found within about this time.
const limitPoll = 25 * time.Millisecond

// sleepOrFreed sleeps d, or until a call of the line's key ends here.
func sleepOrFreed(ctx context.Context, d time.Duration, freed <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-freed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// describe names a refusal for history and logs, e.g.
// limit "openai-prod" requests 20/1s.
func (l *limitSpec) describe(a limit.Admission) string {
	switch a.Limit {
	case limit.Requests:
		return fmt.Sprintf("limit %q requests %d/%s", l.key, l.cfg.Requests, l.cfg.Per)
	case limit.Tokens:
		return fmt.Sprintf("limit %q tokens %d/%s", l.key, l.cfg.Tokens, l.cfg.Per)
	case limit.Concurrency:
		return fmt.Sprintf("limit %q concurrency %d", l.key, l.cfg.Concurrency)
	case limit.Paused:
		return fmt.Sprintf("limit %q paused by the provider until %s", l.key, a.PausedUntil.Format(time.RFC3339Nano))
	case limit.Unavailable:
		return fmt.Sprintf("limit %q unavailable: Redis did not answer", l.key)
	}
	return fmt.Sprintf("limit %q", l.key)
}

// deferLimit puts a task back until about when sp's limits may admit it:
// the limiter's RetryIn (at least 100ms) plus jitter of up to a fifth of
// it (at least 500ms, at most a second), so that the deferred tasks of a
// key come back spread out. It uses no attempt; the history event names
// the limit. asynq may deliver it up to a second early (whole seconds):
// it then waits for the rest in its worker's line, which is what lets a
// key's deferred tasks take capacity as soon as it frees.
func (p *Executor) deferLimit(ctx context.Context, log *taskLog, env *tasks.Envelope, sp *Spec, a limit.Admission) error {
	wait := max(a.RetryIn, 100*time.Millisecond)
	wait += time.Duration(rand.Int64N(int64(min(max(wait/5, 500*time.Millisecond), time.Second)) + 1))
	why := sp.limits.describe(a)
	p.metrics.limitDeferrals.WithLabelValues(sp.limits.key, string(a.Limit)).Inc()
	p.metrics.deferrals.WithLabelValues(p.metrics.agent(env.Agent)).Inc()
	if out, err := p.rec.apply(ctx, delivery(env, 0), record.Deferred(p.report(env, 0, "", ""), record.WaitingLimit, why, wait)); err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	log.Info("deferred: over a limit", "event", "defer", "limit_key", sp.limits.key, "limit", a.Limit, "delay_ms", wait.Milliseconds())
	return deferEarly(wait, limitDeferCause)
}

// limitDeferCause is the error text a limit's deferral hands asynq (its
// TaskInfo.LastErr); a breaker's close does not wake these tasks.
const limitDeferCause = "over limit"

// deferEarly: a limit's deferral, which may come back up to a second early
// (it waits for the rest in its worker's line).
func deferEarly(d time.Duration, cause string) error {
	return &delayed{kind: answerDeferEarly, delay: d, cause: cause}
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

func (ls *limitLines) get(key string) *limitLine {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.lines == nil {
		ls.lines = map[string]*limitLine{}
	}
	l := ls.lines[key]
	if l == nil {
		l = &limitLine{turn: make(chan struct{}, 1), freed: make(chan struct{}, 1)}
		ls.lines[key] = l
	}
	return l
}

// admit decides a call of pause-only key: refused while a pause is in
// force (limit.Paused, RetryIn its remainder).
func (v *pauseView) admit(ctx context.Context, log *taskLog, l *limit.Limiter, key string) limit.Admission {
	now := time.Now()
	v.mu.Lock()
	e, ok := v.keys[key]
	v.mu.Unlock()
	if !ok || now.Sub(e.checked) >= pauseCheckEvery || now.Before(e.checked) {
		left, err := l.PausedFor(ctx, key)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("provider pause unknown: Redis did not answer; the call goes ahead", "limit_key", key, "err", err)
			}
		} else {
			e = pauseEntry{checked: now}
			if left > 0 {
				e.until = now.Add(left)
			}
			v.mu.Lock()
			if v.keys == nil {
				v.keys = map[string]pauseEntry{}
			}
			if old := v.keys[key]; old.until.After(e.until) {
				e.until = old.until // a pause this process set meanwhile
			}
			v.keys[key] = e
			v.mu.Unlock()
		}
	}
	if left := e.until.Sub(now); left > 0 {
		return limit.Admission{Limit: limit.Paused, RetryIn: left, PausedUntil: e.until.UTC()}
	}
	return limit.Admission{Allowed: true}
}
