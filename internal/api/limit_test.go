package api_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/redistest"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address local (127.0.0.1, 127.0.0.2, …): another client address.
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

func get(t *testing.T, c *http.Client, url, auth string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return roundTrip(t, c, req)
}

// TestBearerGuessingLockedOut: wrong bearer tokens from one address are
// counted; past the limit that address gets 429 too_many_requests with
// Retry-After on every authenticated route — the right token included,
// which is not even compared — while another address is unaffected. Each
// failure is logged with the address and the route, never the token.
func TestBearerGuessingLockedOut(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	logs := &lockedWriter{}
	const token = "api-s3cret-Tk9"
	s := api.New(rs.Client(), testConfig(), api.Options{Token: token, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	base := "http://" + ln.Addr().String()
	guesser, other := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for i := range httpx.DefaultMaxFailures {
		r := get(t, guesser, base+"/api/v1/tasks/x", "Bearer guess-"+strconv.Itoa(i))
		requireError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
	}
	for _, path := range []string{"/api/v1/tasks/x", "/api/v1/agents", "/api/v1/deadletters"} {
		r := get(t, guesser, base+path, "Bearer "+token)
		requireError(t, r, http.StatusTooManyRequests, api.CodeTooManyRequests)
		secs, err := strconv.Atoi(r.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After in seconds")
		require.Positive(t, secs)
		require.LessOrEqual(t, secs, 60)
	}
	r := get(t, guesser, base+"/healthz", "")
	require.Equal(t, http.StatusOK, r.status, "routes without a token stay open")

	r = get(t, other, base+"/api/v1/agents", "Bearer "+token)
	require.Equal(t, http.StatusOK, r.status, "another address is unaffected: %s", r.body)
	r = get(t, other, base+"/api/v1/agents", "Bearer nope")
	requireError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)

	out := logs.String()
	require.Contains(t, out, "authentication failed")
	require.Contains(t, out, "client=127.0.0.1")
	require.Contains(t, out, "client=127.0.0.2")
	require.Contains(t, out, `route="GET /api/v1/tasks/{id}"`)
	require.NotContains(t, out, "guess-")
	require.NotContains(t, out, token)
}
