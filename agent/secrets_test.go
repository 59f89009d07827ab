package agent_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/redact"
)

const echoedKey = "sk-test-Zq81/x+KeyThatMustNotLeak"

// echoAuth answers status with a body that echoes the Authorization header
// raw, base64-encoded and URL-escaped, as a chatty gateway would.
func echoAuth(status int) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error":"invalid api key (you sent Authorization: %s)","b64":"%s","q":"%s","key":"%s"}`,
			a, base64.StdEncoding.EncodeToString([]byte(a)), url.QueryEscape(a), r.Header.Get("X-Key"))
	}
}

// TestHTTPRedactsEchoedHeaderSecrets (#23 item 3): what a ${VAR} header
// expanded to never leaves the runner, in a failure's text, its error or
// a success's data; literal header values are not secrets.
func TestHTTPRedactsEchoedHeaderSecrets(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		if k == "API_KEY" {
			return echoedKey
		}
		return ""
	}
	for _, status := range []int{http.StatusUnauthorized, http.StatusOK} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv, _ := server(t, echoAuth(status))
			h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL, Getenv: getenv,
				Headers: map[string]string{"Authorization": "Bearer ${API_KEY}", "X-Key": "literal-not-secret"}})
			require.NoError(t, err)
			data, err := h.Run(context.Background(), req("t1", `{}`))
			var text string
			if status == http.StatusOK {
				require.NoError(t, err)
				text = string(data)
			} else {
				f := requireFailure(t, err)
				require.Equal(t, status, f.Status)
				text = f.Text + "\n" + err.Error()
			}
			leak := redact.NewSecrets(echoedKey)
			require.False(t, leak.Contains(text), "secret echoed: %s", text)
			require.Contains(t, text, redact.Marker)
			require.Contains(t, text, "literal-not-secret", "literal header values are config, not secrets")
		})
	}
}

// TestExecRedactsEnvSecrets (#23 item 3): an exec agent's stderr and
// error text lose the values passed through from the worker's
// environment, but not PATH-like public ones.
func TestExecRedactsEnvSecrets(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		switch k {
		case "API_KEY":
			return echoedKey
		case "HOME":
			return "/home/agent-home"
		}
		return ""
	}
	for _, tc := range []struct{ name, script string }{
		{"stderr", `echo "boom: key=$API_KEY home=$HOME" >&2; exit 1`},
		{"error", `printf '{"status":"error","code":401,"error":"bad key %s in %s"}' "$API_KEY" "$HOME"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newExec(t, agent.ExecConfig{Command: []string{"/bin/sh", "-c", tc.script}, Env: []string{"API_KEY", "HOME"}, Getenv: getenv})
			data, err := e.Run(context.Background(), req("t1", `{}`))
			text := string(data)
			if err != nil {
				text = requireFailure(t, err).Text + "\n" + err.Error()
			}
			require.NotContains(t, text, "KeyThatMustNotLeak")
			require.Contains(t, text, redact.Marker)
			require.Contains(t, text, "/home/agent-home", "HOME is not a secret")
		})
	}
	// A success's data is the agent's own answer: kept whole.
	e := newExec(t, agent.ExecConfig{Command: []string{"/bin/sh", "-c", `printf '{"status":"success","data":{"k":"%s"}}' "$API_KEY"`},
		Env: []string{"API_KEY"}, Getenv: getenv})
	data, err := e.Run(context.Background(), req("t1", `{}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"k":"`+echoedKey+`"}`, string(data))
}
