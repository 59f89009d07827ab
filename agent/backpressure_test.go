package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetryAfterSeconds: an ActionResponse's retry_after as a number, as
// a string of seconds, as an RFC 3339 time or an HTTP date; anything else
// is ErrInvalidRetryAfter.
func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		raw  string
		want float64
	}{
		{`1.5`, 1.5},
		{`0`, 0},
		{`120`, 120},
		{`1e3`, 1000},
		{`"2"`, 2},
		{`" 2.5 "`, 2.5},
		{`"2026-11-28T12:01:30Z"`, 90},
		{`"2026-11-28T13:00:00.250+01:00"`, 0.25},
		{`"2026-11-28T11:00:00Z"`, 0}, // already past: no wait
		{`"Sat, 28 Nov 2026 12:00:07 GMT"`, 7},
	} {
		got, err := retryAfterSeconds(json.RawMessage(tc.raw), now)
		require.NoError(t, err, tc.raw)
		require.InDelta(t, tc.want, got, 1e-9, tc.raw)
	}
	for _, raw := range []string{
		`-1`, `"-0.5"`, `"soon"`, `"1.5s"`, `"NaN"`, `"inf"`, `"Infinity"`, `true`, `{}`, `[1]`, `""`, `"2026-11-28"`,
	} {
		_, err := retryAfterSeconds(json.RawMessage(raw), now)
		require.ErrorIs(t, err, ErrInvalidRetryAfter, raw)
	}
}

// TestBackPressure: an exec agent's reply becomes the headers an HTTP
// reply would carry: the allowlisted ones, and retry_after as
// Retry-After, winning over the headers' Retry-After and retry-after-ms.
func TestBackPressure(t *testing.T) {
	t.Parallel()
	now := time.Now()
	headers := ReplyHeaders{
		"Retry-After": "30", "retry-after-ms": "9000", "x-ratelimit-reset-requests": "2s",
		"authorization": "Bearer sk-secret", "x-request-id": "req_1",
	}
	for _, tc := range []struct {
		name string
		resp Response
		want http.Header
		bad  bool
	}{
		{name: "none", resp: Response{Status: "error"}},
		{
			name: "retry_after alone", resp: Response{Status: "error", RetryAfter: json.RawMessage(`1.5`)},
			want: http.Header{"Retry-After": {"1.5"}},
		},
		{
			name: "headers filtered to the allowlist", resp: Response{Status: "error", Headers: headers},
			want: http.Header{"Retry-After": {"30"}, "Retry-After-Ms": {"9000"}, "X-Ratelimit-Reset-Requests": {"2s"}},
		},
		{
			name: "retry_after wins", resp: Response{Status: "error", Headers: headers, RetryAfter: json.RawMessage(`"4"`)},
			want: http.Header{"Retry-After": {"4"}, "X-Ratelimit-Reset-Requests": {"2s"}},
		},
		{
			name: "null is none", resp: Response{Status: "error", Headers: headers, RetryAfter: json.RawMessage(`null`)},
			want: http.Header{"Retry-After": {"30"}, "Retry-After-Ms": {"9000"}, "X-Ratelimit-Reset-Requests": {"2s"}},
		},
		{
			name: "invalid retry_after is ignored", resp: Response{Status: "error", Headers: headers, RetryAfter: json.RawMessage(`-3`)},
			want: http.Header{"Retry-After": {"30"}, "Retry-After-Ms": {"9000"}, "X-Ratelimit-Reset-Requests": {"2s"}}, bad: true,
		},
		{
			name: "a success's retry_after is not read", resp: Response{Status: "success", Headers: ReplyHeaders{"x-ratelimit-remaining-tokens": "0"}, RetryAfter: json.RawMessage(`"soon"`)},
			want: http.Header{"X-Ratelimit-Remaining-Tokens": {"0"}},
		},
	} {
		got, err := backPressure(tc.resp, now)
		require.Equal(t, tc.want, got, tc.name)
		require.Equal(t, tc.bad, errors.Is(err, ErrInvalidRetryAfter), "%s: %v", tc.name, err)
	}
}

// TestReplyHeadersDecodeLeniently: a malformed headers entry, or a
// headers field that is no object, never costs the ActionResponse.
func TestReplyHeadersDecodeLeniently(t *testing.T) {
	t.Parallel()
	resp, err := parseResponse([]byte(`{"status":"error","code":429,"headers":{"retry-after":"2","x-ratelimit-remaining-requests":0,"x-ratelimit-reset-requests":1.5,"a":null,"b":true,"c":[1],"d":{}}}`))
	require.NoError(t, err)
	require.Equal(t, ReplyHeaders{"retry-after": "2", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5"}, resp.Headers)
	for _, h := range []string{`[1]`, `"x"`, `null`, `{}`, `7`} {
		resp, err := parseResponse([]byte(`{"status":"error","code":429,"error":"e","headers":` + h + `}`))
		require.NoError(t, err, h)
		require.Nil(t, resp.Headers, h)
		require.Equal(t, 429, resp.Code, h)
	}
}
