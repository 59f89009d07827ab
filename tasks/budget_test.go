package tasks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEnvelopeCapRoundTrip: a task's own cap (max_tokens, max_cost_usd)
// survives the payload's encoding and decoding, and bad caps are refused
// naming the field.
func TestEnvelopeCapRoundTrip(t *testing.T) {
	t.Parallel()
	e := &Envelope{ID: "t1", Agent: "llm", Queue: DefaultQueue, EnqueuedAt: time.Now().UTC(), MaxTokens: 2500, MaxCostUSD: 0.75}
	b, err := Encode(e)
	require.NoError(t, err)
	got, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, int64(2500), got.MaxTokens)
	require.Equal(t, 0.75, got.MaxCostUSD)

	var ve *ValidationError
	bad := *e
	bad.MaxTokens = -1
	require.ErrorAs(t, bad.Validate(), &ve)
	require.Equal(t, "max_tokens", ve.Field)
	bad = *e
	bad.MaxCostUSD = -1
	require.ErrorAs(t, bad.Validate(), &ve)
	require.Equal(t, "max_cost_usd", ve.Field)
}

// TestRequestCap: a producer's request carries its cap to the task.
func TestRequestCap(t *testing.T) {
	t.Parallel()
	tk, _, err := Request{Agent: "llm", MaxTokens: 5000, MaxCostUSD: 0.5}.Task(nil)
	require.NoError(t, err)
	require.Equal(t, int64(5000), tk.MaxTokens)
	require.Equal(t, 0.5, tk.MaxCostUSD)
	_, _, err = Request{Agent: "llm", MaxCostUSD: -1}.Task(nil)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "max_cost_usd", ve.Field)
}
