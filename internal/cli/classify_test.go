package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/unmatched"
	"github.com/agentq/agentq/resilience"
)

// classifyConfig writes a config with classifier rules and returns its path.
func classifyConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`classifier:
  rules:
    - name: team quota
      class: quota_exhausted
      status: 500
      regexp: 'quota for team \w+ is gone'
    - class: rate_limited
      header: {X-Gateway-State: '^busy'}
    - name: oom
      class: logic_error
      exit_code: 137
agents:
  llm:
    http: {url: 'http://127.0.0.1:9/v1'}
    classes: {quota_exhausted: {exhausted: restart}}
`), 0o600))
	return path
}

type classifyJSON struct {
	Class        string `json:"class"`
	ClassifiedBy string `json:"classified_by"`
	RetryAfter   string `json:"retry_after"`
	ShouldRetry  *bool  `json:"should_retry"`
	Agent        string `json:"agent"`
	Decision     struct {
		Retry     bool   `json:"retry"`
		Breaker   bool   `json:"breaker"`
		Exhausted string `json:"exhausted"`
		Fallback  bool   `json:"fallback"`
	} `json:"decision"`
	Rule struct {
		Source string `json:"source"`
		Index  *int   `json:"index"`
		Name   string `json:"name"`
	} `json:"rule"`
}

func classifyRun(t *testing.T, stdin string, args ...string) classifyJSON {
	t.Helper()
	out, errOut, code := runCmd(t, NewInspectorCmd, stdin, append([]string{"classify", "--json"}, args...)...)
	require.Equal(t, ExitOK, code, errOut)
	var res classifyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "one JSON object")
	return res
}

func TestInspectorClassify(t *testing.T) {
	t.Parallel()
	cfg := classifyConfig(t)

	t.Run("builtin text rule, text output", func(t *testing.T) {
		t.Parallel()
		out, errOut, code := runCmd(t, NewInspectorCmd, "", "classify", "--status", "429",
			`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`)
		require.Equal(t, ExitOK, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, out)
		require.Equal(t, []string{"CLASS", "BY", "RETRY", "BREAKER", "EXHAUSTED", "FALLBACK", "RULE"}, strings.Fields(lines[0]))
		row := strings.Fields(lines[1])
		require.Equal(t, "quota_exhausted", row[0])
		require.Contains(t, resilience.Evidences(), resilience.Evidence(row[1]), "BY is what decided")
		require.Equal(t, []string{"no", "yes", "dead_letter", "yes", "builtin"}, row[2:7])
		require.Contains(t, lines[2], "decision row of the defaults block")
	})
	t.Run("builtin status", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "", "--status", "503", "upstream said no")
		require.Equal(t, "provider_error", res.Class)
		require.Equal(t, "builtin", res.Rule.Source)
		require.Equal(t, "status 503", res.Rule.Name)
		require.Nil(t, res.Rule.Index)
		require.True(t, res.Decision.Retry)
		require.Equal(t, "restart", res.Decision.Exhausted)
	})
	t.Run("the same text without the configured rules", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "", "--status", "500", "quota for team X is gone")
		require.Equal(t, "provider_error", res.Class)
		require.Equal(t, "builtin", res.Rule.Source)
	})
	t.Run("configured rule with --config", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "", "--config", cfg, "--status", "500", "quota for team X is gone")
		require.Equal(t, "quota_exhausted", res.Class)
		require.Equal(t, "config", res.Rule.Source)
		require.NotNil(t, res.Rule.Index)
		require.Equal(t, 0, *res.Rule.Index)
		require.Equal(t, "team quota", res.Rule.Name)
		require.Equal(t, "rule", res.ClassifiedBy, "an operator's rule decided")
		require.Equal(t, "dead_letter", res.Decision.Exhausted, "the defaults block's row")
		require.False(t, res.Decision.Retry)
		require.True(t, res.Decision.Breaker)

		out, errOut, code := runCmd(t, NewInspectorCmd, "", "--config", cfg, "classify", "--status", "500", "quota for team X is gone")
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, out, "config classifier.rules[0] (team quota)")
	})
	t.Run("AND: the status must match too", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "", "--config", cfg, "--status", "502", "quota for team X is gone")
		require.Equal(t, "builtin", res.Rule.Source)
	})
	t.Run("--agent shows that agent's row", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "", "--config", cfg, "--agent", "llm", "--status", "500", "quota for team X is gone")
		require.Equal(t, "quota_exhausted", res.Class)
		require.Equal(t, "llm", res.Agent)
		require.Equal(t, "restart", res.Decision.Exhausted, "llm's classes override")
	})
	t.Run("stdin", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "status: 500\nquota for team Y is gone\n", "--config", cfg, "--status", "500", "-")
		require.Equal(t, "quota_exhausted", res.Class)
		require.Equal(t, "config", res.Rule.Source)
	})
	t.Run("--exit-code", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "", "--config", cfg, "--exit-code", "137", "Killed")
		require.Equal(t, "logic_error", res.Class)
		require.Equal(t, 2, *res.Rule.Index)
		require.Equal(t, "oom", res.Rule.Name)
		require.Equal(t, "rule", res.ClassifiedBy)
		res = classifyRun(t, "", "--config", cfg, "--exit-code", "1", "Killed")
		require.Equal(t, "builtin", res.Rule.Source)
		require.Contains(t, resilience.Evidences(), resilience.Evidence(res.ClassifiedBy))
	})
	t.Run("--header", func(t *testing.T) {
		t.Parallel()
		res := classifyRun(t, "", "--config", cfg, "--status", "400", "--header", "x-gateway-state=busy now", "--header", "Retry-After=20", "bad")
		require.Equal(t, "rate_limited", res.Class)
		require.Equal(t, 1, *res.Rule.Index)
		require.Equal(t, "20s", res.RetryAfter)
		res = classifyRun(t, "", "--config", cfg, "--status", "400", "--header", "X-Gateway-State=idle", "bad")
		require.Equal(t, "invalid_request", res.Class)
		require.False(t, res.Decision.Breaker)
		res = classifyRun(t, "", "--header", "X-Should-Retry=false", "boom")
		require.NotNil(t, res.ShouldRetry)
		require.False(t, *res.ShouldRetry)
	})
}

func TestInspectorClassifyUsage(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("classifier:\n  rules:\n    - {class: timeout}\n    - {class: timeout, regexp: '(x'}\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no text", []string{"classify"}, "the error text, or -"},
		{"two texts", []string{"classify", "a", "b"}, "got 2 arguments"},
		{"bad status", []string{"classify", "--status", "42", "x"}, "--status 42 is not an HTTP status"},
		{"bad exit code", []string{"classify", "--exit-code", "0", "x"}, "--exit-code 0"},
		{"bad header", []string{"classify", "--header", "Retry-After", "x"}, `--header "Retry-After": want NAME=VALUE`},
		{"unknown agent", []string{"--config", classifyConfig(t), "classify", "--agent", "lm", "x"}, `--agent "lm" is not an agent`},
		{"bad rules", []string{"--config", bad, "classify", "x"}, "classifier.rules[1].regexp"},
		{"TEXT with --unmatched", []string{"classify", "--unmatched", "boom"}, "classify --unmatched takes no TEXT"},
		{"--status with --unmatched", []string{"classify", "--unmatched", "--status", "500"}, "--status describes a TEXT to classify"},
		{"--exit-code with --unmatched", []string{"classify", "--unmatched", "--exit-code", "1"}, "--exit-code describes a TEXT"},
		{"--since without --unmatched", []string{"classify", "--since", "1h", "x"}, "--since goes with --unmatched"},
		{"--limit without --unmatched", []string{"classify", "--limit", "5", "x"}, "--limit goes with --unmatched"},
		{"bad --since", []string{"classify", "--unmatched", "--since", "0s"}, "--since 0s: want a positive duration"},
		{"negative --limit", []string{"classify", "--unmatched", "--limit", "-1"}, "--limit must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, errOut, code := runCmd(t, NewInspectorCmd, "", tc.args...)
			require.Equal(t, ExitUsage, code)
			require.Contains(t, errOut, tc.want)
		})
	}
	_, errOut, code := runCmd(t, NewInspectorCmd, "", "--config", bad, "classify", "x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "classifier.rules[0]: needs at least one matcher")
}

// TestInspectorClassifyUnmatched: `classify --unmatched` lists the weak
// verdicts the worker kept (seeded by the store's own writer on a real
// redis-server), newest first, as JSON Lines with the documented fields
// and as a table that ends with the hint; --agent, --limit and --since
// select.
func TestInspectorClassifyUnmatched(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rdb := b.rdb.(redis.UniversalClient)
	s := unmatched.NewStore(rdb)
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := unmatched.Entry{At: now.Add(-48 * time.Hour), TaskID: "t-old", Agent: "llm", Attempt: 1, ErrorClass: "provider_error",
		ClassifiedBy: "default", Error: "two days ago"}
	seeded := []unmatched.Entry{
		{At: now.Add(-time.Hour), TaskID: "t-1", Agent: "llm", Attempt: 1, ErrorClass: "provider_error", ClassifiedBy: "default",
			Status: 500, Error: "zq-7 frobnicated\nthe quux"},
		{At: now.Add(-time.Minute), TaskID: "t-2", Agent: "tool", Attempt: 2, ErrorClass: "logic_error", ClassifiedBy: "model",
			Error: "the widget is sad"},
	}
	// The stream's IDs are the server's time: the old entry goes in with
	// an old ID, as a worker's write two days ago would have.
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: rkeys.ClassifyUnmatched(), ID: fmt.Sprintf("%d-0", old.At.UnixMilli()),
		Values: []any{"at", old.At.UnixMilli(), "task", old.TaskID, "agent", old.Agent, "attempt", 1, "class", old.ErrorClass,
			"classified_by", old.ClassifiedBy, "status", 0, "error", old.Error}}).Err())
	for _, e := range seeded {
		require.NoError(t, s.Add(ctx, e))
	}

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "classify", "--unmatched", "--json")
	require.Equal(t, ExitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "the last 24h only: %s", out)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.Equal(t, map[string]any{"at": seeded[1].At.Format(time.RFC3339Nano), "task_id": "t-2", "agent": "tool", "attempt": 2.0,
		"error_class": "logic_error", "classified_by": "model", "status": 0.0, "error": "the widget is sad"}, first)
	var second unmatched.Entry
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	require.Equal(t, seeded[0], second)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "classify", "--unmatched", "--since", "72h")
	require.Equal(t, ExitOK, code, errOut)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out)
	require.Equal(t, []string{"AT", "AGENT", "TASK", "CLASS", "BY", "ERROR"}, strings.Fields(lines[0]))
	require.Equal(t, []string{seeded[1].At.Format(time.RFC3339), "tool", "t-2", "logic_error", "model", "the", "widget", "is", "sad"},
		strings.Fields(lines[1]))
	require.Equal(t, []string{"llm", "t-1", "provider_error", "default", "zq-7", "frobnicated"}, strings.Fields(lines[2])[1:],
		"the error's first line")
	require.Contains(t, lines[3], "t-old")
	require.Contains(t, lines[4], "classifier.rules")
	require.Contains(t, lines[4], "docs/semantics.md#teach-the-classifier-classifierrules")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "classify", "--unmatched", "--agent", "llm", "--json")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"), out)
	require.Contains(t, out, `"task_id":"t-1"`)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "classify", "--unmatched", "--limit", "1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"), out)
	require.Contains(t, out, `"task_id":"t-2"`, "newest first")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "classify", "--unmatched", "--agent", "nobody")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "no failed attempt with a weak verdict since")
}
