package config

import (
	"maps"
	"math"
	"slices"
)

// Price is a model's price in USD per million tokens (pricing.MODEL). No
// price is built in: they change.
type Price struct {
	// InputPerMTok prices the prompt's tokens not read from the cache.
	InputPerMTok float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	// OutputPerMTok prices the completion's tokens.
	OutputPerMTok float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
	// CachedInputPerMTok prices the input tokens read from the cache; nil
	// prices them as input.
	CachedInputPerMTok *float64 `yaml:"cached_input_per_mtok" json:"cached_input_per_mtok,omitempty"`
}

// validPrice checks one price of pricing.MODEL (path names the field).
func (v *validator) validPrice(path string, p float64) {
	if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
		v.fail(path, "must be a price ≥ 0 in USD per million tokens, got %v", p)
	}
}

// pricing checks every model's price (pricing.MODEL).
func (v *validator) pricing() {
	for _, model := range slices.Sorted(maps.Keys(v.c.Pricing)) {
		p := v.c.Pricing[model]
		path := join("pricing", model)
		if model == "" {
			v.fail(path, "a model's name must not be empty")
		}
		v.validPrice(path+".input_per_mtok", p.InputPerMTok)
		v.validPrice(path+".output_per_mtok", p.OutputPerMTok)
		if p.CachedInputPerMTok != nil {
			v.validPrice(path+".cached_input_per_mtok", *p.CachedInputPerMTok)
		}
	}
}
