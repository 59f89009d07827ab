package broker

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// The release of a run's tenant count (lua/lib/release.lua) rides every
// script that takes a run out of asynq's active list: asynq's done
// (done.go), retry (retry.go) and requeue (requeue.go) as AsynqClient runs
// them, and internal/record's apply_acked (DoneLua).

// ReleaseKeys are the keys agentq_release_wake takes for queue: in flight,
// capped, ready, and the queue's wake list.
func ReleaseKeys(queue string) []string {
	return append(fairReleaseKeys(queue), rkeys.Wake(queue))
}

// fairReleaseKeys are the keys agentq_release takes for queue: in flight,
// capped, ready.
func fairReleaseKeys(queue string) []string {
	return []string{rkeys.FairInflight(queue), rkeys.FairCapped(queue), rkeys.FairReady(queue)}
}

// fairCall runs script, the fair version of one of asynq's, with asynq's
// keys and arguments followed by extraKeys and extraArgs.
func (c *AsynqClient) fairCall(ctx context.Context, script *redis.Script, keys []string, args []any, extraKeys []string, extraArgs ...any) *redis.Cmd {
	ks := append(append(make([]string, 0, len(keys)+len(extraKeys)), keys...), extraKeys...)
	as := append(append(make([]any, 0, len(args)+len(extraArgs)), args...), extraArgs...)
	return script.Run(ctx, c.UniversalClient, ks, as...)
}
