package breaker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// allowScript admits a call (lua/allow.lua documents its KEYS, ARGV and
// replies).
var allowScript = script("allow.lua")

// allowArgs are allowScript's arguments.
type allowArgs struct {
	key         string        // the breaker key (KEYS, and ARGV[6] for events)
	halfOpenMax int           // ARGV[2]
	trialLease  time.Duration // ARGV[3]
	token       string        // ARGV[4]: the trial token if a trial is admitted
	trialOnly   bool          // ARGV[7]: admit trials only (a health probe)
}

// admissionReply is the reply of allowScript and allowTaskScript.
type admissionReply struct {
	allowed   bool
	state     State
	gen       int64
	token     string
	retryAtMS int64 // 0: none
	cf        int
	retryInMS int64 // 0: none
}

func parseAdmission(res any) (admissionReply, error) {
	r, err := redisx.ParseReply(res, 7)
	if err != nil {
		return admissionReply{}, err
	}
	return admissionReply{allowed: r.Int(0) == 1, state: State(r.Str(1)), gen: r.Int(2), token: r.Str(3),
		retryAtMS: r.Int(4), cf: int(r.Int(5)), retryInMS: r.Int(6)}, nil
}

// allow runs allowScript.
func (b *Breakers) allow(ctx context.Context, a allowArgs) (admissionReply, error) {
	only := "0"
	if a.trialOnly {
		only = "1"
	}
	res, err := b.run(ctx, allowScript, a.key, []string{rkeys.Breaker(a.key), rkeys.BreakerTrials(a.key)},
		b.nowArg(), a.halfOpenMax, a.trialLease.Milliseconds(), a.token, rkeys.BreakerChannel(), a.key, only)
	if err != nil {
		return admissionReply{}, err
	}
	return parseAdmission(res)
}

// recordScript reports the outcome of an admitted call (lua/record.lua
// documents its KEYS, ARGV and replies).
var recordScript = windowScript("record.lua")

// recordArgs are recordScript's arguments.
type recordArgs struct {
	key     string // the breaker key (KEYS, and ARGV[8] for events)
	cfg     Config // ARGV[2], [3], [9]–[14] (withDefaults applied)
	outcome string // ARGV[4]: luaSuccess, luaFailure or luaIgnore
	gen     int64  // ARGV[5]: the admission's generation
	token   string // ARGV[6]: the admission's trial token, "" if none
	task    string // ARGV[15]: the call's task ID, "" if none
}

// Codes of recordReply.code.
const (
	recordApplied   = 0
	recordStaleGen  = 1
	recordLeaseGone = 2
)

// recordReply is recordScript's reply.
type recordReply struct {
	state       State
	gen         int64
	code        int64 // recordApplied, recordStaleGen or recordLeaseGone
	openUntilMS int64 // 0: not open
	cf          int
	// Rate mode, when the outcome was counted in the window: the window's
	// calls and failures, and the distinct failing tasks (after a failure).
	calls, fails, failingTasks int64
}

// breakerKeys are the keys of every script that may touch rate mode's state.
func breakerKeys(key string) []string {
	return []string{rkeys.Breaker(key), rkeys.BreakerTrials(key), rkeys.BreakerWindow(key), rkeys.BreakerFailing(key)}
}

// record runs recordScript.
func (b *Breakers) record(ctx context.Context, a recordArgs) (recordReply, error) {
	c := a.cfg
	mode := luaConsecutive
	if c.Mode == ModeRate {
		mode = luaRate
	}
	res, err := b.run(ctx, recordScript, a.key, breakerKeys(a.key),
		b.nowArg(), c.FailureThreshold, c.Cooldown.Milliseconds(), a.outcome, a.gen, a.token, rkeys.BreakerChannel(), a.key,
		mode, c.Window.Milliseconds(), strconv.FormatFloat(c.FailureRate, 'g', -1, 64), c.MinCalls, c.MinFailingTasks,
		c.MaxCooldown.Milliseconds(), a.task)
	if err != nil {
		return recordReply{}, err
	}
	r, err := redisx.ParseReply(res, 8)
	if err != nil {
		return recordReply{}, err
	}
	return recordReply{state: State(r.Str(0)), gen: r.Int(1), code: r.Int(2), openUntilMS: r.Int(3), cf: int(r.Int(4)),
		calls: r.Int(5), fails: r.Int(6), failingTasks: r.Int(7)}, nil
}

// tripScript opens the breaker until now+d, a manual override
// (lua/trip.lua documents its KEYS, ARGV and replies).
var tripScript = script("trip.lua")

// trip runs tripScript: the breaker's new generation and open_until (ms).
func (b *Breakers) trip(ctx context.Context, key string, d time.Duration) (gen, openUntilMS int64, err error) {
	res, err := b.run(ctx, tripScript, key, []string{rkeys.Breaker(key), rkeys.BreakerTrials(key)},
		b.nowArg(), d.Milliseconds(), rkeys.BreakerChannel(), key)
	if err != nil {
		return 0, 0, err
	}
	r, err := redisx.ParseReply(res, 2)
	if err != nil {
		return 0, 0, err
	}
	return r.Int(0), r.Int(1), nil
}

// resetScript closes the breaker (lua/reset.lua documents its KEYS, ARGV
// and replies).
var resetScript = script("reset.lua")

// reset runs resetScript: the breaker's new generation.
func (b *Breakers) reset(ctx context.Context, key string) (int64, error) {
	res, err := b.run(ctx, resetScript, key, breakerKeys(key),
		rkeys.BreakerChannel(), key)
	if err != nil {
		return 0, err
	}
	gen, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("unexpected script reply %T", res)
	}
	return gen, nil
}

// flushScript adds batched successes (lua/flush.lua documents its KEYS,
// ARGV and replies).
var flushScript = windowScript("flush.lua")

// indexCall adds breaker key to the index of breakers (rkeys.Breakers), a
// plain SADD riding in a pipeline with the breaker's own script.
func indexCall(key string) redisx.Call {
	return redisx.Call{Cmd: []any{"sadd", rkeys.Breakers(), key}}
}

// run executes script for key in one round trip. The first time this
// process touches key, the breaker index's SADD rides in the same pipeline
// (outside the script: the index is not in the breaker's hash slot).
func (b *Breakers) run(ctx context.Context, s *redis.Script, key string, keys []string, args ...any) (any, error) {
	if _, ok := b.seen.Load(key); ok {
		return b.runner.Run(ctx, s, keys, args...)
	}
	rs := redisx.Pipelined(ctx, b.rdb, []redisx.Call{
		{Script: s, Keys: keys, Args: args},
		indexCall(key),
	})
	if rs[1].Err == nil {
		b.seen.Store(key, struct{}{})
	}
	return rs[0].Val, rs[0].Err
}
