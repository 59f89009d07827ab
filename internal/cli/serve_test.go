package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/redistest"
)

// TestServeRefusesOpenNonLoopback: without AGENTQ_API_TOKEN, serve on a
// non-loopback address is bad usage (exit 2, checked before Redis: the
// Redis URL here is dead), naming the token and --insecure-no-auth.
func TestServeRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "api.example.com:8080"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			_, errOut, code := runCmd(t, NewEnqueuerCmd, "", "--redis", "redis://127.0.0.1:1/0", "serve", "--http", addr)
			require.Equal(t, ExitUsage, code, errOut)
			require.Contains(t, errOut, "refusing to serve the HTTP API on "+addr+" without authentication")
			require.Contains(t, errOut, "AGENTQ_API_TOKEN")
			require.Contains(t, errOut, "--insecure-no-auth")
		})
	}
}

// TestServeRefusesUnusableToken: a token of white space (or holding white
// space or a control character) is bad usage, not protection, on any address.
func TestServeRefusesUnusableToken(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{" ", "\t", "s3cret ", "s3 cret", "s3cret\x1b"} {
		for _, addr := range []string{"0.0.0.0:0", "127.0.0.1:0"} {
			var out, errb bytes.Buffer
			app := &App{Out: &out, Err: &errb, In: strings.NewReader(""), Getenv: func(k string) string {
				if k == "AGENTQ_API_TOKEN" {
					return tok
				}
				return ""
			}}
			code := Main(context.Background(), app, NewEnqueuerCmd, []string{"--redis", "redis://127.0.0.1:1/0", "serve", "--http", addr})
			require.Equal(t, ExitUsage, code, "token %q on %s: %s", tok, addr, errb.String())
			require.Contains(t, errb.String(), "AGENTQ_API_TOKEN holds white space or a control character")
			if strings.Contains(tok, "s3") {
				require.NotContains(t, errb.String(), "s3", "the token itself is never printed")
			}
		}
	}
}

// testToken is a token serve accepts (at least MinTokenBytes).
const testToken = "serve-test-s3cret-token"

// TestServeRefusesWeakToken: a token under MinTokenBytes, or the
// placeholder of deploy/kubernetes/secret.example.yaml, is bad usage (exit
// 2, before Redis) on any address, with a message saying how to make one
// and without the token.
func TestServeRefusesWeakToken(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "secret.example.yaml"))
	require.NoError(t, err)
	var secret struct {
		StringData map[string]string `yaml:"stringData"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &secret))
	placeholder := secret.StringData["AGENTQ_API_TOKEN"]
	require.NotEmpty(t, placeholder, "secret.example.yaml has an AGENTQ_API_TOKEN")
	for _, tc := range []struct{ token, want string }{
		{"a", "AGENTQ_API_TOKEN is 1 bytes, too short to be a secret (at least 16)"},
		{"s3cret", "AGENTQ_API_TOKEN is 6 bytes, too short"},
		{strings.Repeat("x", MinTokenBytes-1), "AGENTQ_API_TOKEN is 15 bytes, too short"},
		{placeholder, "AGENTQ_API_TOKEN is the example's placeholder"},
		{"change-me-please-0123456789", "AGENTQ_API_TOKEN is the example's placeholder"},
	} {
		for _, addr := range []string{"0.0.0.0:0", "127.0.0.1:0"} {
			var out, errb bytes.Buffer
			app := &App{Out: &out, Err: &errb, In: strings.NewReader(""), Getenv: func(k string) string {
				if k == "AGENTQ_API_TOKEN" {
					return tc.token
				}
				return ""
			}}
			code := Main(context.Background(), app, NewEnqueuerCmd, []string{"--redis", "redis://127.0.0.1:1/0", "serve", "--http", addr})
			require.Equal(t, ExitUsage, code, "token %q on %s: %s", tc.token, addr, errb.String())
			require.Contains(t, errb.String(), tc.want)
			require.Contains(t, errb.String(), "openssl rand -hex 32", "the message says how to make a token")
			if len(tc.token) > 1 {
				require.NotContains(t, errb.String(), tc.token, "the token itself is never printed")
			}
		}
	}
}

// TestServeNonLoopbackWithTokenOrOptOut: a token, or --insecure-no-auth,
// lets serve listen on every interface.
func TestServeNonLoopbackWithTokenOrOptOut(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name  string
		token string
		flags []string
		warn  string
	}{
		{"token", testToken, nil, "auth=true"},
		{"insecure-no-auth", "", []string{"--insecure-no-auth"}, "--insecure-no-auth: the API accepts requests without authentication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, port, err := net.SplitHostPort(freeLoopback(t))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			var errb syncBuffer
			go func() {
				app := &App{Out: &errb, Err: &errb, In: strings.NewReader(""), Getenv: func(k string) string {
					if k == "AGENTQ_API_TOKEN" {
						return tc.token
					}
					return ""
				}}
				args := append([]string{"--redis", srv.URL(), "serve", "--http", "0.0.0.0:" + port}, tc.flags...)
				done <- Main(ctx, app, NewEnqueuerCmd, args)
			}()
			deadline := time.Now().Add(20 * time.Second)
			for {
				code, err := httpGet("http://127.0.0.1:" + port + "/healthz")
				if err == nil && code == 200 {
					break
				}
				select {
				case c := <-done:
					t.Fatalf("serve exited with %d: %s", c, errb.String())
				default:
				}
				require.True(t, time.Now().Before(deadline), "serve did not answer: %s", errb.String())
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			require.Equal(t, ExitOK, <-done, errb.String())
			require.Contains(t, errb.String(), tc.warn)
		})
	}
}

// TestServeConsole: serve mounts the web console at /ui/ behind the token
// (a browser is sent to the login form, a bearer script gets the page);
// --no-console leaves /ui/ to the API's JSON 404.
func TestServeConsole(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name  string
		flags []string
	}{{"on", nil}, {"off", []string{"--no-console"}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := freeLoopback(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			var errb syncBuffer
			go func() {
				app := &App{Out: &errb, Err: &errb, In: strings.NewReader(""), Getenv: func(k string) string {
					if k == "AGENTQ_API_TOKEN" {
						return testToken
					}
					return ""
				}}
				done <- Main(ctx, app, NewEnqueuerCmd, append([]string{"--redis", srv.URL(), "serve", "--http", addr}, tc.flags...))
			}()
			deadline := time.Now().Add(20 * time.Second)
			for {
				code, err := httpGet("http://" + addr + "/healthz")
				if err == nil && code == 200 {
					break
				}
				select {
				case c := <-done:
					t.Fatalf("serve exited with %d: %s", c, errb.String())
				default:
				}
				require.True(t, time.Now().Before(deadline), "serve did not answer: %s", errb.String())
				time.Sleep(20 * time.Millisecond)
			}
			client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			get := func(auth string) *http.Response {
				req, err := http.NewRequest("GET", "http://"+addr+"/ui/", nil)
				require.NoError(t, err)
				if auth != "" {
					req.Header.Set("Authorization", "Bearer "+auth)
				}
				res, err := client.Do(req)
				require.NoError(t, err)
				_ = res.Body.Close()
				return res
			}
			if tc.name == "on" {
				require.Equal(t, http.StatusSeeOther, get("").StatusCode)
				require.Equal(t, "/ui/login?next=%2Fui%2F", get("").Header.Get("Location"))
				res := get(testToken)
				require.Equal(t, http.StatusOK, res.StatusCode)
				require.Contains(t, res.Header.Get("Content-Type"), "text/html")
				require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
			} else {
				res := get(testToken)
				require.Equal(t, http.StatusNotFound, res.StatusCode)
				require.Contains(t, res.Header.Get("Content-Type"), "application/json")
			}
			cancel()
			require.Equal(t, ExitOK, <-done, errb.String())
		})
	}
}

// TestServeRefusesBadWaiterCaps: --max-waiters and
// --max-waiters-per-client out of range are bad usage naming the flag.
func TestServeRefusesBadWaiterCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--max-waiters", "0"}, "--max-waiters must be positive"},
		{[]string{"--max-waiters", "-5"}, "--max-waiters must be positive"},
		{[]string{"--max-waiters-per-client", "-1"}, "--max-waiters-per-client"},
		{[]string{"--max-waiters", "10", "--max-waiters-per-client", "11"}, "--max-waiters-per-client"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--redis", "redis://127.0.0.1:1/0", "serve"}, tc.args...)
			_, errOut, code := runCmd(t, NewEnqueuerCmd, "", args...)
			require.Equal(t, ExitUsage, code, errOut)
			require.Contains(t, errOut, tc.flag)
		})
	}
}
