package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/tasks"
)

type cmdResult struct {
	out, errOut string
	code        int
}

// watchedBy polls until someone waits for task id (its watch flag).
func watchedBy(t *testing.T, rec *record.Store, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		v, err := rec.Client().HGet(context.Background(), rkeys.Task(id), record.FieldWatch).Result()
		return err == nil && v == "1"
	}, 20*time.Second, 5*time.Millisecond, "nobody waits for %s", id)
}

func end(t *testing.T, rec *record.Store, id string, c record.Change) {
	t.Helper()
	d := record.Delivery{ID: id, Attempt: 1}
	for _, ch := range []record.Change{record.Started(), c} {
		out, err := rec.Apply(context.Background(), d, ch)
		require.NoError(t, err)
		require.Equal(t, record.Applied, out)
	}
}

// TestEnqueueWait: `enqueuer --wait` prints the result once the task ends
// (exit 0); a dead letter prints its class, error and reason (exit 4); a
// wait that times out is exit 5; --wait-timeout without --wait and --wait
// with --file are usage errors.
func TestEnqueueWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := record.StoreOf(b.client.Store())
	run := func(args ...string) chan cmdResult {
		c := make(chan cmdResult, 1)
		go func() {
			out, errOut, code := runCmd(t, NewEnqueuerCmd, "", append([]string{"--redis", b.url, "--agent", "tool"}, args...)...)
			c <- cmdResult{out, errOut, code}
		}()
		return c
	}
	got := run("--id", "w1", "--wait")
	watchedBy(t, rec, "w1")
	end(t, rec, "w1", record.Succeeded(record.Attempt{Attempt: 1}, []byte(`{"answer":42}`)))
	r := <-got
	require.Equal(t, ExitOK, r.code, r.errOut)
	require.JSONEq(t, `{"answer":42}`, r.out)

	got = run("--id", "w2", "--wait", "--wait-timeout", "1m")
	watchedBy(t, rec, "w2")
	end(t, rec, "w2", record.DeadLettered(record.Attempt{Attempt: 1, ErrorClass: "invalid_request", Error: "bad params"}, "not_retryable"))
	r = <-got
	require.Equal(t, ExitTaskFailed, r.code, r.errOut)
	require.Empty(t, r.out)
	for _, s := range []string{"dead_lettered", "invalid_request", "bad params", "not_retryable"} {
		require.Contains(t, r.errOut, s)
	}

	r = <-run("--id", "w3", "--wait", "--wait-timeout", "100ms", "--json")
	require.Equal(t, ExitWaitTimeout, r.code, r.errOut)
	require.Contains(t, r.errOut, "has not ended")

	_, _, code := runCmd(t, NewEnqueuerCmd, "", "--redis", b.url, "--agent", "tool", "--wait-timeout", "1s")
	require.Equal(t, ExitUsage, code)
	_, _, code = runCmd(t, NewEnqueuerCmd, "", "--redis", b.url, "--file", "-", "--wait")
	require.Equal(t, ExitUsage, code)
}

// TestInspectorFollow: `inspector task ID --follow` prints each event as
// it is recorded, one line each (JSON Lines with --json), and returns
// after the terminal one.
func TestInspectorFollow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := record.StoreOf(b.client.Store())
	ctx := context.Background()
	for _, asJSON := range []bool{false, true} {
		id := "f" + map[bool]string{false: "text", true: "json"}[asJSON]
		_, err := b.client.Enqueue(ctx, tasks.Task{ID: id, Agent: "tool"})
		require.NoError(t, err)
		got := make(chan cmdResult, 1)
		go func() {
			args := []string{"--redis", b.url, "task", id, "--follow"}
			if asJSON {
				args = append(args, "--json")
			}
			out, errOut, code := runCmd(t, NewInspectorCmd, "", args...)
			got <- cmdResult{out, errOut, code}
		}()
		watchedBy(t, rec, id)
		end(t, rec, id, record.Retrying(record.Attempt{Attempt: 1, ErrorClass: "timeout", Error: "slow"}, time.Second, time.Now().Add(time.Second)))
		_, err = rec.Apply(ctx, record.Delivery{ID: id, Attempt: 2}, record.Succeeded(record.Attempt{Attempt: 2}, nil))
		require.NoError(t, err)
		r := <-got
		require.Equal(t, ExitOK, r.code, r.errOut)
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		require.Len(t, lines, 3, r.out)
		if asJSON {
			var names []string
			for _, l := range lines {
				var ev tasks.Event
				require.NoError(t, json.Unmarshal([]byte(l), &ev), l)
				names = append(names, ev.Event)
			}
			require.Equal(t, []string{"queued", "retrying", "succeeded"}, names)
			continue
		}
		require.Contains(t, lines[0], "queued")
		require.Contains(t, lines[1], "retrying attempt=1 class=timeout")
		require.Contains(t, lines[2], "succeeded")
	}
	_, _, code := runCmd(t, NewInspectorCmd, "", "--redis", b.url, "task", "nope", "--follow")
	require.Equal(t, ExitFailure, code)
}
