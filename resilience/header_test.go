package resilience

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBackPressureHeader(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"Retry-After", "retry-after", "RETRY-AFTER-MS", "x-should-retry",
		"x-ratelimit-remaining-requests", "X-RateLimit-Reset-Tokens", "x-ratelimit-limit-requests",
		"anthropic-ratelimit-tokens-remaining", "Anthropic-Ratelimit-Requests-Reset",
	} {
		require.True(t, BackPressureHeader(name), name)
	}
	for _, name := range []string{
		"", "Authorization", "x-api-key", "Set-Cookie", "Content-Type", "x-request-id",
		"x-ratelimit-", "anthropic-ratelimit-", "retry-after-s", "xx-ratelimit-remaining-requests",
		"openai-organization",
	} {
		require.False(t, BackPressureHeader(name), name)
	}
}

// TestBackPressureHeadersKeepTheAllowlist: what an exec agent sends is cut
// down to the back-pressure headers, under canonical names, and the
// readers find them there.
func TestBackPressureHeadersKeepTheAllowlist(t *testing.T) {
	t.Parallel()
	h := BackPressureHeaders(map[string]string{
		"retry-after-ms":                 "1500",
		"x-should-retry":                 "false",
		"x-ratelimit-remaining-requests": "0",
		"authorization":                  "Bearer sk-secret",
		"set-cookie":                     "a=b",
	})
	require.Equal(t, http.Header{
		"Retry-After-Ms":                 {"1500"},
		"X-Should-Retry":                 {"false"},
		"X-Ratelimit-Remaining-Requests": {"0"},
	}, h)
	require.Equal(t, -1, shouldRetryHeader(h))
	require.Nil(t, BackPressureHeaders(map[string]string{"x-api-key": "k"}))
	require.Nil(t, BackPressureHeaders(nil))
}
