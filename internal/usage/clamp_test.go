package usage

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHugeCountsClamped: counts a reply says beyond MaxTokens — as an
// int64 could hold them (9e18), beyond it (≥ 2^63), as floats without an
// integer value — are MaxTokens, never 0 nor negative, whatever the shape;
// sums saturate at MaxSum; a cost at any price is at most MaxCostUSD.
func TestHugeCountsClamped(t *testing.T) {
	t.Parallel()
	m := MaxTokens
	cases := []struct {
		name, raw string
		want      Usage
	}{
		{"agentq's own, 9e18", `{"input_tokens": 9000000000000000000}`, Usage{InputTokens: m, TotalTokens: m}},
		{"≥ 2^63", `{"input_tokens": 9223372036854775808, "output_tokens": 1e300}`, Usage{InputTokens: m, OutputTokens: m, TotalTokens: 2 * m}},
		{"bare number ≥ 2^63", `1e19`, Usage{TotalTokens: m}},
		{"negative", `{"input_tokens": -5, "output_tokens": 3}`, Usage{OutputTokens: 3, TotalTokens: 3}},
		{"total beyond", `{"input_tokens": 1, "total_tokens": 1e25}`, Usage{InputTokens: 1, TotalTokens: m}},
		{"OpenAI cached beyond", `{"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 1e20}}`,
			Usage{InputTokens: 10, OutputTokens: 1, CachedTokens: 10, TotalTokens: 11}},
		{"Anthropic cache sum beyond", `{"input_tokens": 9e18, "cache_read_input_tokens": 9e18, "output_tokens": 2}`,
			Usage{InputTokens: m, OutputTokens: 2, CachedTokens: m, TotalTokens: m + 2}},
		{"Bedrock", `{"inputTokens": 9e18, "outputTokens": 9e18, "totalTokens": 1.8e19}`, Usage{InputTokens: m, OutputTokens: m, TotalTokens: 2 * m}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _ := Object([]byte(c.raw))
			got.Model = ""
			require.Equal(t, c.want, got)
		})
	}
	g, system := Parse([]byte(`{"usageMetadata": {"promptTokenCount": 9e18, "toolUsePromptTokenCount": 9e18, "candidatesTokenCount": 1e30}}`))
	require.Equal(t, SystemGemini, system)
	require.Equal(t, Usage{InputTokens: m, OutputTokens: m, TotalTokens: 2 * m}, g)

	huge := Usage{InputTokens: m, OutputTokens: m, TotalTokens: 2 * m}
	sum := Usage{}
	for range 10000 {
		sum = sum.Add(Prices{"x": {InputPerMTok: 1e300, OutputPerMTok: math.MaxFloat64}}.Price(Usage{Model: "x", InputTokens: m}))
		sum = sum.Add(huge)
	}
	require.Equal(t, MaxSum, sum.TotalTokens, "a sum saturates")
	require.Equal(t, MaxSum, sum.InputTokens)
	require.InDelta(t, float64(MaxSum)/1e9, sum.CostUSD, 1e-3, "at MaxSum nano-dollars")
	c := Price{InputPerMTok: math.MaxFloat64}.Cost(Usage{InputTokens: m})
	require.Equal(t, MaxCostUSD, c)

	var cs Counts
	for range 10000 {
		cs.Plus(countsOf(Entry{Usage: Usage{InputTokens: math.MaxInt64, CostUSD: math.Inf(1)}}))
	}
	require.Equal(t, MaxSum, cs.InputTokens)
	require.Equal(t, MaxSum, cs.TotalTokens)
	require.Equal(t, int64(10000), cs.Attempts)
	require.Equal(t, MaxSum, cs.CostMicroUSD, "10,000 × MaxCostUSD in micro-dollars: saturated")
	require.Equal(t, MaxSum, MicroUSD(math.Inf(1)))
	require.Zero(t, MicroUSD(math.Inf(-1)))
	require.Equal(t, MaxSum, SatAdd(MaxSum, MaxSum))
	require.Equal(t, MaxSum, SatAdd(math.MaxInt64, 1))
}
