package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPricingConfig: pricing.MODEL loads (cached_input_per_mtok unset
// stays unset: cached tokens take the input price; configx.TestPrices
// prices by it), and a bad price names its field.
func TestPricingConfig(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
pricing:
  gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10, cached_input_per_mtok: 1.25}
  claude-3-5-haiku: {input_per_mtok: 0.8, output_per_mtok: 4}
`), "p.yaml")
	require.NoError(t, err)
	require.Len(t, c.Pricing, 2)
	require.Equal(t, 1.25, *c.Pricing["gpt-4o"].CachedInputPerMTok)
	require.Equal(t, Price{InputPerMTok: 0.8, OutputPerMTok: 4}, c.Pricing["claude-3-5-haiku"])

	_, err = Parse([]byte(`
pricing:
  gpt-4o: {input_per_mtok: -1, output_per_mtok: 10, cached_input_per_mtok: -0.5}
`), "p.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "pricing.gpt-4o.input_per_mtok")
	require.Contains(t, err.Error(), "pricing.gpt-4o.cached_input_per_mtok")
	require.NotContains(t, err.Error(), "output_per_mtok")

	_, err = Parse([]byte("pricing:\n  gpt-4o: {input_per_mtok: 1, output: 2}\n"), "p.yaml")
	require.Error(t, err, "an unknown price field is refused")
}
