package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/testbin"
	"github.com/agentq/agentq/resilience"
)

const testAgentPkg = "github.com/agentq/agentq/internal/testagent"

func testAgent(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, testAgentPkg)
}

func newExec(t *testing.T, cfg agent.ExecConfig) *agent.Exec {
	t.Helper()
	if cfg.Command == nil {
		cfg.Command = []string{testAgent(t)}
	}
	e, err := agent.NewExec(cfg)
	require.NoError(t, err)
	return e
}

func req(taskID string, params string) agent.Request {
	return agent.Request{TaskID: taskID, Agent: "test", Action: "act", Params: json.RawMessage(params), Attempt: 1}
}

func requireFailure(t *testing.T, err error) *resilience.Failure {
	t.Helper()
	require.Error(t, err)
	var f *resilience.Failure
	require.True(t, errors.As(err, &f), "error %T %v is not a *resilience.Failure", err, err)
	return f
}

func TestNewExecValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  agent.ExecConfig
	}{
		{"nil command", agent.ExecConfig{}},
		{"empty argv0", agent.ExecConfig{Command: []string{""}}},
		{"negative max output", agent.ExecConfig{Command: []string{"x"}, MaxOutput: -1}},
		{"negative stderr tail", agent.ExecConfig{Command: []string{"x"}, StderrTail: -1}},
		{"negative grace", agent.ExecConfig{Command: []string{"x"}, KillGrace: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := agent.NewExec(tc.cfg)
			require.Error(t, err)
		})
	}
	_, err := agent.NewExec(agent.ExecConfig{})
	require.ErrorIs(t, err, agent.ErrEmptyCommand)
}

func TestExecOutcomes(t *testing.T) {
	t.Parallel()
	bin := testAgent(t)
	for _, tc := range []struct {
		name   string
		argv   []string // after the binary
		params string
		data   string // expected success data (JSON), when wantOK
		wantOK bool
		check  func(t *testing.T, f *resilience.Failure)
	}{
		{
			name: "echo success", params: `{"mode":"echo","x":[1,2]}`,
			wantOK: true, data: `{"mode":"echo","x":[1,2]}`,
		},
		{
			name: "success without data is null", params: `{"mode":"exit","code":0,"stdout":"{\"status\":\"success\"}"}`,
			wantOK: true, data: `null`,
		},
		{
			name: "sleep then success", params: `{"mode":"sleep","ms":20}`,
			wantOK: true, data: `{"slept_ms":20}`,
		},
		{
			name: "error response with code", params: `{"mode":"error","code":429,"error":"slow down"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, 429, f.Status)
				require.Equal(t, "slow down", f.Text)
				require.Empty(t, f.Class)
			},
		},
		{
			name: "garbage is logic error", params: `{"mode":"garbage"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, resilience.LogicError, f.Class)
				require.True(t, strings.HasPrefix(f.Text, "agent output is not an ActionResponse: this is not JSON"), f.Text)
				require.NotContains(t, f.Text, "\x00")
				require.NotContains(t, f.Text, "\x1b")
			},
		},
		{
			name: "garbage via argv overrides params", argv: []string{"garbage"}, params: `{"mode":"echo"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, resilience.LogicError, f.Class)
			},
		},
		{
			name: "JSON without valid status is logic error", params: `{"mode":"exit","code":0,"stdout":"{\"status\":\"ok\",\"data\":1}"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, resilience.LogicError, f.Class)
				require.Contains(t, f.Text, `{"status":"ok"`)
			},
		},
		{
			name: "two objects are not one ActionResponse", params: `{"mode":"exit","code":0,"stdout":"{\"status\":\"success\"}{\"status\":\"success\"}"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, resilience.LogicError, f.Class)
			},
		},
		{
			name: "empty output is logic error", params: `{"mode":"exit","code":0}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, resilience.LogicError, f.Class)
				require.Contains(t, f.Text, "(empty)")
			},
		},
		{
			name: "non-zero exit keeps stderr", params: `{"mode":"exit","code":3,"stderr":"fatal: unable to access: Could not resolve host: github.com\n"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Empty(t, f.Class)
				require.Equal(t, "fatal: unable to access: Could not resolve host: github.com", f.Text)
				var ee *exec.ExitError
				require.True(t, errors.As(f, &ee))
				require.Equal(t, 3, ee.ExitCode())
				require.Contains(t, f.Error(), "code 3")
			},
		},
		{
			name: "non-zero exit with stderr beats garbage stdout", params: `{"mode":"exit","code":1,"stdout":"Traceback","stderr":"ConnectionResetError: [Errno 104]"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Empty(t, f.Class)
				require.Equal(t, "ConnectionResetError: [Errno 104]", f.Text)
			},
		},
		{
			name: "non-zero exit with garbage and no stderr is logic error", params: `{"mode":"exit","code":1,"stdout":"Traceback"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, resilience.LogicError, f.Class)
			},
		},
		{
			name: "non-zero exit with nothing at all", params: `{"mode":"exit","code":2}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Empty(t, f.Class)
				var ee *exec.ExitError
				require.True(t, errors.As(f, &ee))
			},
		},
		{
			name: "non-zero exit with an error response uses the response", params: `{"mode":"exit","code":1,"stdout":"{\"status\":\"error\",\"code\":501,\"error\":\"no such action\"}","stderr":"x"}`,
			check: func(t *testing.T, f *resilience.Failure) {
				require.Equal(t, 501, f.Status)
				require.Equal(t, "no such action", f.Text)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newExec(t, agent.ExecConfig{Command: append([]string{bin}, tc.argv...)})
			data, err := e.Run(context.Background(), req("t-"+tc.name, tc.params))
			if tc.wantOK {
				require.NoError(t, err)
				require.JSONEq(t, tc.data, string(data))
				return
			}
			require.Nil(t, data)
			tc.check(t, requireFailure(t, err))
		})
	}
}

func TestExecStderrTail(t *testing.T) {
	t.Parallel()
	stderr := strings.Repeat("a", 20000) + "the end of the story"
	params, err := json.Marshal(map[string]any{"mode": "exit", "code": 1, "stderr": stderr})
	require.NoError(t, err)
	e := newExec(t, agent.ExecConfig{StderrTail: 100})
	_, err = e.Run(context.Background(), req("tail", string(params)))
	f := requireFailure(t, err)
	require.Len(t, f.Text, 100)
	require.True(t, strings.HasSuffix(f.Text, "the end of the story"))
}

func TestExecHugeOutput(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	start := time.Now()
	data, err := e.Run(context.Background(), req("huge", `{"mode":"huge","mb":100}`))
	require.Nil(t, data)
	f := requireFailure(t, err)
	require.Equal(t, resilience.LogicError, f.Class)
	require.Equal(t, "agent output exceeds 4194304 bytes", f.Text)
	require.Less(t, time.Since(start), 5*time.Second, "reading must stop at the cap")
}

func TestExecHugeOutputSmallCap(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{MaxOutput: 1000})
	_, err := e.Run(context.Background(), req("huge-small", `{"mode":"huge","mb":1}`))
	f := requireFailure(t, err)
	require.Equal(t, resilience.LogicError, f.Class)
	require.Equal(t, "agent output exceeds 1000 bytes", f.Text)
}

func TestExecEnvAllowlist(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AGENTQ_VISIBLE": "yes", "AGENTQ_HIDDEN": "secret", "AGENTQ_EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		allow   []string
		present map[string]string
		absent  []string
	}{
		{"listed var visible", []string{"AGENTQ_VISIBLE", "AGENTQ_EMPTY", "AGENTQ_UNSET"},
			map[string]string{"AGENTQ_VISIBLE": "yes"}, []string{"AGENTQ_HIDDEN", "AGENTQ_EMPTY", "AGENTQ_UNSET", "PATH", "HOME"}},
		{"zero env is empty", nil, nil, []string{"AGENTQ_VISIBLE", "AGENTQ_HIDDEN", "PATH", "HOME"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newExec(t, agent.ExecConfig{Env: tc.allow, Getenv: getenv, Dir: dir})
			data, err := e.Run(context.Background(), req("env", `{"mode":"env"}`))
			require.NoError(t, err)
			var got struct {
				Env map[string]string `json:"env"`
				Cwd string            `json:"cwd"`
			}
			require.NoError(t, json.Unmarshal(data, &got))
			require.Equal(t, dir, got.Cwd)
			for k, v := range tc.present {
				require.Equal(t, v, got.Env[k], k)
			}
			for _, k := range tc.absent {
				require.NotContains(t, got.Env, k)
			}
			require.Len(t, got.Env, len(tc.present))
		})
	}
}

func TestExecRealEnvNotInherited(t *testing.T) {
	// Not parallel: uses t.Setenv.
	t.Setenv("AGENTQ_TEST_SECRET", "hunter2")
	t.Setenv("AGENTQ_TEST_PASSED", "ok")
	e := newExec(t, agent.ExecConfig{Env: []string{"AGENTQ_TEST_PASSED"}})
	data, err := e.Run(context.Background(), req("env-real", `{"mode":"env"}`))
	require.NoError(t, err)
	require.Contains(t, string(data), `"AGENTQ_TEST_PASSED":"ok"`)
	require.NotContains(t, string(data), "hunter2")
}

func TestExecFailThenSucceed(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	params, err := json.Marshal(map[string]any{"mode": "fail_then_succeed", "times": 2, "state_dir": t.TempDir()})
	require.NoError(t, err)
	for i := 1; i <= 2; i++ {
		_, err := e.Run(context.Background(), req("fts", string(params)))
		f := requireFailure(t, err)
		require.Contains(t, f.Text, "connection reset by peer", "call %d", i)
	}
	data, err := e.Run(context.Background(), req("fts", string(params)))
	require.NoError(t, err)
	require.JSONEq(t, `{"calls":3}`, string(data))
	// Another task has its own count.
	_, err = e.Run(context.Background(), req("fts-other", string(params)))
	require.Error(t, err)
}

func TestExecStartFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644))
	for _, tc := range []struct {
		name string
		cfg  agent.ExecConfig
		is   error
	}{
		{"not in PATH", agent.ExecConfig{Command: []string{"agentq-no-such-agent-binary"}}, exec.ErrNotFound},
		{"absolute path missing", agent.ExecConfig{Command: []string{filepath.Join(dir, "missing")}}, os.ErrNotExist},
		{"not executable", agent.ExecConfig{Command: []string{notExec}}, os.ErrPermission},
		{"dir missing", agent.ExecConfig{Command: []string{testAgent(t)}, Dir: filepath.Join(dir, "nope")}, os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newExec(t, tc.cfg)
			_, err := e.Run(context.Background(), req("start", `{}`))
			f := requireFailure(t, err)
			require.Equal(t, resilience.NotSupported, f.Class)
			require.ErrorIs(t, err, tc.is)
		})
	}
}

// processGone reports whether pid no longer runs: it does not exist, or it is
// a zombie waiting for its (new) parent to reap it.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func readPIDs(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err, "the agent did not write its pid file")
	var pids []int
	for _, line := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(line)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

func requireAllGone(t *testing.T, pids []int) {
	t.Helper()
	require.NotEmpty(t, pids)
	require.Eventually(t, func() bool {
		for _, pid := range pids {
			if !processGone(pid) {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "children %v survived", pids)
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		ignoreTerm bool
	}{
		{"leader exits on SIGTERM, children hold stdout", false},
		{"leader ignores SIGTERM too", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pids")
			params, err := json.Marshal(map[string]any{"mode": "hang", "children": 3, "pid_file": pidFile, "ignore_term": tc.ignoreTerm})
			require.NoError(t, err)
			e := newExec(t, agent.ExecConfig{KillGrace: 200 * time.Millisecond})
			ctx, cancel := agent.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = e.Run(ctx, req("hang", string(params)))
			elapsed := time.Since(start)
			f := requireFailure(t, err)
			require.Equal(t, resilience.Timeout, f.Class, "%v", err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Contains(t, f.Error(), "agent timed out after 1.5s", "the timeout given, not a measured figure")
			require.Less(t, elapsed, 4*time.Second)
			requireAllGone(t, readPIDs(t, pidFile))
		})
	}
}

// TestTimeoutMessageNamesTheTimeout (#23, flaky "timed out after
// 1.499s"): a timeout failure names the timeout agent.WithTimeout gave the
// call, exactly, however late the runner started; a deadline set
// otherwise is not passed off as a configured timeout.
func TestTimeoutMessageNamesTheTimeout(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{Command: []string{"agentq-never-started"}})
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: "http://127.0.0.1:1/"})
	require.NoError(t, err)
	for name, r := range map[string]agent.Runner{"exec": e, "http": h} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The runner starts after the deadline: any figure measured
			// from its start is short of the timeout given.
			ctx, cancel := agent.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			<-ctx.Done()
			_, err := r.Run(ctx, req("late", `{}`))
			f := requireFailure(t, err)
			require.Equal(t, resilience.Timeout, f.Class)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Contains(t, f.Error(), "agent timed out after 20ms")

			// A parent's earlier deadline is not the timeout given.
			parent, cancelParent := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancelParent()
			ctx, cancel = agent.WithTimeout(parent, time.Hour)
			defer cancel()
			<-ctx.Done()
			_, err = r.Run(ctx, req("parent", `{}`))
			f = requireFailure(t, err)
			require.Equal(t, resilience.Timeout, f.Class)
			require.Contains(t, f.Error(), "agent timed out")
			require.NotContains(t, f.Error(), "1h")
		})
	}
}

func TestExecSuccessLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	params, err := json.Marshal(map[string]any{"mode": "orphan", "children": 2, "pid_file": pidFile})
	require.NoError(t, err)
	e := newExec(t, agent.ExecConfig{})
	data, err := e.Run(context.Background(), req("orphan", string(params)))
	require.NoError(t, err)
	require.JSONEq(t, `{"children":2}`, string(data))
	requireAllGone(t, readPIDs(t, pidFile))
}

func TestExecCancel(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	params, err := json.Marshal(map[string]any{"mode": "hang", "children": 2, "pid_file": pidFile})
	require.NoError(t, err)
	e := newExec(t, agent.ExecConfig{KillGrace: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, req("cancel", string(params)))
		done <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, 10*time.Second, 5*time.Millisecond)
	cancel()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	f := requireFailure(t, runErr)
	require.Equal(t, resilience.Canceled, f.Class)
	require.ErrorIs(t, runErr, context.Canceled)
	requireAllGone(t, readPIDs(t, pidFile))
}

func TestExecContextAlreadyDone(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{Command: []string{"agentq-never-started"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Run(ctx, req("done", `{}`))
	f := requireFailure(t, err)
	require.Equal(t, resilience.Canceled, f.Class)
}

func TestExecConcurrent(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	type result struct {
		want string
		data json.RawMessage
		err  error
	}
	results := make(chan result, 16)
	for i := 0; i < cap(results); i++ {
		go func() {
			p := `{"mode":"echo","i":` + strconv.Itoa(i) + `}`
			data, err := e.Run(context.Background(), req("c", p))
			results <- result{p, data, err}
		}()
	}
	for i := 0; i < cap(results); i++ {
		r := <-results
		require.NoError(t, r.err)
		require.JSONEq(t, r.want, string(r.data))
	}
}

// BenchmarkExecEcho is one exec call of the test agent, guard and all
// (internal/procgroup): compare with BenchmarkStartProcess for the guard's
// share.
func BenchmarkExecEcho(b *testing.B) {
	e, err := agent.NewExec(agent.ExecConfig{Command: []string{testbin.Build(b, testAgentPkg), "echo"}})
	require.NoError(b, err)
	for b.Loop() {
		if _, err := e.Run(context.Background(), req("bench", `{}`)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartProcess is the test agent run directly in a process group
// of its own, without a guard.
func BenchmarkStartProcess(b *testing.B) {
	bin := testbin.Build(b, testAgentPkg)
	for b.Loop() {
		cmd := exec.Command(bin, "echo")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExecBackPressure: an exec agent's retry_after and headers reach the
// classifier and the provider pauses as an HTTP agent's Retry-After and
// rate-limit headers do: the failure's Header holds the allowlisted
// headers and retry_after as Retry-After (winning over retry-after-ms),
// the reply observer sees them, and an invalid retry_after is logged
// with the agent's name and ignored while the failure is classified as
// usual.
func TestExecBackPressure(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	call := func(t *testing.T, reply string) (*resilience.Failure, agent.Reply, string) {
		t.Helper()
		params, err := json.Marshal(map[string]any{"mode": "exit", "code": 0, "stdout": reply})
		require.NoError(t, err)
		var logs bytes.Buffer
		var got agent.Reply
		ctx := agent.WithReplyObserver(context.Background(), func(r agent.Reply) { got = r })
		ctx = agent.WithLogger(ctx, slog.New(slog.NewTextHandler(&logs, nil)))
		_, err = e.Run(ctx, req("bp", string(params)))
		return requireFailure(t, err), got, logs.String()
	}

	t.Run("retry_after and headers", func(t *testing.T) {
		t.Parallel()
		f, got, logs := call(t, `{"status":"error","code":429,"error":"rate limited","retry_after":1.5,`+
			`"headers":{"retry-after-ms":"9000","x-should-retry":"true","authorization":"Bearer sk-x","x-request-id":"r1"}}`)
		require.Equal(t, http.Header{"Retry-After": {"1.5"}, "X-Should-Retry": {"true"}}, f.Header)
		require.Equal(t, f.Header, got.Header)
		require.Equal(t, 429, got.Status)
		require.Empty(t, logs)
		v := resilience.Classify(f)
		require.Equal(t, resilience.RateLimited, v.Class)
		require.Equal(t, 1500*time.Millisecond, v.RetryAfter)
		require.Equal(t, 1, v.ShouldRetry)
		d, _, ok := limit.ExhaustedFor(got.Status, got.Header, time.Now())
		require.True(t, ok, "a 429 with retry_after pauses the key")
		require.Equal(t, 1500*time.Millisecond, d)
	})
	t.Run("headers alone", func(t *testing.T) {
		t.Parallel()
		f, _, _ := call(t, `{"status":"error","code":429,"error":"rate limited","headers":{"retry-after-ms":"1500",`+
			`"x-ratelimit-remaining-requests":"0","x-ratelimit-reset-requests":"20s"}}`)
		require.Equal(t, 1500*time.Millisecond, resilience.Classify(f).RetryAfter)
		d, _, ok := limit.ExhaustedFor(f.Status, f.Header, time.Now())
		require.True(t, ok)
		require.Equal(t, 20*time.Second, d, "the longest reset the headers name")
	})
	t.Run("RFC 3339 retry_after", func(t *testing.T) {
		t.Parallel()
		at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		f, _, _ := call(t, `{"status":"error","code":503,"error":"overloaded","retry_after":"`+at+`"}`)
		v := resilience.Classify(f)
		require.Equal(t, resilience.RetryAfterCap, v.RetryAfter, "an hour, capped as an HTTP agent's Retry-After is")
	})
	t.Run("invalid retry_after", func(t *testing.T) {
		t.Parallel()
		f, got, logs := call(t, `{"status":"error","code":429,"error":"rate limited","retry_after":"soon"}`)
		require.Nil(t, f.Header)
		require.Nil(t, got.Header)
		require.Contains(t, logs, "level=WARN")
		require.Contains(t, logs, "retry_after")
		require.Contains(t, logs, "agent=test")
		v := resilience.Classify(f)
		require.Equal(t, resilience.RateLimited, v.Class, "classified as usual")
		require.Zero(t, v.RetryAfter)
	})
}
