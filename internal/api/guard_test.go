package api_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// served is an API served by Server.Serve on a loopback listener, as
// `enqueuer serve` does, with no token (the case the guards protect).
type served struct {
	base  string // http://127.0.0.1:PORT
	port  string
	store *tasks.Store
}

func serveLoopback(t *testing.T) served {
	t.Helper()
	rs := redistest.Start(t)
	rdb := rs.Client()
	s := api.New(rdb, testConfig(), api.Options{Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	return served{base: "http://" + ln.Addr().String(), port: port, store: tasks.NewStore(rdb)}
}

type rawReq struct {
	method, path, body string
	header             map[string]string
	host               string
}

func send(t *testing.T, base string, rq rawReq) reply {
	t.Helper()
	var rd io.Reader
	if rq.body != "" {
		rd = strings.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, base+rq.path, rd)
	require.NoError(t, err)
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	if rq.host != "" {
		req.Host = rq.host
	}
	return roundTrip(t, &http.Client{Timeout: 20 * time.Second}, req)
}

// TestWritesRequireJSON: a write whose body is not declared JSON is 415
// and enqueues nothing, which stops a cross-site text/plain form POST.
func TestWritesRequireJSON(t *testing.T) {
	t.Parallel()
	e := serveLoopback(t)
	for i, tc := range []struct {
		name, ct string
		path     string
		body     string
		status   int
		code     string
	}{
		{"json", "application/json", "/api/v1/tasks", "", 202, ""},
		{"json with charset", "application/json; charset=utf-8", "/api/v1/tasks", "", 202, ""},
		{"json, case-insensitive", "Application/JSON", "/api/v1/tasks", "", 202, ""},
		{"text/plain (the CSRF form)", "text/plain", "/api/v1/tasks", "", 415, api.CodeUnsupportedMediaType},
		{"form urlencoded", "application/x-www-form-urlencoded", "/api/v1/tasks", "", 415, api.CodeUnsupportedMediaType},
		{"multipart", "multipart/form-data; boundary=x", "/api/v1/tasks", "", 415, api.CodeUnsupportedMediaType},
		{"no content type with a body", "", "/api/v1/tasks", "", 415, api.CodeUnsupportedMediaType},
		{"json lookalike", "application/jsonp", "/api/v1/tasks", "", 415, api.CodeUnsupportedMediaType},
		{"garbage", ";;", "/api/v1/tasks", "", 415, api.CodeUnsupportedMediaType},
		{"requeue without body nor type passes", "", "/api/v1/deadletters/nope/requeue", "-", 404, api.CodeNotFound},
		{"requeue declared text/plain", "text/plain", "/api/v1/deadletters/nope/requeue", "-", 415, api.CodeUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "ct-" + string(rune('a'+i))
			body := tc.body
			switch body {
			case "":
				body = `{"id":"` + id + `","agent":"tool"}`
			case "-":
				body = ""
			}
			h := map[string]string{}
			if tc.ct != "" {
				h["Content-Type"] = tc.ct
			}
			r := send(t, e.base, rawReq{method: "POST", path: tc.path, body: body, header: h})
			if tc.code != "" {
				requireError(t, r, tc.status, tc.code)
			}
			require.Equal(t, tc.status, r.status, r.body)
			if tc.status == 415 {
				require.Contains(t, r.json["error"], "Content-Type must be application/json")
				if tc.path == "/api/v1/tasks" {
					_, err := e.store.Get(context.Background(), id)
					require.ErrorIs(t, err, tasks.ErrNotFound, "a refused write enqueues nothing")
				}
			}
		})
	}
}

// TestCrossOriginRefused: a request whose Origin is not the API's own is
// 403 forbidden, reads included; the API's own origin passes.
func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	e := serveLoopback(t)
	for i, tc := range []struct {
		name, origin string
		ok           bool
	}{
		{"no origin", "", true},
		{"own origin", e.base, true},
		{"own origin, upper case", strings.ToUpper(e.base), true},
		{"another site", "http://evil.example", false},
		{"another port", "http://127.0.0.1:1", false},
		{"localhost is another origin than 127.0.0.1", "http://localhost:" + e.port, false},
		// Only this server listens on that host and port; behind a TLS
		// proxy the browser's origin is https.
		{"https, same host and port", "https://127.0.0.1:" + e.port, true},
		{"https, default port", "https://127.0.0.1", false},
		{"null (sandboxed frame, file:)", "null", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "origin-" + string(rune('a'+i))
			h := map[string]string{"Content-Type": "application/json"}
			if tc.origin != "" {
				h["Origin"] = tc.origin
			}
			w := send(t, e.base, rawReq{method: "POST", path: "/api/v1/tasks", body: `{"id":"` + id + `","agent":"tool"}`, header: h})
			g := send(t, e.base, rawReq{method: "GET", path: "/api/v1/deadletters", header: map[string]string{"Origin": h["Origin"]}})
			_, err := e.store.Get(context.Background(), id)
			if tc.ok {
				require.Equal(t, 202, w.status, w.body)
				require.Equal(t, 200, g.status, g.body)
				require.NoError(t, err)
				return
			}
			requireError(t, w, 403, api.CodeForbidden, "cross-origin request refused", tc.origin)
			requireError(t, g, 403, api.CodeForbidden, "cross-origin request refused")
			require.ErrorIs(t, err, tasks.ErrNotFound, "nothing enqueued")
		})
	}
}

// TestLoopbackHostChecked: on a loopback address only loopback Host
// headers are answered, which defeats DNS rebinding (the page's Origin and
// Host are then both evil.example).
func TestLoopbackHostChecked(t *testing.T) {
	t.Parallel()
	e := serveLoopback(t)
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + e.port, true},
		{"localhost:" + e.port, true},
		{"LOCALHOST:" + e.port, true},
		{"localhost", true},
		{"127.0.0.1", true},
		{"127.0.0.2:" + e.port, true},
		{"[::1]:" + e.port, true},
		{"evil.example:" + e.port, false},
		{"evil.example", false},
		{"127.0.0.1:1", false},
		{"10.0.0.1:" + e.port, false},
		{"localhost.evil.example:" + e.port, false},
	} {
		t.Run(tc.host, func(t *testing.T) {
			r := send(t, e.base, rawReq{method: "GET", path: "/api/v1/deadletters", host: tc.host})
			if tc.ok {
				require.Equal(t, 200, r.status, r.body)
				return
			}
			requireError(t, r, 403, api.CodeForbidden, "is not this server", tc.host)
		})
	}
	// The rebinding attack itself: Origin and Host agree, both foreign.
	r := send(t, e.base, rawReq{method: "GET", path: "/api/v1/deadletters", host: "evil.example:" + e.port,
		header: map[string]string{"Origin": "http://evil.example:" + e.port}})
	requireError(t, r, 403, api.CodeForbidden)
}

// TestHostNotCheckedOffLoopback: bound elsewhere (behind a proxy, with a
// token) any Host is answered; the Origin check still applies.
func TestHostNotCheckedOffLoopback(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := api.New(rs.Client(), testConfig(), api.Options{Addr: "0.0.0.0:8080", Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	r := send(t, hs.URL, rawReq{method: "GET", path: "/api/v1/deadletters", host: "api.example.com"})
	require.Equal(t, 200, r.status, r.body)
	r = send(t, hs.URL, rawReq{method: "GET", path: "/api/v1/deadletters", host: "api.example.com", header: map[string]string{"Origin": "https://api.example.com"}})
	require.Equal(t, 200, r.status, "own origin behind a TLS proxy (default port): %s", r.body)
	r = send(t, hs.URL, rawReq{method: "GET", path: "/api/v1/deadletters", host: "api.example.com", header: map[string]string{"Origin": "https://other.example.com"}})
	requireError(t, r, 403, api.CodeForbidden)

	// Handler with a loopback Addr checks Host as Serve does.
	s = api.New(rs.Client(), testConfig(), api.Options{Addr: "127.0.0.1:8080", Logger: slog.New(slog.DiscardHandler)})
	hs2 := httptest.NewServer(s.Handler())
	t.Cleanup(hs2.Close)
	r = send(t, hs2.URL, rawReq{method: "GET", path: "/healthz", host: "evil.example:8080"})
	requireError(t, r, 403, api.CodeForbidden)
	r = send(t, hs2.URL, rawReq{method: "GET", path: "/healthz", host: "localhost:8080"})
	require.Equal(t, 200, r.status, r.body)
}

func TestIsLoopbackAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true, "127.1.2.3:1": true, "LocalHost:1": true, "127.0.0.1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false, "api.example.com:8080": false, "": false,
		"localhost.example:80": false,
	} {
		require.Equal(t, want, api.IsLoopbackAddr(addr), addr)
	}
}

// TestHealthzHidesRedisError: /healthz needs no token, so a Redis failure
// is "redis unavailable" there, never the raw error (which names Redis's
// address); the raw error is logged.
func TestHealthzHidesRedisError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	logs := &lockedWriter{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	hs := httptest.NewServer(api.New(rdb, testConfig(), api.Options{Logger: logger}).Handler())
	t.Cleanup(hs.Close)
	r := do(t, "GET", hs.URL+"/healthz", "", "")
	requireError(t, r, 503, api.CodeUnavailable)
	require.Equal(t, "redis unavailable", r.json["error"])
	require.NotContains(t, r.body, dead)
	hs.Close()
	require.Contains(t, logs.String(), dead)
}

type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
