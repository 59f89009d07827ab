// Package usage is what agent calls use — tokens, and their cost once
// priced — as agentq records it: on each attempt's event, summed on the
// task, and totalled for the fleet per agent, tenant, model and hour.
package usage

import (
	"time"

	"github.com/agentq/agentq/internal/amount"
)

// The bounds of one attempt's usage and of every sum of it (see
// internal/amount).
const (
	MaxTokens  = amount.MaxTokens
	MaxCostUSD = amount.MaxCostUSD
	MaxSum     = amount.MaxSum
)

// Usage is what one attempt, or a whole task, used (internal/amount's).
type Usage = amount.Usage

// SatAdd is a + b saturated at MaxSum (negative terms count as 0).
func SatAdd(a, b int64) int64 { return amount.SatAdd(a, b) }

func clampCount(f float64) int64 { return amount.ClampCount(f) }

func clampCost(usd, limit float64) float64 { return amount.ClampCost(usd, limit) }

// Entry is one attempt's usage, as the fleet's totals count it.
type Entry struct {
	Agent, Tenant string
	// At is when the attempt ended.
	At time.Time
	Usage
}

// Sink receives every attempt's usage (a worker's totals recorder). Add
// must not block on Redis: a sink batches.
type Sink interface {
	Add(Entry)
}
