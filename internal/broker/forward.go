package broker

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// forwardScript is asynq's forward patched (lua/forward.lua: asynq's text
// but for its LPUSH and its reply), which puts a run in its lane, wakes a
// worker per task moved and replies when the next task of the set is due.
//
// A run whose task hash names a lane (fair.go) goes to its
// lane instead of asynq's pending list.
//
// KEYS[1] the scheduled or retry set, KEYS[2] pending, KEYS[3] the queue's
// wake list (rkeys.Wake; same slot), KEYS[4] the fair ready set, KEYS[5]
// the tenant registry
// ARGV[1..4] asynq's (now Unix s, task key prefix, now Unix ns, group key
// prefix), ARGV[5] the wake list's cap, ARGV[6] the lane prefix
// Returns {moved, earliest score left or -1}.
var forwardScript = scripts.Script("lib/wake.lua", "lib/lane.lua", "forward.lua")

// forward is asynq's forward of one delayed set, asked of Redis only when
// a task may be due.
func (c *AsynqClient) forward(ctx context.Context, keys []string, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	now, ok := toInt64(args[0])
	q := queueOf(keys[1])
	if !ok || q == "" {
		cmd.SetErr(fmt.Errorf("agentq: unexpected arguments of asynq's forward: %v %v", keys, args))
		return cmd
	}
	if !c.dues.Begin(keys[0], now) {
		cmd.SetVal(int64(0))
		return cmd
	}
	ready, tenants, prefix := LaneKeys(q)
	res, err := forwardScript.Run(ctx, c.UniversalClient, []string{keys[0], keys[1], rkeys.Wake(q), ready, tenants},
		args[0], args[1], args[2], args[3], WakeCap, prefix).Slice()
	var moved, next int64
	if err == nil {
		moved, next, err = forwardReply(res)
	}
	c.dues.Done(keys[0], next, err == nil)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	cmd.SetVal(moved)
	return cmd
}

func forwardReply(res []any) (moved, next int64, err error) {
	if len(res) == 2 {
		m, ok1 := toInt64(res[0])
		n, ok2 := toInt64(res[1])
		if ok1 && ok2 {
			return m, n, nil
		}
	}
	return 0, 0, fmt.Errorf("agentq: unexpected reply of the forward script: %v", res)
}
