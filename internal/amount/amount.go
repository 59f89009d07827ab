// Package amount is what one attempt, or a whole task, used (Usage) and
// the bounds of every count and sum of it: the value type the task record
// (internal/record) stores and internal/usage parses, prices and totals,
// in a leaf package so that the record does not import usage.
package amount

import "math"

// The bounds of what one attempt's usage may say, and of every sum of
// usage. A reply may report anything; Parse and Object clamp what they
// read to these bounds (internal/usage) before any arithmetic (a count above MaxTokens is
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

// NanosPerUSD: a sum of costs that must add exactly (a task's usage sum,
// agentq_cost_usd_total) counts integer nano-dollars.
const NanosPerUSD = 1e9

// maxSumUSD is MaxSum nano-dollars, the most a sum of costs holds.
const maxSumUSD = float64(MaxSum) / NanosPerUSD

// NanoUSD is usd in nano-dollars, rounded, within [0, MaxSum] (NaN and
// +Inf: the most), converted only once it is known to fit.
func NanoUSD(usd float64) int64 {
	n := math.Round(usd * NanosPerUSD)
	switch {
	case n >= 0 && n < float64(MaxSum):
		return int64(n)
	case n < 0:
		return 0
	}
	return MaxSum
}

// ClampCount is f as a token count within [0, MaxTokens].
func ClampCount(f float64) int64 {
	switch {
	case f >= float64(MaxTokens):
		return MaxTokens
	case f > 0:
		return int64(f)
	}
	return 0 // negative, or NaN
}

// ClampCost is usd within [0, limit]; NaN or +Inf is limit.
func ClampCost(usd, limit float64) float64 {
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
	u.InputTokens = ClampCount(float64(u.InputTokens))
	u.OutputTokens = ClampCount(float64(u.OutputTokens))
	u.CachedTokens = min(ClampCount(float64(u.CachedTokens)), u.InputTokens)
	u.TotalTokens = max(ClampCount(float64(u.TotalTokens)), u.InputTokens+u.OutputTokens)
	u.CostUSD = ClampCost(u.CostUSD, MaxCostUSD)
	return u
}

// sumCost is a + b, costs of sums, saturated at MaxSum nano-dollars.
func sumCost(a, b float64) float64 {
	return ClampCost(a+b, maxSumUSD)
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

// Add returns u plus v: tokens and cost summed, saturating at MaxSum
// (SatAdd; the cost at MaxSum nano-dollars), priced when either is; the
// model kept when both name the same one, "" otherwise (a zero u takes
// v's).
func (u Usage) Add(v Usage) Usage {
	if u.IsZero() && u.CostUSD == 0 {
		return v
	}
	if u.Model != v.Model {
		u.Model = ""
	}
	u.InputTokens = SatAdd(u.InputTokens, v.InputTokens)
	u.OutputTokens = SatAdd(u.OutputTokens, v.OutputTokens)
	u.CachedTokens = SatAdd(u.CachedTokens, v.CachedTokens)
	u.TotalTokens = SatAdd(u.TotalTokens, v.TotalTokens)
	u.CostUSD = sumCost(u.CostUSD, v.CostUSD)
	u.Priced = u.Priced || v.Priced
	return u
}
