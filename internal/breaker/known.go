package breaker

import (
	"context"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/resilience"
)

// CheckKey reports whether an operator may trip or reset the breaker of
// key: nil when key is one of configured (the breaker keys of the config's
// agents) or a breaker Redis has a record of (the breaker index: every key
// a worker has used), else an *UnknownKeyError naming the known keys.
// Without a config, configured is empty and only recorded breakers count.
func (b *Breakers) CheckKey(ctx context.Context, key string, configured []string) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	recorded, err := b.rdb.SMembers(ctx, rkeys.Breakers()).Result()
	if err != nil {
		return b.wrap(key, "check key", err)
	}
	return resilience.CheckKnown("breaker", key, configured, recorded)
}
