package delivery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http/httptrace"
	"slices"
	"sync"
	"time"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/startstop"
	"github.com/agentq/agentq/tasks"
)

// Provider limits in the pipeline (config agents.NAME.limits; the limiter
// is limit.Limiter). After its breaker admits a call, the agent's
// limits must admit it too, in one Redis script for the whole fleet. A
// call over a limit is not made:
//
//   - a fallback agent whose breaker and limits admit it serves the call;
//   - else the task waits in its worker, at most limitWaitMax, for
//     capacity: the tasks of one limits key wait in a line per worker
//     process, whose head alone asks Redis, when the limiter said a slot
//     frees (plus a little jitter), or as soon as a call of the key ends in
//     this process; the others wait their turn without asking Redis;
//   - a task that would wait longer is deferred (state deferred, no
//     attempt used, a history event naming the limit) until about when the
//     limiter says capacity frees, spread out by jitter.
//
// After the call its concurrency lease is released, the tokens of its
// reply's usage are debited, and a reply saying the key is exhausted
// (limit.ExhaustedFor) pauses the key fleet-wide.

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

// limitSpec is an agent's limits.
type limitSpec struct {
	key string
	cfg limit.Config
	// pauseOnly: the agent configures no limits, but it is an HTTP agent,
	// whose provider's replies may still pause key (its breaker key)
	// fleet-wide: its calls honour the pause, read from Redis at most once
	// per pauseCheckEvery per process (pauses.go), and nothing else.
	pauseOnly bool
}

// newLimitSpec is the limits of a, an agent as config.Config.Agent
// resolves it (its limits key defaulted there); an HTTP agent without a
// limits block gets a pause-only spec on its breaker key (nil: none).
func newLimitSpec(a config.Agent) *limitSpec {
	l := a.Limits
	if l == nil {
		if a.HTTP != nil {
			return &limitSpec{key: a.BreakerKey, pauseOnly: true}
		}
		return nil
	}
	return &limitSpec{key: l.Key, cfg: limit.Config{
		Requests: l.Requests, Tokens: l.Tokens, Per: l.Per, Concurrency: l.Concurrency,
		Lease: config.Lease(a.Timeout),
	}}
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

// limitLines are the worker's waiting lines, one per limits key.
type limitLines struct {
	mu    sync.Mutex
	lines map[string]*limitLine
}

// limitLine is one key's line: turn is held by the head (the one task
// that asks Redis), freed is signalled when a call of the key ends here.
type limitLine struct {
	turn  chan struct{}
	freed chan struct{}
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
	if out, err := p.rec.apply(ctx, delivery(env, 0), record.Deferred(p.report(env, 0, "", ""), why, wait)); err == nil && out != record.Applied {
		return p.answer(ctx, log, env, out, nil)
	}
	log.Info("deferred: over a limit", "event", "defer", "limit_key", sp.limits.key, "limit", a.Limit, "delay_ms", wait.Milliseconds())
	return deferEarly(wait, limitDeferCause)
}

// limitDeferCause is the error text a limit's deferral hands asynq (its
// TaskInfo.LastErr); a breaker's close does not wake these tasks.
const limitDeferCause = "over limit"

// releaseAdmitted gives back what a call that was never made holds: its
// breaker admission and its concurrency lease.
func (p *Executor) releaseAdmitted(ctx context.Context, g *admitted) {
	p.release(ctx, g.sp, g.adm)
	p.releaseLimit(ctx, g.sp, g.lim)
}

// releaseLimit gives back a concurrency lease and wakes the key's line.
func (p *Executor) releaseLimit(ctx context.Context, sp *Spec, a limit.Admission) {
	if sp.limits == nil || p.limiter == nil || a.Lease == "" {
		return
	}
	_ = p.limiter.Release(context.WithoutCancel(ctx), sp.limits.key, a)
	select {
	case p.lines.get(sp.limits.key).freed <- struct{}{}:
	default:
	}
}

// restampAfter is how late a limited call may leave after its admission
// before its start is moved to when it really left (limit.Limiter.
// Restamp): a worker process that stalls (CPU starvation, a long GC)
// between admitting a call and sending it would otherwise let it reach the
// provider in a later window than the limiter counted it in.
const restampAfter = 10 * time.Millisecond

// stamper restamps a limited call's start when it leaves late; its late
// method may run on the HTTP transport's goroutine (httptrace).
type stamper struct {
	p    *Executor
	ctx  context.Context
	sp   *Spec
	adm  limit.Admission
	mu   sync.Mutex
	last time.Time
}

// newStamper returns the stamper of a call admitted by a (nil when the
// call's start is not logged: no request limit).
func (p *Executor) newStamper(ctx context.Context, sp *Spec, a limit.Admission) *stamper {
	if sp.limits == nil || p.limiter == nil || a.Start == "" {
		return nil
	}
	return &stamper{p: p, ctx: context.WithoutCancel(ctx), sp: sp, adm: a, last: a.At}
}

// late restamps the start if the call leaves more than restampAfter after
// its admission (or its last restamp).
func (s *stamper) late() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.last) <= restampAfter {
		return
	}
	s.last = now
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	_ = s.p.limiter.Restamp(ctx, s.sp.limits.key, s.sp.limits.cfg, s.adm)
}

// trace returns ctx with an HTTP client trace that restamps the call's
// start when its request is written late (nil stamper: ctx).
func (s *stamper) trace(ctx context.Context) context.Context {
	if s == nil {
		return ctx
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { s.late() }})
}

// observeReply returns ctx with an observer of the call's reply, which
// it keeps in got (an exec agent's usage is read from it), and got again
// when sp has limits (nil otherwise: the limits' view of the reply). With
// limits, a reply saying the key is exhausted pauses it at once, as soon
// as its headers are in (before its body is read), so that the fleet
// stops calling as early as it can.
func (p *Executor) observeReply(ctx context.Context, log *taskLog, sp *Spec, got *agent.Reply) (context.Context, *agent.Reply) {
	if sp.limits == nil || p.limiter == nil {
		return agent.WithReplyObserver(ctx, func(r agent.Reply) { *got = r }), nil
	}
	return agent.WithReplyObserver(ctx, func(r agent.Reply) {
		*got = r
		p.pauseIfExhausted(ctx, log, sp, r)
	}), got
}

// pauseIfExhausted pauses sp's limits key fleet-wide when the reply says
// the key is exhausted (limit.ExhaustedFor).
func (p *Executor) pauseIfExhausted(ctx context.Context, log *taskLog, sp *Spec, r agent.Reply) {
	d, why, ok := limit.ExhaustedFor(r.Status, r.Header, time.Now())
	if !ok {
		return
	}
	until, extended, err := p.limiter.Pause(context.WithoutCancel(ctx), sp.limits.key, d, why)
	switch {
	case err != nil:
		log.Warn("could not pause the limits key", "limit_key", sp.limits.key, "err", err)
	case extended:
		p.pauses.paused(sp.limits.key, d)
		p.metrics.limitPauses.WithLabelValues(sp.limits.key).Inc()
		log.Info("provider says the key is exhausted: paused fleet-wide", "limit_key", sp.limits.key,
			"paused_until", until.Format(time.RFC3339Nano), "reason", why)
	}
}

// afterLimitedCall does a limited call's bookkeeping once it has ended:
// releases its lease and debits the tokens its reply used (tokens: the
// call's usage, meter.read; a pause was written when the reply came in:
// observeReply).
func (p *Executor) afterLimitedCall(ctx context.Context, log *taskLog, sp *Spec, a limit.Admission, tokens int64, reply *agent.Reply) {
	if sp.limits == nil || p.limiter == nil {
		return
	}
	bg := context.WithoutCancel(ctx)
	p.releaseLimit(bg, sp, a)
	if reply == nil || sp.limits.pauseOnly {
		return
	}
	if n := tokens; n > 0 {
		if _, err := p.limiter.Debit(bg, sp.limits.key, sp.limits.cfg, n); err != nil {
			log.Warn("could not debit tokens", "limit_key", sp.limits.key, "tokens", n, "err", err)
		}
	}
}

// RegisterLimits records every limits key's configuration in Redis for
// inspection (inspector limits); retried in the background until it
// succeeds or ctx ends, since a worker may start while Redis is away.
func (p *Executor) RegisterLimits(ctx context.Context) {
	seen := map[string]bool{}
	var todo []*limitSpec
	for _, name := range slices.Sorted(maps.Keys(p.specs)) {
		if l := p.specs[name].limits; l != nil && !l.pauseOnly && !seen[l.key] {
			seen[l.key] = true
			todo = append(todo, l)
		}
	}
	for len(todo) > 0 {
		l := todo[0]
		err := p.limiter.Register(ctx, l.key, l.cfg)
		if err == nil {
			todo = todo[1:]
			continue
		}
		if errors.Is(err, context.Canceled) || startstop.Sleep(ctx, time.Second) != nil {
			return
		}
	}
}
