package httpx_test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/httpx"
)

// TestCheckBearer: the scheme is case-insensitive, the token must match
// exactly; an empty token admits everything.
func TestCheckBearer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"", "", true},
		{"Bearer s3cret", "s3cret", true},
		{"bearer s3cret", "s3cret", true},
		{"Bearer  s3cret ", "s3cret", true},
		{"", "s3cret", false},
		{"Bearer s3cre", "s3cret", false},
		{"Bearer s3cretx", "s3cret", false},
		{"Basic s3cret", "s3cret", false},
		{"s3cret", "s3cret", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		require.Equal(t, tc.ok, httpx.CheckBearer(r, tc.token), "%q vs %q", tc.header, tc.token)
	}
}
