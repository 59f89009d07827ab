package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redistest"
)

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// deadRedis is a client for a loopback port nothing listens on.
func deadRedis(t *testing.T) (redis.UniversalClient, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, addr
}

func TestOpsServerSetsEveryTimeout(t *testing.T) {
	t.Parallel()
	srv := newOpsServer(http.NotFoundHandler(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Equal(t, opsReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.Equal(t, opsReadTimeout, srv.ReadTimeout)
	require.Equal(t, opsWriteTimeout, srv.WriteTimeout)
	require.Equal(t, opsIdleTimeout, srv.IdleTimeout)
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		require.Positive(t, d, name)
	}
	require.Positive(t, srv.MaxHeaderBytes)
	require.NotNil(t, srv.ErrorLog)
}

// TestOpsHidesRedisErrors: with Redis down, /readyz (unauthenticated) and
// /api/v1/agents answer 503 with a generic message; the raw error, which
// names the Redis address, is logged instead.
func TestOpsHidesRedisErrors(t *testing.T) {
	t.Parallel()
	rdb, addr := deadRedis(t)
	logs := &logBuf{}
	cfg, err := config.Parse([]byte("agents: {a: {}}\n"), "test.yaml")
	require.NoError(t, err)
	w, err := New(cfg, rdb, WithLogger(logs.logger()), WithAPIToken("tok"), WithAgent("a", fixedAgent(&calls{}, nil)))
	require.NoError(t, err)
	srv := httptest.NewServer(w.OpsHandler())
	t.Cleanup(srv.Close)

	for _, path := range []string{"/readyz", "/api/v1/agents"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
		var got map[string]string
		require.NoError(t, json.Unmarshal(body, &got), path)
		require.Equal(t, "redis unavailable", got["error"], path)
		require.NotContains(t, string(body), addr, path)
		require.NotContains(t, string(body), "refused", path)
	}
	require.Contains(t, logs.String(), addr, "the raw error is logged")

	resp, err := http.Get(srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "liveness does not depend on Redis")
}

// TestRunClosesGivenListenerWhenStartupFails: Run owns the WithListener
// listener; when it cannot start (Redis unreachable) the listener is
// closed, not left bound.
func TestRunClosesGivenListenerWhenStartupFails(t *testing.T) {
	t.Parallel()
	rdb, _ := deadRedis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	w, err := New(config.Default(), rdb, WithListener(ln), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Error(t, w.Run(ctx))
	// Open, Accept would wait for the deadline and fail with a timeout.
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * time.Second))
	_, err = ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}

// brokenListener fails every Accept with a permanent error.
type brokenListener struct {
	net.Listener
	accepts chan struct{}
	once    sync.Once
}

var errBrokenAccept = errors.New("accept: the listener is broken")

func (b *brokenListener) Accept() (net.Conn, error) {
	b.once.Do(func() { close(b.accepts) })
	return nil, errBrokenAccept
}

// TestOpsServeErrorIsLogged: a Serve that fails is reported with the
// address, and the worker still runs and stops cleanly.
func TestOpsServeErrorIsLogged(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	bl := &brokenListener{Listener: ln, accepts: make(chan struct{})}
	logs := &logBuf{}
	w, err := New(config.Default(), rs.Client(), WithListener(bl), WithLogger(logs.logger()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	t.Cleanup(func() { // before Redis stops, even when an assertion fails
		if !stopped {
			cancel()
			<-done
		}
	})
	<-bl.accepts
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "ops server failed") }, 10*time.Second, 10*time.Millisecond)
	out := logs.String()
	require.Contains(t, out, errBrokenAccept.Error())
	require.Contains(t, out, "addr="+ln.Addr().String())
	require.Contains(t, out, "level=ERROR")
	cancel()
	stopped = true
	require.NoError(t, <-done)
	require.NotContains(t, strings.ToLower(logs.String()), "server closed")
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * time.Second))
	_, err = ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed, "the listener is closed at shutdown")
}
