package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/redact"
)

// TestProbeURLErrorsAreRedacted: a probe URL's userinfo and query string
// (an API key) never reach the probe error, which is stored in Redis,
// served by /api/v1/agents and logged.
func TestProbeURLErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(hs.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close()) // a closed loopback port
	for name, base := range map[string]string{"status": hs.URL, "refused": "http://" + dead} {
		u := strings.Replace(base, "http://", "http://user:hunter2@", 1) + "/health?key=APIKEYSECRET"
		err := urlCheck(u, 0)(context.Background())
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "APIKEYSECRET", name)
		require.NotContains(t, err.Error(), "hunter2", name)
		require.Contains(t, err.Error(), "/health?[redacted]", name)
	}
	require.Equal(t, "url", NewSpec(config.HealthProbe{URL: "http://u:p@h/x?key=S"}, nil).Kind)
	require.Equal(t, "http://h/x?[redacted]", NewSpec(config.HealthProbe{URL: "http://u:p@h/x?key=S"}, nil).Target)
}

// TestCommandCheck: command probes run without a shell, with only the
// allowed environment, and are killed on timeout.
func TestCommandCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "probe.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n[ \"$WANT\" = yes ] || { echo \"WANT=$WANT SECRET=$SECRET\" >&2; exit 3; }\n[ -z \"$SECRET\" ] || exit 4\n[ \"$1\" = '$x' ] || exit 5\nexit 0\n"), 0o755))
	getenv := func(k string) string { return map[string]string{"WANT": "yes", "SECRET": "s3"}[k] }
	tests := []struct {
		name string
		argv []string
		env  []string
		want string // "" healthy, else a substring of the error
	}{
		{"healthy", []string{script, "$x"}, []string{"WANT"}, ""},
		{"set value", []string{script, "$x"}, []string{"WANT=yes"}, ""},
		{"not passed", []string{script, "$x"}, nil, "exit status 3"},
		{"no shell expansion", []string{script, "x"}, []string{"WANT"}, "exit status 5"},
		{"missing program", []string{filepath.Join(dir, "nope")}, nil, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := commandCheck(tt.argv, tt.env, "", getenv)(context.Background())
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	started := time.Now()
	err := commandCheck([]string{"sleep", "30"}, []string{"PATH"}, "", os.Getenv)(ctx)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Less(t, time.Since(started), 10*time.Second)
	require.True(t, strings.HasPrefix(err.Error(), "probe command sleep"))
}

// TestProbeCommandRedactsEnvSecrets (#23 item 3): a probe command that
// prints the API key its exec block passes through fails with a text
// (stored as the probe's last error, logged) that does not hold it.
func TestProbeCommandRedactsEnvSecrets(t *testing.T) {
	t.Parallel()
	const key = "sk-probe-0123456789abcdef"
	getenv := func(k string) string {
		if k == "PROBE_KEY" {
			return key
		}
		return ""
	}
	check := commandCheck([]string{"/bin/sh", "-c", `echo "unhealthy: key $PROBE_KEY rejected"; exit 1`}, []string{"PROBE_KEY"}, "", getenv)
	err := check(context.Background())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "0123456789abcdef")
	require.Contains(t, err.Error(), "unhealthy: key "+redact.Marker+" rejected")
}
