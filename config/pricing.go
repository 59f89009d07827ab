package config

import (
	"math"

	"github.com/agentq/agentq/internal/usage"
)

// validPrice checks one price of pricing.MODEL (path names the field).
func (v *validator) validPrice(path string, p float64) {
	if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
		v.fail(path, "must be a price ≥ 0 in USD per million tokens, got %v", p)
	}
}

// pricing checks every model's price (pricing.MODEL).
func (v *validator) pricing() {
	for _, model := range usage.Prices(v.c.Pricing).Names() {
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

// Prices returns the config's pricing as package usage prices it.
func (c *Config) Prices() usage.Prices { return usage.Prices(c.Pricing) }
