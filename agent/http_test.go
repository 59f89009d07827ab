package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// hits counts the requests a server received and keeps their headers.
type hits struct {
	mu      sync.Mutex
	n       int
	headers []http.Header
}

func (h *hits) record(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.headers = append(h.headers, r.Header.Clone())
}

func (h *hits) get() (int, []http.Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, append([]http.Header(nil), h.headers...)
}

// countingServer serves h on a loopback listener and counts the requests.
func countingServer(t *testing.T, tlsOn bool, h func(http.ResponseWriter, *http.Request)) (*httptest.Server, *hits) {
	t.Helper()
	c := &hits{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.record(r)
		h(w, r)
	}))
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, c
}

func redirectTo(loc string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, loc, http.StatusTemporaryRedirect) }
}

// TestHTTPRedirects: two real servers on loopback; 127.0.0.1 and localhost
// are different hosts to the client.
func TestHTTPRedirects(t *testing.T) {
	t.Parallel()
	secretHeaders := map[string]string{"X-Api-Key": "${KEY}", "Authorization": "Bearer ${KEY}"}
	getenv := func(string) string { return "sekrit" }

	t.Run("another host with configured headers is refused and never contacted", func(t *testing.T) {
		t.Parallel()
		other, otherHits := countingServer(t, false, reply(200, nil, `{"stolen":true}`))
		port := itoa(other.Listener.Addr().(*net.TCPAddr).Port)
		loc := "http://localhost:" + port + "/collect?sig=QUERYSECRET"
		first, _ := countingServer(t, false, redirectTo(loc))
		h, err := agent.NewHTTP(agent.HTTPConfig{URL: first.URL + "/v1", Headers: secretHeaders, Getenv: getenv})
		require.NoError(t, err)
		_, err = h.Run(context.Background(), req("r", `{}`))
		f := requireFailure(t, err)
		require.Equal(t, resilience.NetworkPermanent, f.Class)
		require.Equal(t, resilience.NetworkPermanent, resilience.Classify(err).Class, "the real classifier path")
		require.ErrorIs(t, err, agent.ErrRedirectRefused)
		var re *agent.RedirectError
		require.True(t, errors.As(err, &re))
		wantLoc := "http://localhost:" + port + "/collect?[redacted]"
		require.Equal(t, wantLoc, re.Location)
		require.Contains(t, err.Error(), "redirect to "+wantLoc+" refused")
		require.Contains(t, err.Error(), "another host")
		require.NotContains(t, err.Error(), "QUERYSECRET")
		require.NotContains(t, err.Error(), "sekrit")
		n, _ := otherHits.get()
		require.Zero(t, n, "the other host must never receive the request")
	})

	t.Run("https to http with configured headers is refused", func(t *testing.T) {
		t.Parallel()
		plain, plainHits := countingServer(t, false, reply(200, nil, `{}`))
		first, _ := countingServer(t, true, redirectTo(plain.URL+"/v1"))
		h, err := agent.NewHTTP(agent.HTTPConfig{URL: first.URL + "/v1", Headers: secretHeaders, Getenv: getenv, Client: first.Client()})
		require.NoError(t, err)
		_, err = h.Run(context.Background(), req("r", `{}`))
		f := requireFailure(t, err)
		require.Equal(t, resilience.NetworkPermanent, resilience.Classify(err).Class)
		require.Equal(t, resilience.NetworkPermanent, f.Class)
		require.Contains(t, err.Error(), "redirect to "+plain.URL+"/v1 refused")
		require.Contains(t, err.Error(), "over http instead of https")
		n, _ := plainHits.get()
		require.Zero(t, n, "no request in clear")
	})

	t.Run("same host with configured headers is followed", func(t *testing.T) {
		t.Parallel()
		srv, c := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", http.StatusPermanentRedirect)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true}`)
		})
		h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL + "/old", Headers: secretHeaders, Getenv: getenv})
		require.NoError(t, err)
		data, err := h.Run(context.Background(), req("r", `{}`))
		require.NoError(t, err)
		require.JSONEq(t, `{"ok":true}`, string(data))
		n, hdrs := c.get()
		require.Equal(t, 2, n)
		require.Equal(t, "sekrit", hdrs[1].Get("X-Api-Key"))
	})

	t.Run("another host without configured headers is followed", func(t *testing.T) {
		t.Parallel()
		other, otherHits := countingServer(t, false, reply(200, nil, `{"there":1}`))
		port := other.Listener.Addr().(*net.TCPAddr).Port
		first, _ := countingServer(t, false, redirectTo("http://localhost:"+itoa(port)+"/x"))
		h, err := agent.NewHTTP(agent.HTTPConfig{URL: first.URL})
		require.NoError(t, err)
		data, err := h.Run(context.Background(), req("r", `{}`))
		require.NoError(t, err)
		require.JSONEq(t, `{"there":1}`, string(data))
		n, hdrs := otherHits.get()
		require.Equal(t, 1, n)
		require.Empty(t, hdrs[0].Get("X-Api-Key"))
		require.Empty(t, hdrs[0].Get("Authorization"))
	})

	t.Run("redirects are capped", func(t *testing.T) {
		t.Parallel()
		loop, c := countingServer(t, false, redirectTo("/again"))
		h, err := agent.NewHTTP(agent.HTTPConfig{URL: loop.URL + "/start"})
		require.NoError(t, err)
		_, err = h.Run(context.Background(), req("r", `{}`))
		f := requireFailure(t, err)
		require.Equal(t, resilience.NetworkPermanent, f.Class)
		require.Equal(t, resilience.NetworkPermanent, resilience.Classify(err).Class)
		require.Contains(t, err.Error(), "stopped after 5 redirects")
		n, _ := c.get()
		require.Equal(t, agent.MaxRedirects+1, n)
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestHTTPTransportErrorRedactsURL: an endpoint URL with userinfo and an API
// key in its query string never shows them in the failure's text.
func TestHTTPTransportErrorRedactsURL(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: "http://user:hunter2@" + addr + "/v1/models:generate?key=APIKEYSECRET"})
	require.NoError(t, err)
	_, err = h.Run(context.Background(), req("r", `{}`))
	f := requireFailure(t, err)
	require.NotContains(t, err.Error(), "APIKEYSECRET")
	require.NotContains(t, err.Error(), "hunter2")
	require.Contains(t, err.Error(), "http://"+addr+"/v1/models:generate?[redacted]")
	// The chain keeps the dial error (refused, or reset when another test's
	// process grabbed the freed port meanwhile).
	var oe *net.OpError
	require.ErrorAs(t, f, &oe, "chain intact")
	require.Contains(t, []string{"dial", "read", "write"}, oe.Op, "a refused dial, or I/O on a port another test took")
	require.Equal(t, resilience.NetworkTransient, resilience.Classify(err).Class)
}
