package broker

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// retryScript is asynq's retry and the release of the run's tenant count,
// run in place of asynq's retry (lua/retry.lua: asynq's eight keys, then
// ReleaseKeys; asynq's six arguments). The run's lane stays in its task
// hash, for its forward.
var retryScript = scripts.Script("lib/wake.lua", "lib/release.lua", "asynq/retry.lua", "retry.lua")

// retryNextScript is retryScript and the queue's next run handed out, in
// one script (lua/retry_next.lua: asynq's eight keys, ReleaseKeys, then
// Next's; asynq's six arguments, then Next's; the next run or nil).
var retryNextScript = scripts.Script("lib/wake.lua", "lib/release.lua", "asynq/retry.lua", "lib/dequeue.lua", "retry_next.lua")

// retry runs asynq's retry with the release (retryScript) or, when a run
// is to be fetched with it (prefetch.go), retryNextScript, and tells Dues
// when the retry is due.
func (c *AsynqClient) retry(ctx context.Context, keys []string, args []any) *redis.Cmd {
	q := queueOf(keys[1])
	var cmd *redis.Cmd
	if next := c.next(q); next != nil && len(args) == 6 {
		cmd = c.runWithNext(ctx, retryNextScript, keys, args, q, next)
	} else {
		cmd = c.fairCall(ctx, retryScript, keys, args, ReleaseKeys(q))
	}
	if cmd.Err() == nil {
		if at, ok := toInt64(args[2]); ok {
			c.dues.Lower(keys[3], at)
		}
	}
	return cmd
}
