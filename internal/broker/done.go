package broker

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// doneScript is asynq's done and the release of the run's tenant count,
// run in place of asynq's done (lua/done.lua documents its KEYS, ARGV and
// reply: asynq's five keys, then ReleaseKeys; asynq's three arguments).
var doneScript = scripts.Script("lib/wake.lua", "lib/release.lua", "asynq/done.lua", "done.lua")

// doneNextScript is doneScript and the queue's next run handed out, in
// one script (lua/done_next.lua: asynq's five keys, ReleaseKeys, then
// Next's; asynq's three arguments, then Next's; the next run or nil).
var doneNextScript = scripts.Script("lib/wake.lua", "lib/release.lua", "asynq/done.lua", "lib/dequeue.lua", "done_next.lua")

// done runs asynq's done with the release (doneScript) or, when a run is
// to be fetched with it (prefetch.go), doneNextScript.
func (c *AsynqClient) done(ctx context.Context, keys []string, args []any) *redis.Cmd {
	q := queueOf(keys[0])
	if next := c.next(q); next != nil {
		return c.runWithNext(ctx, doneNextScript, keys, args, q, next)
	}
	return c.fairCall(ctx, doneScript, keys, args, ReleaseKeys(q))
}

// runWithNext runs script, one of asynq's with the release and a Next
// (done_next.lua, retry_next.lua: asynq's keys, ReleaseKeys, next's keys;
// asynq's arguments, next's), and keeps the run it handed out for the
// processor's next dequeue; asynq hears "OK" or the script's error.
func (c *AsynqClient) runWithNext(ctx context.Context, script *redis.Script, keys []string, args []any, q string, next *Next) *redis.Cmd {
	ks := append(append(append(make([]string, 0, len(keys)+13), keys...), ReleaseKeys(q)...), next.Keys...)
	as := append(append(make([]any, 0, len(args)+6), args...), next.Args...)
	v, err := script.Run(ctx, c.UniversalClient, ks, as...).Result()
	cmd := redis.NewCmd(ctx)
	switch r, _ := v.([]any); {
	case err != nil && !errors.Is(err, redis.Nil):
		cmd.SetErr(err)
		return cmd
	case len(r) == 2:
		if err := next.SetFetched(r[0], r[1]); err != nil {
			cmd.SetErr(err)
			return cmd
		}
		c.fetched(ctx, q, next)
	}
	cmd.SetVal("OK")
	return cmd
}

// DoneLua defines, for a script that acknowledges a delivery as asynq's
// done does and releases its run's tenant count (internal/record's
// apply_acked, which keeps its own script: the record's write and the ack
// in one), agentq_counted and agentq_release_wake (lua/lib/release.lua,
// keys: ReleaseKeys), asynq_done(KEYS, ARGV): asynq's done verbatim, as
// a function of asynq's five keys and three arguments, and
// agentq_dequeue(KEYS, ARGV) (lua/lib/dequeue.lua: the fair dequeue, for
// a Next).
var DoneLua = scripts.Source("lib/wake.lua", "lib/release.lua", "asynq/done.lua", "lib/dequeue.lua")

// doneOf returns the task ID of a call of asynq's done script.
func doneOf(sha string, keys []string, args []any) (string, bool) {
	if sha != doneSHA || len(keys) != 5 || len(args) != 3 {
		return "", false
	}
	id, ok := args[0].(string)
	return id, ok
}
