// Package leak is TestInternalLeaksFound's subject: its exported API names
// internal types, in a result and behind a field.
package leak

import "github.com/agentq/agentq/internal/amount"

// Usage names an internal type in its result.
func Usage() amount.Usage { return amount.Usage{} }

// Total names one behind a field.
type Total struct {
	Sum *amount.Usage
}
