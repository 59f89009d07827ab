// Package usage is what agent calls use — tokens, and their cost once
// priced — as agentq records it: on each attempt's event, summed on the
// task, and totalled for the fleet per agent, tenant, model and hour.
package usage

import "time"

// The bounds of what one attempt's usage may say, and of every sum of
// usage. A reply may report anything; Parse and Object clamp what they
// read to these bounds before any arithmetic (a count above MaxTokens is
// MaxTokens, not dropped: an absurd report then exhausts a budget rather
// than escaping it), and every sum — a task's usage sum, the fleet's
// totals, a budget's debits — saturates at MaxSum of its unit instead of
// overflowing.
const (
	// MaxTokens bounds each token count of one attempt (10^12 tokens:
	// orders of magnitude above any real call).
	MaxTokens int64 = 1_000_000_000_000
	// MaxCostUSD bounds one attempt's cost (a million dollars).
	MaxCostUSD = 1e6
	// MaxSum bounds every sum: 2^53 of its unit (tokens, micro-dollars in
	// the fleet's totals, nano-dollars in a task's sum), the largest
	// integer a Lua number — which the Redis scripts add with — holds
	// exactly.
	MaxSum int64 = 1 << 53
)

// SatAdd is a + b saturated at MaxSum (negative terms count as 0).
func SatAdd(a, b int64) int64 {
	a, b = min(max(a, 0), MaxSum), min(max(b, 0), MaxSum)
	return min(a+b, MaxSum)
}

// maxSumUSD is MaxSum nano-dollars, the most a sum of costs holds.
const maxSumUSD = float64(MaxSum) / 1e9

// clampCount is f as a token count within [0, MaxTokens].
func clampCount(f float64) int64 {
	switch {
	case f >= float64(MaxTokens):
		return MaxTokens
	case f > 0:
		return int64(f)
	}
	return 0 // negative, or NaN
}

// clampCost is usd within [0, limit]; NaN or +Inf is limit.
func clampCost(usd, limit float64) float64 {
	switch {
	case usd >= 0 && usd <= limit:
		return usd
	case usd < 0:
		return 0
	}
	return limit
}

// Clamp returns u with every count within [0, MaxTokens] (cached at most
// input; total at least input + output, so at most 2 × MaxTokens) and its cost within [0,
// MaxCostUSD]: one attempt's usage as agentq counts it, whatever the
// reply said.
func (u Usage) Clamp() Usage {
	u.InputTokens = clampCount(float64(u.InputTokens))
	u.OutputTokens = clampCount(float64(u.OutputTokens))
	u.CachedTokens = min(clampCount(float64(u.CachedTokens)), u.InputTokens)
	u.TotalTokens = max(clampCount(float64(u.TotalTokens)), u.InputTokens+u.OutputTokens)
	u.CostUSD = clampCost(u.CostUSD, MaxCostUSD)
	return u
}

// sumCost is a + b, costs of sums, saturated at MaxSum nano-dollars.
func sumCost(a, b float64) float64 {
	return clampCost(a+b, maxSumUSD)
}

// Usage is what one attempt, or a whole task, used. Zero values are
// unknown or none; a Usage with no tokens is no usage at all (IsZero).
type Usage struct {
	// Model is the model the reply named (empty: not named).
	Model string `json:"model,omitempty"`
	// InputTokens counts the prompt's tokens, cached ones included.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens counts the completion's tokens.
	OutputTokens int64 `json:"output_tokens"`
	// CachedTokens counts the input tokens read from the provider's cache
	// (a part of InputTokens).
	CachedTokens int64 `json:"cached_tokens,omitempty"`
	// TotalTokens is what the reply said it used in all (input + output
	// when it does not say).
	TotalTokens int64 `json:"total_tokens"`
	// CostUSD is the price of the tokens by the config's pricing of Model
	// (0 when the model has no price: Priced says which).
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Priced is true when CostUSD comes from a price of Model.
	Priced bool `json:"priced,omitempty"`
}

// IsZero reports whether u records no tokens.
func (u Usage) IsZero() bool {
	return u.InputTokens == 0 && u.OutputTokens == 0 && u.CachedTokens == 0 && u.TotalTokens == 0
}

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
