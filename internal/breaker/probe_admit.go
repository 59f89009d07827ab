package breaker

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// Admission for agents with a health probe.
//
// An agent with a health probe never sends a real task as a half-open
// trial: the probe is the trial. Its tasks ask AllowTask, which admits in
// CLOSED only; its prober asks AllowProbe, which takes the one trial lease
// of a half-open episode. The probe's outcome goes through Record with the
// probe's Admission, like any trial: a success closes the breaker, a
// failure reopens it for a fresh cooldown, an expired lease (the prober's
// worker died) ends the episode so that another prober may try.

// ProbeRetry is the RetryIn AllowTask gives a task when the breaker is past
// its cooldown or half-open: the probe decides soon, so look again then.
const ProbeRetry = time.Second

// allowTaskScript admits a task of an agent whose trials are probes,
// writing nothing (lua/allow_task.lua documents its KEYS, ARGV and
// replies).
var allowTaskScript = script("allow_task.lua")

// AllowTask is Allow for a task of an agent with a health probe: it admits
// in CLOSED only and never makes the call a half-open trial (the probe is
// the trial, see AllowProbe). In CLOSED it costs what Allow costs: nothing
// while the local view holds the breaker CLOSED, else one read-only EVALSHA. cfg is accepted for symmetry with Allow (the script needs
// none of it). When Redis is unavailable it returns an error wrapping
// ErrUnavailable together with Allow's fallback admission (last state
// seen; never a trial).
func (b *Breakers) AllowTask(ctx context.Context, key string, cfg Config) (Admission, error) {
	_ = cfg
	if adm, ok := b.closedLocally(key); ok {
		return adm, nil
	}
	epoch := b.view.snapshot()
	ctx, cancel := b.bound(ctx)
	defer cancel()
	rep, err := b.allowTask(ctx, key)
	if err != nil {
		if redisx.Unanswered(err) {
			adm := b.fallback(key)
			return adm, fmt.Errorf("breaker %q: %w: %w", key, ErrUnavailable, err)
		}
		return Admission{}, fmt.Errorf("breaker %q: allow task: %w", key, err)
	}
	return b.admitted(key, rep, epoch), nil
}

// allowTask runs allowTaskScript.
func (b *Breakers) allowTask(ctx context.Context, key string) (admissionReply, error) {
	res, err := b.run(ctx, allowTaskScript, key, []string{rkeys.Breaker(key)}, b.nowArg(), ProbeRetry.Milliseconds())
	if err != nil {
		return admissionReply{}, err
	}
	return parseAdmission(res)
}

// AllowProbe asks for the half-open trial of key on behalf of a health
// probe. It is admitted (Allowed, State half_open, a Token) only once the
// cooldown has ended and no other trial holds the episode's lease; the
// caller runs the probe and reports it with Record(ctx, key, cfg, adm,
// OutcomeSuccess|OutcomeFailure|OutcomeIgnore). cfg.TrialLease bounds the
// probe (pass its timeout plus a margin). Denied answers carry the state
// and, when OPEN or a lease is held, RetryIn; a CLOSED breaker is never
// admitted (State closed, no RetryIn). When Redis is unavailable nothing is
// admitted and the error wraps ErrUnavailable.
func (b *Breakers) AllowProbe(ctx context.Context, key string, cfg Config) (Admission, error) {
	cfg = cfg.withDefaults()
	epoch := b.view.snapshot()
	ctx, cancel := b.bound(ctx)
	defer cancel()
	// Allow's script in trial-only mode, one trial per episode: CLOSED is
	// denied (nothing to try); OPEN past its cooldown turns HALF_OPEN; an
	// expired lease ends the episode; the probe takes the lease if none is
	// held, whatever half_open_max_calls says.
	rep, err := b.allow(ctx, allowArgs{key: key, halfOpenMax: 1, trialLease: cfg.TrialLease, token: rand.Text(), trialOnly: true})
	if err != nil {
		adm := b.fallback(key)
		adm.Allowed = false
		if redisx.Unanswered(err) {
			return adm, fmt.Errorf("breaker %q: allow probe: %w: %w", key, ErrUnavailable, err)
		}
		return adm, fmt.Errorf("breaker %q: allow probe: %w", key, err)
	}
	return b.admitted(key, rep, epoch), nil
}
