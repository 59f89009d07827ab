package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redact"
	"github.com/agentq/agentq/tasks"
)

// secretEnv is the variable the echoed-secret test puts its API key in.
const secretEnv = "AGENTQ_TEST_ECHOED_SECRET"

// redisText is every key and value in rdb as text, for a search.
func redisText(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRange(ctx, k, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, k, "-", "+").Result()
		}
		if err == redis.Nil {
			continue // gone meanwhile
		}
		require.NoError(t, err, k)
		fmt.Fprintf(&b, "%s %v\n", k, v)
	}
	return b.String()
}

// TestEchoedSecretsAreRedacted (#23 item 3): a gateway that echoes the
// ${VAR}-expanded Authorization header (raw, base64, URL-escaped) in its
// 401 body, and an exec agent that prints its API key from the
// environment on stderr, leave that key nowhere: not in the task's
// history, not in its dead letter, not anywhere in Redis (asynq's last
// error included), not in the worker's logs, not in the attempt spans.
// Not parallel: it sets the worker's environment.
func TestEchoedSecretsAreRedacted(t *testing.T) {
	const key = "sk-live-EchoedKey0123456789"
	t.Setenv(secretEnv, key)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, "invalid api key (you sent Authorization: %s) b64=%s q=%s",
			a, base64.StdEncoding.EncodeToString([]byte(a)), url.QueryEscape(a))
	}))
	t.Cleanup(gateway.Close)
	logs := &logBuf{}
	exp, tp := memoryTracer(t)
	_, rdb := runWorker(t, fmt.Sprintf(`
worker: {concurrency: 2, shutdown_timeout: 2s}
defaults:
  retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms}
  restart: {max_restarts: 0}
agents:
  llm:
    http:
      url: %q
      headers: {Authorization: "Bearer ${%s}"}
  tool:
    exec:
      command: [/bin/sh, -c, 'echo "denied: key $%s is revoked" >&2; exit 3']
      env: [%s]
`, gateway.URL, secretEnv, secretEnv, secretEnv),
		WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), WithTracerProvider(tp))

	ctx := context.Background()
	c := tasks.NewClient(rdb)
	for _, id := range []string{"llm-echo", "tool-echo"} {
		_, err := c.Enqueue(ctx, tasks.Task{ID: id, Agent: strings.TrimSuffix(id, "-echo"), Params: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	views := waitTerminal(t, rdb, []string{"llm-echo", "tool-echo"}, 30*time.Second)

	leak := redact.NewSecrets(key)
	dlq := deadletter.NewStore(rdb)
	for id, v := range views {
		require.Equal(t, tasks.StateDeadLettered, v.State, id)
		hist, err := json.Marshal(v)
		require.NoError(t, err)
		require.False(t, leak.Contains(string(hist)), "%s: the task's record holds the secret: %s", id, hist)
		require.Contains(t, string(hist), redact.Marker, "%s: the error text is kept, redacted", id)
		e, err := dlq.Get(ctx, id)
		require.NoError(t, err, id)
		dead, err := json.Marshal(e)
		require.NoError(t, err)
		require.False(t, leak.Contains(string(dead)), "%s: the dead letter holds the secret: %s", id, dead)
	}
	require.False(t, leak.Contains(redisText(t, rdb)), "the secret is somewhere in Redis")
	require.Contains(t, logs.String(), redact.Marker, "the failures were logged")
	require.False(t, leak.Contains(logs.String()), "the worker's logs hold the secret:\n%s", logs.String())
	for _, s := range exp.GetSpans() {
		require.False(t, leak.Contains(s.Status.Description), "span %s: %s", s.Name, s.Status.Description)
		for _, kv := range s.Attributes {
			require.False(t, leak.Contains(kv.Value.Emit()), "span %s attribute %s", s.Name, kv.Key)
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				require.False(t, leak.Contains(kv.Value.Emit()), "span %s event %s attribute %s", s.Name, ev.Name, kv.Key)
			}
		}
	}
}
