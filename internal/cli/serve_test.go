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

// testToken is a token serve accepts (at least MinTokenBytes).
const testToken = "serve-test-s3cret-token"

// tokenEnv is an environment whose AGENTQ_API_TOKEN is token.
func tokenEnv(token string) func(string) string {
	return func(k string) string {
		if k == "AGENTQ_API_TOKEN" {
			return token
		}
		return ""
	}
}

// TestServeRefusesBadToken: a token of white space (or holding white
// space or a control character), under MinTokenBytes, or the placeholder
// of deploy/kubernetes/secret.example.yaml is bad usage, not protection
// (exit 2, before Redis: the Redis URL here is dead), on any address; a
// weak token's message says how to make one. The token is never printed.
func TestServeRefusesBadToken(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "secret.example.yaml"))
	require.NoError(t, err)
	var secret struct {
		StringData map[string]string `yaml:"stringData"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &secret))
	placeholder := secret.StringData["AGENTQ_API_TOKEN"]
	require.NotEmpty(t, placeholder, "secret.example.yaml has an AGENTQ_API_TOKEN")
	const unusable, weak = "AGENTQ_API_TOKEN holds white space or a control character", "openssl rand -hex 32"
	for _, tc := range []struct {
		token, want, howTo string
		secret             string // what of the token must not be printed
	}{
		{" ", unusable, "", ""},
		{"\t", unusable, "", ""},
		{"s3cret ", unusable, "", "s3"},
		{"s3 cret", unusable, "", "s3"},
		{"s3cret\x1b", unusable, "", "s3"},
		{"a", "AGENTQ_API_TOKEN is 1 bytes, too short to be a secret (at least 16)", weak, ""},
		{"s3cret", "AGENTQ_API_TOKEN is 6 bytes, too short", weak, "s3cret"},
		{strings.Repeat("x", MinTokenBytes-1), "AGENTQ_API_TOKEN is 15 bytes, too short", weak, strings.Repeat("x", MinTokenBytes-1)},
		{placeholder, "AGENTQ_API_TOKEN is the example's placeholder", weak, placeholder},
		{"change-me-please-0123456789", "AGENTQ_API_TOKEN is the example's placeholder", weak, "change-me-please-0123456789"},
	} {
		for _, addr := range []string{"0.0.0.0:0", "127.0.0.1:0"} {
			var out, errb bytes.Buffer
			app := &App{Out: &out, Err: &errb, In: strings.NewReader(""), Getenv: tokenEnv(tc.token)}
			code := Main(context.Background(), app, NewEnqueuerCmd, []string{"--redis", "redis://127.0.0.1:1/0", "serve", "--http", addr})
			require.Equal(t, ExitUsage, code, "token %q on %s: %s", tc.token, addr, errb.String())
			require.Contains(t, errb.String(), tc.want)
			require.Contains(t, errb.String(), tc.howTo, "the message says how to make a token")
			if tc.secret != "" {
				require.NotContains(t, errb.String(), tc.secret, "the token itself is never printed")
			}
		}
	}
}

// startServe runs `enqueuer serve --http addr` with flags on redisURL and
// token until ctx ends, and waits for it to answer /healthz; done gets its
// exit code, errb its output.
func startServe(t *testing.T, ctx context.Context, redisURL, token, addr string, flags ...string) (done chan int, errb *syncBuffer) {
	t.Helper()
	done, errb = make(chan int, 1), &syncBuffer{}
	go func() {
		app := &App{Out: errb, Err: errb, In: strings.NewReader(""), Getenv: tokenEnv(token)}
		done <- Main(ctx, app, NewEnqueuerCmd, append([]string{"--redis", redisURL, "serve", "--http", addr}, flags...))
	}()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, err := httpGet("http://127.0.0.1:" + port + "/healthz")
		if err == nil && code == 200 {
			return done, errb
		}
		select {
		case c := <-done:
			t.Fatalf("serve exited with %d: %s", c, errb.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "serve did not answer: %s", errb.String())
		time.Sleep(20 * time.Millisecond)
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
		{"token", testToken, nil, `"auth":true`},
		{"insecure-no-auth", "", []string{"--insecure-no-auth"}, "--insecure-no-auth: the API accepts requests without authentication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, port, err := net.SplitHostPort(freeLoopback(t))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done, errb := startServe(t, ctx, srv.URL(), tc.token, "0.0.0.0:"+port, tc.flags...)
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
			done, errb := startServe(t, ctx, srv.URL(), testToken, addr, tc.flags...)
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
