// Package usage is what agent calls use — tokens, and their cost once
// priced — as agentq records it: on each attempt's event, summed on the
// task, and totalled for the fleet per agent, tenant, model and hour.
package usage

import "time"

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
