package usage

import (
	"fmt"
	"math"
	"regexp"
	"sort"
)

// Price is a model's price in USD per million tokens (the config's
// pricing.MODEL). No price is built in: they change.
type Price struct {
	// InputPerMTok prices the prompt's tokens not read from the cache.
	InputPerMTok float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	// OutputPerMTok prices the completion's tokens.
	OutputPerMTok float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
	// CachedInputPerMTok prices the input tokens read from the cache; nil
	// prices them as input.
	CachedInputPerMTok *float64 `yaml:"cached_input_per_mtok" json:"cached_input_per_mtok,omitempty"`
}

// Validate reports the first field of p that is not a finite price ≥ 0,
// by its config name.
func (p Price) Validate() error {
	check := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%s must be a price ≥ 0 (USD per million tokens), got %v", name, v)
		}
		return nil
	}
	if err := check("input_per_mtok", p.InputPerMTok); err != nil {
		return err
	}
	if err := check("output_per_mtok", p.OutputPerMTok); err != nil {
		return err
	}
	if p.CachedInputPerMTok != nil {
		return check("cached_input_per_mtok", *p.CachedInputPerMTok)
	}
	return nil
}

// Cost is what u's tokens cost at p: (input − cached) at the input price,
// cached at the cached-input price (the input price when p has none),
// output at the output price, all per million tokens; at most MaxCostUSD
// (whatever the counts and prices).
func (p Price) Cost(u Usage) float64 {
	cachedPrice := p.InputPerMTok
	if p.CachedInputPerMTok != nil {
		cachedPrice = *p.CachedInputPerMTok
	}
	cached := min(u.CachedTokens, u.InputTokens)
	return clampCost((float64(u.InputTokens-cached)*p.InputPerMTok+float64(cached)*cachedPrice+
		float64(u.OutputTokens)*p.OutputPerMTok)/1e6, MaxCostUSD)
}

// Prices are the config's pricing: a Price per model name.
type Prices map[string]Price

// dated matches a model name's date or version suffix: OpenAI's
// -2024-08-06, Anthropic's -20241022, Gemini's -001.
var dated = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|\d{3})$`)

// Match returns the name in ps that prices model, and its price: model
// itself when ps names it, else model without its date or version suffix
// (gpt-4o-2024-08-06 → gpt-4o, claude-3-5-haiku-20241022 →
// claude-3-5-haiku, gemini-1.5-flash-001 → gemini-1.5-flash). ok is
// false when neither is priced.
func (ps Prices) Match(model string) (name string, p Price, ok bool) {
	if model == "" || len(ps) == 0 {
		return "", Price{}, false
	}
	if p, ok := ps[model]; ok {
		return model, p, true
	}
	if loc := dated.FindStringIndex(model); loc != nil {
		base := model[:loc[0]]
		if p, ok := ps[base]; ok {
			return base, p, true
		}
	}
	return "", Price{}, false
}

// Price returns u with its cost at its model's price (Priced), or as it
// is when the model has no price (tokens only).
func (ps Prices) Price(u Usage) Usage {
	if _, p, ok := ps.Match(u.Model); ok {
		u.CostUSD, u.Priced = p.Cost(u), true
	}
	return u
}

// Names returns the priced models' names, sorted.
func (ps Prices) Names() []string {
	out := make([]string, 0, len(ps))
	for n := range ps {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
