package tasks

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/asynqcompat"
	"github.com/agentq/agentq/internal/rkeys"
)

// ackBeginScript is BeginTransition and asynq's acknowledgement of the
// same delivery (its done script, verbatim) in one script: a quick task's
// record write rides the call asynq's server makes anyway, so a task costs
// Redis one script call fewer, and the record and the ack land together.
// asynq's body runs verbatim in a function whose parameters KEYS and ARGV
// shadow the script's (it reads only the first five keys and three
// arguments, which is where they are); the record write is beginScript's
// agentq_begin on keys 6 and 7 and the arguments after asynq's. Outside a
// Redis Cluster only: asynq's keys and the record are in different hash
// slots.
//
// KEYS[1..5] asynq's done keys (asynqcompat.DoneScript: active, lease, task
// hash, processed counters), KEYS[6] task record, KEYS[7] history
// ARGV[1..3] asynq's done arguments (task ID, counter expiry, wrap-around),
// ARGV[4..] beginScript's ARGV
// Returns beginScript's reply. On -3 (the record needs seeding) nothing is
// written and asynq's done has not run. Otherwise asynq's done has run
// after the record write (which -1, -2 and -4 leave undone): its error
// (NOT FOUND: the delivery was no longer active) is the reply.
var ackBeginScript = redis.NewScript(historyLua + `
local function asynq_done(KEYS, ARGV)` + asynqcompat.DoneSource + `end
` + beginLua + `
local n = agentq_begin(KEYS[6], KEYS[7], 3)
if n == -3 then return n end
local r = asynq_done(KEYS, ARGV)
if type(r) == "table" and r.err then return r end
return n
`)

// AsynqDone is the call asynq's server makes to acknowledge a delivery
// that succeeded: its done script's keys and arguments, as asynq passes
// them (see asynqcompat.DoneScript).
type AsynqDone struct {
	Keys []string
	Args []any
}

// BeginTransitionAcked is BeginTransition run in one script with asynq's
// acknowledgement of the delivery, done (the worker's quick successes; not
// on a Redis Cluster). Like asynq's own call, it takes a round trip of its
// own on the store's client, not the store's runner: a runner that waits
// to batch would hold the delivery's slot in asynq's processor meanwhile. Its errors are BeginTransition's: ErrStale, ErrEnded
// and ErrCanceled mean the record was left alone and the delivery was
// acknowledged. Any other error is Redis's or asynq's (an error reply
// NOT FOUND: the record was written, but the delivery was no longer
// active); after a network error, whether anything was written is unknown.
func (s *Store) BeginTransitionAcked(ctx context.Context, env *Envelope, p Patch, ev Event, done AsynqDone) (int, error) {
	if len(done.Keys) != 5 || len(done.Args) != 3 {
		return 0, fmt.Errorf("tasks: asynq's done call has %d keys and %d arguments, not 5 and 3", len(done.Keys), len(done.Args))
	}
	w := s.beginTransition(p, ev)
	keys := make([]string, 0, len(done.Keys)+2)
	keys = append(append(keys, done.Keys...), rkeys.Task(env.ID), rkeys.TaskHistory(env.ID))
	n, err := beginRun(env, w, func(args []any) (int, error) {
		args = append(append(make([]any, 0, len(done.Args)+len(args)), done.Args...), args...)
		return ackBeginScript.Run(ctx, s.rdb, keys, args...).Int()
	})
	if err != nil {
		return 0, fmt.Errorf("tasks: record %s event of %s with its ack: %w", ev.Event, env.ID, err)
	}
	return n, nil
}
