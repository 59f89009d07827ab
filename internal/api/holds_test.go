package api_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/httpx"
)

// fromAddr is an HTTP client whose connections come from loopback
// address ip (127.0.0.0/8 is all loopback on Linux), one connection per
// request.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// holdOpen starts a wait or an event stream of task id from ip and
// returns once the server holds it; cancel ends it.
func holdOpen(t *testing.T, e env, holds *httpx.Holds, kind, ip, id string) (cancel func()) {
	t.Helper()
	before := holds.Open()
	ctx, cancel := context.WithCancel(context.Background())
	url := e.url + "/api/v1/tasks/" + id + "/events"
	if kind == "wait" {
		url = e.url + "/api/v1/tasks/" + id + "?wait=50s"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	go func() {
		resp, err := fromAddr(ip).Do(req)
		if err == nil {
			<-ctx.Done()
			_ = resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return holds.Open() == before+1 }, 10*time.Second, 5*time.Millisecond, "%s from %s held", kind, ip)
	return cancel
}

// refusedFull asserts that a wait and a stream of id from ip are refused
// with 503 over_capacity and Retry-After.
func refusedFull(t *testing.T, e env, ip, id, why string) {
	t.Helper()
	for _, path := range []string{"/api/v1/tasks/" + id + "?wait=50s", "/api/v1/tasks/" + id + "/events"} {
		resp, err := fromAddr(ip).Get(e.url + path)
		require.NoError(t, err)
		var body api.ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		_ = resp.Body.Close()
		require.Equal(t, api.CodeOverCapacity, body.Code, "%s: %s", why, body.Error)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s from %s", why, path, ip)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), "%s: %s", why, path)
	}
}

// TestHoldsCapWaitsAndStreams: with a cap of 2 per client address and 3
// in all, a client's third wait or stream is 503 over_capacity with
// Retry-After while another address still gets one; then the process's
// fourth is refused from any address; ending one frees its slot.
func TestHoldsCapWaitsAndStreams(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"stream", "wait"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			holds := httpx.NewHolds(httpx.HoldsOptions{Max: 3, PerClient: 2})
			e := setup(t, api.Options{Holds: holds})
			enqueueQueued(t, e, "h1")
			first := holdOpen(t, e, holds, kind, "127.0.0.1", "h1")
			defer first()
			defer holdOpen(t, e, holds, kind, "127.0.0.1", "h1")()
			refusedFull(t, e, "127.0.0.1", "h1", "per client")
			defer holdOpen(t, e, holds, kind, "127.0.0.2", "h1")()
			refusedFull(t, e, "127.0.0.3", "h1", "per process")
			refusedFull(t, e, "127.0.0.2", "h1", "per process")

			first() // the client goes: its slot is free again
			require.Eventually(t, func() bool { return holds.Open() == 2 }, 10*time.Second, 5*time.Millisecond)
			defer holdOpen(t, e, holds, kind, "127.0.0.3", "h1")()
			require.Equal(t, 3, holds.Open())
		})
	}
}
