package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestConsoleCancelRunningTask: `enqueuer serve` with AGENTQ_API_TOKEN set
// sends the console to its login form without a session and opens it to
// "Authorization: Bearer"; logged in with the form, the Cancel task button
// of a task whose HTTP agent is running (a real worker) stops the agent's
// call and ends the task canceled with the reason typed, for good.
func TestConsoleCancelRunningTask(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	var calls atomic.Int32
	aborted := make(chan struct{}, 4)
	done := make(chan struct{})
	ag := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body) // then a closed connection ends r's context
		select {
		case <-r.Context().Done():
			aborted <- struct{}{}
		case <-done:
			rw.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(ag.Close)
	t.Cleanup(func() { close(done) }) // before ag.Close (cleanups run last first)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults:
  timeout: 2m
  retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 100ms}
agents:
  slow:
    http: {url: %q}
`, ag.URL))
	const token = "console-e2e-s3cret"
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	addr := freeAddr(t)
	startEnv(t, "serve", []string{"AGENTQ_API_TOKEN=" + token}, b.enqueuer, "--config", cfg, "--redis", srv.URL(), "serve", "--http", addr)
	base := "http://" + addr
	waitHTTP(t, base+"/healthz", 30*time.Second)
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values, hdr ...string) (int, http.Header, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, base+path, body)
		require.NoError(t, err)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for _, h := range hdr {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		res, err := noFollow.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, res.Header, string(b)
	}

	// No session: the login form, never a page.
	for _, p := range []string{"/ui/", "/ui/deadletters", "/ui/tasks/x", "/ui/deadletters/export"} {
		code, h, _ := do("GET", p, nil)
		require.Equal(t, http.StatusSeeOther, code, p)
		require.True(t, strings.HasPrefix(h.Get("Location"), "/ui/login"), "%s → %s", p, h.Get("Location"))
	}
	code, _, _ := do("GET", "/ui/", nil, "Authorization: Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _, _ = do("POST", "/ui/tasks/x/cancel", url.Values{}, "Origin: "+base)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _, page := do("GET", "/ui/", nil, "Authorization: Bearer "+token)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, ">Dead letters</a>")

	// A running task.
	_, errOut, rc := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "slow", "--id", "long-call")
	require.Equal(t, 0, rc, errOut)
	poll(t, 30*time.Second, "the agent to be called", func() bool { return calls.Load() == 1 })
	st := tasks.NewStore(srv.Client())
	poll(t, 10*time.Second, "the task to be active", func() bool {
		v, err := st.Get(context.Background(), "long-call")
		return err == nil && v.State == tasks.StateActive
	})

	// Log in with the form, open the task, press Cancel task.
	code, h, _ := do("POST", "/ui/login", url.Values{"token": {token}, "next": {"/ui/tasks/long-call"}}, "Origin: "+base)
	require.Equal(t, http.StatusSeeOther, code)
	ck := h.Get("Set-Cookie")
	require.Contains(t, ck, "HttpOnly")
	require.Contains(t, ck, "SameSite=Strict")
	cookie := "Cookie: " + strings.SplitN(ck, ";", 2)[0]
	code, _, page = do("GET", h.Get("Location"), nil, cookie)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `id="task-state">active<`)
	m := regexp.MustCompile(`<form action="([^"]+/cancel)" method="post"[^>]*><input type="hidden" name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, m, "the page of a running task has the Cancel task form")
	require.Equal(t, "/ui/tasks/long-call/cancel", m[1])
	code, _, _ = do("POST", m[1], url.Values{"reason": {"stuck"}}, cookie, "Origin: "+base)
	require.Equal(t, http.StatusForbidden, code, "no CSRF token, no cancel")
	canceledAt := time.Now()
	code, h, _ = do("POST", m[1], url.Values{"csrf": {m[2]}, "reason": {"stuck"}}, cookie, "Origin: "+base)
	require.Equal(t, http.StatusSeeOther, code)
	select {
	case <-aborted:
		t.Logf("the agent's call ended %s after the cancel", time.Since(canceledAt).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's call still runs 10s after the console's cancel")
	}
	code, _, page = do("GET", h.Get("Location"), nil, cookie)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, "Canceled task long-call.")
	require.Contains(t, page, `id="task-state">canceled<`)
	require.Contains(t, page, `id="task-cancel-reason">stuck<`)
	require.NotContains(t, page, "Cancel task</button>")
	requireCanceled(t, b, srv.URL(), "long-call", "stuck")

	// Not retried, not called again; a second press says it has ended.
	time.Sleep(1500 * time.Millisecond)
	require.Equal(t, int32(1), calls.Load(), "the canceled task's agent was called again")
	v := inspectorTask(t, b, srv.URL(), "long-call")
	require.Equal(t, tasks.StateCanceled, v.State)
	code, _, _ = do("POST", m[1], url.Values{"csrf": {m[2]}}, cookie, "Origin: "+base)
	require.Equal(t, http.StatusConflict, code)
}
