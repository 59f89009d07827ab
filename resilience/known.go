package resilience

import (
	"errors"
	"fmt"
	"sort"
	"strings"
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

// CheckKnown returns nil when key is in configured or recorded, else an
// *UnknownKeyError listing both, sorted and without repeats.
func CheckKnown(kind, key string, configured, recorded []string) error {
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
