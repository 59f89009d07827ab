package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/resilience"
)

// seen records what the server received.
type seen struct {
	mu     sync.Mutex
	method string
	header http.Header
	body   []byte
}

func (s *seen) get() (string, http.Header, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.method, s.header, s.body
}

func server(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.method, s.header, s.body = r.Method, r.Header.Clone(), body
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

func reply(status int, header map[string]string, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func TestHTTPOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		handler func(http.ResponseWriter, *http.Request)
		cfg     agent.HTTPConfig
		data    string // expected data when check is nil
		check   func(t *testing.T, f *resilience.Failure)
	}{
		{name: "2xx JSON", handler: reply(200, nil, ` {"answer":42} `), data: `{"answer":42}`},
		{name: "201 JSON array", handler: reply(201, nil, `[1,2]`), data: `[1,2]`},
		{name: "2xx non-JSON is a string", handler: reply(200, nil, "plain \"text\"\n"), data: `"plain \"text\""`},
		{name: "2xx empty is null", handler: reply(204, nil, ""), data: `null`},
		{
			name: "429 keeps Retry-After", handler: reply(429, map[string]string{"Retry-After": "7", "X-Should-Retry": "true"}, `{"error":{"type":"rate_limit_error"}}`),
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, 429, f.Status)
				require.Equal(t, "7", f.Header.Get("Retry-After"))
				require.Equal(t, "true", f.Header.Get("X-Should-Retry"))
				require.Equal(t, `{"error":{"type":"rate_limit_error"}}`, f.Text)
				require.Empty(t, f.Class)
			},
		},
		{
			name: "500 body in text", handler: reply(500, nil, "upstream exploded\n"),
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, 500, f.Status)
				require.Equal(t, "upstream exploded", f.Text)
			},
		},
		{
			name: "error body truncated to 8 KiB", handler: reply(400, nil, strings.Repeat("e", 100<<10)),
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, 400, f.Status)
				require.Len(t, f.Text, 8<<10)
			},
		},
		{
			name: "oversized 2xx is logic error", handler: reply(200, nil, strings.Repeat("x", 2000)),
			cfg: agent.HTTPConfig{MaxResponse: 1024},
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, resilience.LogicError, f.Class)
				require.Equal(t, "response exceeds 1024 bytes", f.Text)
			},
		},
		{name: "2xx exactly at the cap", handler: reply(200, nil, `"`+strings.Repeat("x", 1022)+`"`), cfg: agent.HTTPConfig{MaxResponse: 1024}, data: `"` + strings.Repeat("x", 1022) + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := server(t, tc.handler)
			cfg := tc.cfg
			cfg.URL = srv.URL
			h, err := agent.NewHTTP(cfg)
			require.NoError(t, err)
			data, err := h.Run(context.Background(), req("h", `{"q":1}`))
			if tc.check == nil {
				require.NoError(t, err)
				require.JSONEq(t, tc.data, string(data))
				return
			}
			require.Nil(t, data)
			tc.check(t, requireFailure(t, err))
		})
	}
}

func TestHTTPRequestShape(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LLM_API_KEY": "s3cret", "REGION": "eu"}
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"request body (default)", "", ""},
		{"params body", agent.BodyParams, `{"prompt":"hi","n":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, s := server(t, reply(200, nil, `{}`))
			h, err := agent.NewHTTP(agent.HTTPConfig{
				URL:  srv.URL + "/v1/run",
				Body: tc.body,
				Headers: map[string]string{
					"Authorization": "Bearer ${LLM_API_KEY}",
					"X-Region":      "${REGION}-${UNSET_VAR}-$REGION",
				},
				Getenv: func(k string) string { return env[k] },
			})
			require.NoError(t, err)
			r := req("task-1", `{"prompt":"hi","n":2}`)
			r.CorrelationID = "corr"
			_, err = h.Run(context.Background(), r)
			require.NoError(t, err)

			method, header, body := s.get()
			require.Equal(t, http.MethodPost, method)
			require.Equal(t, "application/json", header.Get("Content-Type"))
			require.Equal(t, "Bearer s3cret", header.Get("Authorization"))
			require.Equal(t, "eu--$REGION", header.Get("X-Region"))
			if tc.want != "" {
				require.JSONEq(t, tc.want, string(body))
				return
			}
			var got agent.Request
			require.NoError(t, json.Unmarshal(body, &got))
			require.Equal(t, "task-1", got.TaskID)
			require.Equal(t, "corr", got.CorrelationID)
			require.JSONEq(t, `{"prompt":"hi","n":2}`, string(got.Params))
		})
	}
}

func TestHTTPHeadersExpandedAtRequestTime(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	key := "first"
	getenv := func(string) string { mu.Lock(); defer mu.Unlock(); return key }
	srv, s := server(t, reply(200, nil, `{}`))
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL, Headers: map[string]string{"X-Key": "${KEY}"}, Getenv: getenv})
	require.NoError(t, err)
	for _, want := range []string{"first", "rotated"} {
		mu.Lock()
		key = want
		mu.Unlock()
		_, err = h.Run(context.Background(), req("k", `{}`))
		require.NoError(t, err)
		_, header, _ := s.get()
		require.Equal(t, want, header.Get("X-Key"))
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	h, err := agent.NewHTTP(agent.HTTPConfig{URL: "http://" + addr + "/"})
	require.NoError(t, err)
	_, err = h.Run(context.Background(), req("refused", `{}`))
	f := requireFailure(t, err)
	require.Empty(t, f.Class)
	require.Zero(t, f.Status)
	var opErr *net.OpError
	require.True(t, errors.As(err, &opErr), "chain: %v", err)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
}

func TestHTTPContextEnds(t *testing.T) {
	t.Parallel()
	block := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	slowBody := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"partial":`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	for _, tc := range []struct {
		name    string
		handler func(http.ResponseWriter, *http.Request)
		cancel  bool
		class   resilience.Class
		is      error
	}{
		{"timeout waiting for headers", block, false, resilience.Timeout, context.DeadlineExceeded},
		{"timeout reading body", slowBody, false, resilience.Timeout, context.DeadlineExceeded},
		{"canceled", block, true, resilience.Canceled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := server(t, tc.handler)
			h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if tc.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err = h.Run(ctx, req("ctx", `{}`))
			f := requireFailure(t, err)
			require.Equal(t, tc.class, f.Class)
			require.ErrorIs(t, err, tc.is)
			require.Less(t, time.Since(start), 3*time.Second)
		})
	}
}

func TestNewHTTPValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  agent.HTTPConfig
	}{
		{"empty url", agent.HTTPConfig{}},
		{"relative url", agent.HTTPConfig{URL: "/v1/run"}},
		{"bad scheme", agent.HTTPConfig{URL: "ftp://host/x"}},
		{"bad body", agent.HTTPConfig{URL: "http://h/", Body: "everything"}},
		{"negative cap", agent.HTTPConfig{URL: "http://h/", MaxResponse: -1}},
		{"bad header name", agent.HTTPConfig{URL: "http://h/", Headers: map[string]string{"Bad Name": "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := agent.NewHTTP(tc.cfg)
			require.Error(t, err)
		})
	}
}

func TestExpandEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "x", "KEY_1": "k$1", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"${A}", "x"},
		{"Bearer ${KEY_1}", "Bearer k$1"},
		{"${A}${A}-${A}", "xx-x"},
		{"$A", "$A"},
		{"${UNSET}", ""},
		{"a${EMPTY}b", "ab"},
		{"${", "${"},
		{"x${A", "x${A"},
		{"${}", "${}"},
		{"${not valid}${A}", "${not valid}x"},
		{"$${A}", "$x"},
		{"${KEY_1}${A}", "k$1x"},
	} {
		require.Equal(t, tc.want, agent.ExpandEnv(tc.in, getenv), "ExpandEnv(%q)", tc.in)
	}
}
