package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

// rulesConfig writes a config serving queues default and high, with a
// history retention of 1h.
func rulesConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentq.yaml")
	require.NoError(t, os.WriteFile(p, []byte("worker:\n  queues: {default: 1, high: 3}\nhistory:\n  retention: 1h\n"), 0o600))
	return p
}

// TestEnqueuerRules: what enqueuer refuses with exit 2, enqueuing nothing
// (issue #11 item 1: '#' in an ID; item 15: a queue outside
// worker.queues), and that a served non-default queue is accepted.
func TestEnqueuerRules(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	store := tasks.NewStore(rdb)
	cfg := rulesConfig(t)
	withCfg := []string{"--redis", srv.URL(), "--config", cfg}
	noCfg := []string{"--redis", srv.URL()}
	for _, tc := range []struct {
		name     string
		base     []string
		stdin    string
		args     []string
		code     int
		errHas   []string
		absent   []string
		enqueued map[string]string // id -> queue
	}{
		{name: "id with #", base: withCfg, args: []string{"--agent", "tool", "--id", "X#1"},
			code: ExitUsage, errHas: []string{`field "id"`, `"#"`, "reserved", "run N of task X has the ID X#N"}, absent: []string{"X#1"}},
		{name: "file line id with #", base: withCfg, args: []string{"--file", "-"},
			stdin: `{"id":"h1","agent":"tool"}` + "\n" + `{"id":"h#2","agent":"tool"}` + "\n",
			code:  ExitUsage, errHas: []string{"line 2:", `field "id"`, "reserved", "nothing was enqueued"}, absent: []string{"h1", "h#2"}},
		{name: "queue not served", base: withCfg, args: []string{"--agent", "tool", "--id", "q1", "--queue", "low"},
			code: ExitUsage, errHas: []string{`field "queue"`, `"low"`, "served queues: default, high"}, absent: []string{"q1"}},
		{name: "queue not served by the default config", base: noCfg, args: []string{"--agent", "tool", "--id", "q2", "--queue", "high"},
			code: ExitUsage, errHas: []string{`"high"`, "served queues: default"}, absent: []string{"q2"}},
		{name: "file line queue not served", base: withCfg, args: []string{"--file", "-"},
			stdin: `{"id":"q3","agent":"tool","queue":"high"}` + "\n" + `{"id":"q4","agent":"tool","queue":"low"}` + "\n",
			code:  ExitUsage, errHas: []string{"line 2:", `"low"`, "served queues: default, high"}, absent: []string{"q3", "q4"}},
		{name: "served non-default queue", base: withCfg, args: []string{"--agent", "tool", "--id", "q5", "--queue", "high"},
			code: ExitOK, enqueued: map[string]string{"q5": "high"}},
		{name: "file with served queues", base: withCfg, args: []string{"--file", "-"},
			stdin: `{"id":"q6","agent":"tool","queue":"high"}` + "\n" + `{"id":"q7","agent":"tool"}` + "\n",
			code:  ExitOK, enqueued: map[string]string{"q6": "high", "q7": "default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCmd(t, NewEnqueuerCmd, tc.stdin, append(tc.base, tc.args...)...)
			require.Equal(t, tc.code, code, "stdout %s stderr %s", out, errOut)
			for _, s := range tc.errHas {
				require.Contains(t, errOut, s)
			}
			for _, id := range tc.absent {
				ok, err := store.Exists(ctx, id)
				require.NoError(t, err)
				require.False(t, ok, id)
			}
			for id, q := range tc.enqueued {
				info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(q, id)
				require.NoError(t, err, id)
				require.Equal(t, q, info.Queue)
				v, err := store.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, q, v.Queue)
			}
		})
	}
}

// TestEnqueuerDeadLetterID (issue #11 item 6): the ID of a dead letter
// whose record has expired is not enqueued again (single or --file):
// enqueuer prints the ID and says it is a dead letter, which stays intact.
func TestEnqueuerDeadLetterID(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	dlq := deadletter.NewStore(rdb)
	_, err := dlq.Put(ctx, &deadletter.Entry{ID: "gone", Agent: "tool", ErrorClass: "logic_error", Error: "boom",
		Reason: deadletter.ReasonNotRetryable, Attempts: 1, Queue: "default", DeadLetteredAt: time.Unix(1700000000, 0).UTC()})
	require.NoError(t, err)
	before, err := dlq.Get(ctx, "gone")
	require.NoError(t, err)

	out, errOut, code := runCmd(t, NewEnqueuerCmd, "", "--redis", srv.URL(), "--agent", "tool", "--id", "gone")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, "gone", strings.TrimSpace(out))
	require.Contains(t, errOut, "task gone already exists as a dead letter")

	out, errOut, code = runCmd(t, NewEnqueuerCmd, "", "--redis", srv.URL(), "--agent", "tool", "--id", "gone", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var res tasks.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, tasks.Result{ID: "gone", Duplicate: true, State: tasks.StateDeadLettered}, res)

	out, errOut, code = runCmd(t, NewEnqueuerCmd, `{"id":"gone","agent":"tool"}`+"\n"+`{"id":"new","agent":"tool"}`+"\n", "--redis", srv.URL(), "--file", "-")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, []string{"gone", "new"}, strings.Fields(out))
	require.Contains(t, errOut, "task gone already exists as a dead letter")

	after, err := dlq.Get(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, before, after, "the dead letter is intact")
	ok, err := tasks.NewStore(rdb).Exists(ctx, "gone")
	require.NoError(t, err)
	require.False(t, ok)
	n, err := rdb.LLen(ctx, "asynq:{default}:pending").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the new task was queued")
}

// TestEnqueuerRetention (issue #11 item 7): enqueuer (single, --file) and
// enqueuer serve keep the records of the tasks they enqueue for the
// config's history.retention, counted from when the first run is due.
func TestEnqueuerRetention(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	base := []string{"--redis", srv.URL(), "--config", rulesConfig(t)}
	for _, args := range [][]string{
		{"--agent", "tool", "--id", "r1"},
		{"--agent", "tool", "--id", "r2", "--in", "720h"},
		{"--file", "-"},
	} {
		_, errOut, code := runCmd(t, NewEnqueuerCmd, `{"id":"r3","agent":"tool"}`+"\n"+`{"id":"r4","agent":"tool","in":"720h"}`+"\n", append(base, args...)...)
		require.Equal(t, ExitOK, code, errOut)
	}

	// enqueuer serve with the same config.
	addr := freeLoopback(t)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	var logs syncBuffer
	go func() {
		app := &App{Out: &logs, Err: &logs, In: strings.NewReader(""), Getenv: func(string) string { return "" }}
		done <- Main(sctx, app, NewEnqueuerCmd, append(base, "serve", "--http", addr))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	})
	post := func(body string) (int, string) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Post("http://"+addr+"/api/v1/tasks", "application/json", strings.NewReader(body))
			if err == nil {
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			require.True(t, time.Now().Before(deadline), "serve did not answer: %v; %s", err, logs.String())
			time.Sleep(20 * time.Millisecond)
		}
	}
	status, body := post(`{"id":"r5","agent":"tool","queue":"high"}`)
	require.Equal(t, http.StatusAccepted, status, body)
	status, body = post(`{"id":"r6","agent":"tool","in":"720h"}`)
	require.Equal(t, http.StatusAccepted, status, body)
	status, body = post(`{"id":"r7","agent":"tool","queue":"low"}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "served queues: default, high")

	requireTTL(t, rdb, map[string]time.Duration{
		"r1": time.Hour, "r3": time.Hour, "r5": time.Hour,
		"r2": 721 * time.Hour, "r4": 721 * time.Hour, "r6": 721 * time.Hour,
	})
}

// requireTTL checks that each task's record and history expire within a
// minute below want.
func requireTTL(t *testing.T, rdb redis.UniversalClient, want map[string]time.Duration) {
	t.Helper()
	for id, w := range want {
		for _, key := range []string{rkeys.Task(id), rkeys.TaskHistory(id)} {
			ttl, err := rdb.TTL(context.Background(), key).Result()
			require.NoError(t, err)
			require.LessOrEqual(t, ttl, w, key)
			require.Greater(t, ttl, w-time.Minute, key)
		}
	}
}

// TestInspectorRequeueRetention (#11 items 5, 7): `inspector dlq requeue`
// writes the requeued task's record with the config's history.retention,
// rebuilding it when it had expired.
func TestInspectorRequeueRetention(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	_, err := deadletter.NewStore(rdb).Put(context.Background(), &deadletter.Entry{ID: "back", Agent: "tool", ErrorClass: "logic_error",
		Error: "boom", Reason: deadletter.ReasonNotRetryable, Attempts: 1, Queue: "default", DeadLetteredAt: time.Unix(1700000000, 0).UTC()})
	require.NoError(t, err)
	_, errOut, code := runCmd(t, NewInspectorCmd, "", "--redis", srv.URL(), "--config", rulesConfig(t), "dlq", "requeue", "back")
	require.Equal(t, ExitOK, code, errOut)
	v, err := tasks.NewStore(rdb).Get(context.Background(), "back")
	require.NoError(t, err)
	require.Equal(t, tasks.StatePending, v.State)
	require.Equal(t, "tool", v.Agent)
	requireTTL(t, rdb, map[string]time.Duration{"back": time.Hour})
}
