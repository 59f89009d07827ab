package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/webhook"
	"github.com/agentq/agentq/tasks"
)

// TestEnqueuerNotifyAndInspectorWebhooks: enqueuer --notify (repeatable or
// a comma list; a --file line's "notify") writes the task's webhooks,
// after its agent's; an unknown one is exit 2 naming it; inspector
// webhooks lists the configured ones and webhooks retry refuses an
// unknown name.
func TestEnqueuerNotifyAndInspectorWebhooks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
webhooks:
  results: {url: "https://hooks.example/r?token=abc", secret: "${R}"}
  audit: {url: "https://hooks.example/a", secret: "${A}"}
  ops: {url: "https://hooks.example/o", secret: "${O}"}
agents:
  tool:
    notify: [ops]
`), 0o600))
	out, errOut, code := runCmd(t, NewEnqueuerCmd, "", "--config", cfg, "--redis", b.url, "--agent", "tool", "--id", "n1",
		"--notify", "results,audit", "--notify", "results")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "n1", strings.TrimSpace(out))
	v, err := b.client.Store().Get(context.Background(), "n1")
	require.NoError(t, err)
	require.Equal(t, []string{"ops", "results", "audit"}, v.Notify)

	_, errOut, code = runCmd(t, NewEnqueuerCmd, "", "--config", cfg, "--redis", b.url, "--agent", "tool", "--notify", "resluts")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown webhook "resluts"`)
	require.Contains(t, errOut, "results", "a suggestion")

	_, errOut, code = runCmd(t, NewEnqueuerCmd, `{"id":"n2","agent":"tool","notify":["audit"]}`+"\n"+`{"id":"n3","agent":"tool","notify":["nope"]}`+"\n",
		"--config", cfg, "--redis", b.url, "--file", "-")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown webhook "nope"`)
	_, err = b.client.Store().Get(context.Background(), "n2")
	require.ErrorIs(t, err, tasks.ErrNotFound, "nothing enqueued when a line is bad")

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--config", cfg, "--redis", b.url, "webhooks", "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &first))
	require.Equal(t, "results", first["name"])
	require.Equal(t, "https://hooks.example/r?[redacted]", first["url"])
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--config", cfg, "--redis", b.url, "webhooks")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "PENDING")
	require.NotContains(t, out, "token=abc")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--config", cfg, "--redis", b.url, "webhooks", "retry", "result")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown webhook "result"`)
	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--config", cfg, "--redis", b.url, "webhooks", "retry", "results")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "webhook results: 0 deliveries due now")
}

// TestInspectorWebhooksRetryKnownInRedis: without --config, `inspector
// webhooks` lists a webhook Redis has deliveries to, and `webhooks retry`
// of that name makes them due (exit 0); a name neither configured nor in
// Redis is still refused (exit 2).
func TestInspectorWebhooksRetryKnownInRedis(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rdb := b.rdb.(redis.UniversalClient)
	ctx := context.Background()
	// A delivery given up, as the deliverer leaves it (field "<seq>:<webhook>").
	dl, err := json.Marshal(webhook.Delivery{Event: json.RawMessage(`{"seq":1,"event":"queued"}`), Attempts: 3, First: 1, Next: 1, GivenUp: 2, LastError: "refused"})
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, rkeys.TaskHooks("w1"), "1:results", string(dl)).Err())
	require.NoError(t, rdb.ZAdd(ctx, rkeys.WebhooksGivenUp(), redis.Z{Score: 2, Member: "w1"}).Err())

	out, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "webhooks", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"name":"results"`)

	out, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "webhooks", "retry", "results")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "webhook results: 1 deliveries due now")

	_, errOut, code = runCmd(t, NewInspectorCmd, "", "--redis", b.url, "webhooks", "retry", "resluts")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown webhook "resluts"`)
}
