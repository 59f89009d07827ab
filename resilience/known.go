package resilience

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentq/agentq/internal/rkeys"
)

// ErrUnknownKey is wrapped by *UnknownKeyError.
var ErrUnknownKey = errors.New("unknown key")

// maxKnownShown bounds the keys an UnknownKeyError's message lists.
const maxKnownShown = 20

// UnknownKeyError is an operator's change (trip, reset, resume) naming a
// breaker or limits key that no configured agent uses and that Redis has
// no record of: most likely a typo, which would otherwise leave a phantom
// breaker or silently change nothing.
type UnknownKeyError struct {
	Kind  string   // "breaker" or "limits"
	Key   string   // the key asked for
	Known []string // the keys that would be accepted, sorted
}

func (e *UnknownKeyError) Error() string {
	known := "none"
	if n := len(e.Known); n > 0 {
		shown := e.Known[:min(n, maxKnownShown)]
		quoted := make([]string, len(shown))
		for i, k := range shown {
			quoted[i] = fmt.Sprintf("%q", k)
		}
		known = strings.Join(quoted, ", ")
		if n > maxKnownShown {
			known += fmt.Sprintf(" and %d more", n-maxKnownShown)
		}
	}
	return fmt.Sprintf("no agent uses %s key %q and Redis has no record of it (known %s keys: %s)", e.Kind, e.Key, e.Kind, known)
}

// Unwrap returns ErrUnknownKey.
func (e *UnknownKeyError) Unwrap() error { return ErrUnknownKey }

// checkKnown returns nil when key is in configured or recorded, else an
// *UnknownKeyError listing both, sorted and without repeats.
func checkKnown(kind, key string, configured, recorded []string) error {
	set := map[string]bool{}
	for _, ks := range [][]string{configured, recorded} {
		for _, k := range ks {
			if k == key {
				return nil
			}
			set[k] = true
		}
	}
	known := make([]string, 0, len(set))
	for k := range set {
		known = append(known, k)
	}
	sort.Strings(known)
	return &UnknownKeyError{Kind: kind, Key: key, Known: known}
}

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
	return checkKnown("breaker", key, configured, recorded)
}

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
	err = checkKnown("limits", key, configured, recorded)
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
