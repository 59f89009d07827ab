package limit

import (
	"context"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/resilience"
)

// CheckKey reports whether an operator may act on limits key: nil when it
// is one of configured (the limits keys of the config's agents), a key a
// worker registered (Keys) or a key Redis holds a state for (a pause a
// worker wrote on an HTTP agent's breaker key, which is registered
// nowhere), else an *UnknownKeyError naming the known keys.
func (l *Limiter) CheckKey(ctx context.Context, key string, configured []string) error {
	recorded, err := l.Keys(ctx)
	if err != nil {
		return err
	}
	err = resilience.CheckKnown("limits", key, configured, recorded)
	if err == nil {
		return nil
	}
	n, xerr := l.rdb.Exists(ctx, rkeys.LimitState(key)).Result()
	if xerr != nil {
		return l.wrap(key, "check key", xerr)
	}
	if n > 0 {
		return nil
	}
	return err
}
