package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testbin"
	"github.com/agentq/agentq/tasks"
)

// stepsKillConfig is the config of the steps-kill test's workers; %s is the
// agent "steps"'s block.
const stepsKillConfig = `
worker: {concurrency: 2, shutdown_timeout: 5s}
defaults:
  timeout: 2m
  retry: {max_attempts: 3, initial_backoff: 50ms, max_backoff: 50ms, jitter: 0}
agents:
  steps: %s
`

// TestStepsWorkerKilledDuringStep (#37, "What it must show"): an agent of 5
// model-call steps whose worker is SIGKILLed during step 4, in three
// languages — an exec agent written with the Python helper, one written
// with the TypeScript helper (both run by cmd/worker) and a Go agent
// (req.Step, in-process in internal/testworker's worker). The fake provider
// holds step 4's first call unanswered; the test kills the worker process
// (its exec agent dies with it), moves the dead worker's asynq lease into
// the past (what time would do) and starts a new worker, whose lease
// recovery redelivers the task. After recovery:
//   - the provider received steps 1–3 exactly once, step 4 twice (the call
//     in flight at the kill, cut, and its redo) and step 5 once;
//   - the task succeeded in 2 attempts and recorded 5 steps, s1–s3 by
//     attempt 1 and s4–s5 by attempt 2, each once; the redelivery called
//     the provider for s4 and s5 only;
//   - "the task's usage equals what the provider served", precisely: the
//     task's usage total == the tokens the provider answered (500: five
//     replies of 100) == the sum of the recorded steps' usage. The cut
//     step-4 call was received but never answered, so it served no tokens
//     and nothing recorded it. (A real provider may bill a call its client
//     abandoned; agentq cannot see such a call — no process lives to
//     report it — and it is bounded by one call per kill: the step in
//     flight, which the issue says may be redone.)
//
// A Go agent's step is durable when req.Step returns, so step 3 is recorded
// before step 4's call starts. An exec agent's step line is written without
// an acknowledgement; it is durable once the worker has read and written
// it, so the test waits for the record to count 3 steps before the kill
// (a kill between the agent's write and the worker's would redo step 3:
// the step then in flight).
func TestStepsWorkerKilledDuringStep(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	py := apiPython(t)
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	require.NoError(t, err)
	py = strings.TrimSpace(string(out)) // the interpreter, not a shim: exec agents get only PATH
	node := clientsNode(t)
	_, err = os.Stat(filepath.Join(root, "clients/typescript/dist/agent.js"))
	require.NoError(t, err, "clients/typescript/dist is not built (run `make clients`, which `make test` runs)")

	cases := []struct {
		name, worker, agent string
		goAgent             bool
	}{
		{"python", b.worker, fmt.Sprintf("{exec: {command: [%q, %q], env: [PATH]}}", py, filepath.Join(root, "clients/python/tests/live_agent.py")), false},
		{"typescript", b.worker, fmt.Sprintf("{exec: {command: [%q, %q], env: [PATH]}}", node, filepath.Join(root, "clients/typescript/test/live_agent.mjs")), false},
		{"go", testbin.Build(t, mod+"/internal/testworker"), "{}", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stepsKilled(t, tc.worker, writeConfig(t, fmt.Sprintf(stepsKillConfig, tc.agent)), tc.goAgent)
		})
	}
}

// stepsKilled runs the scenario of TestStepsWorkerKilledDuringStep with
// the worker binary bin on config cfg.
func stepsKilled(t *testing.T, bin, cfg string, goAgent bool) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	prov := newHoldingProvider(t, "s4")
	const id = "steps-kill"
	w1 := start(t, "worker-1", bin, "--config", cfg, "--redis", srv.URL())
	params, _ := json.Marshal(map[string]any{"mode": "steps", "n": 5, "url": prov.srv.URL})
	_, err := tasks.NewClient(rdb).Enqueue(ctx, tasks.Task{ID: id, Agent: "steps", Params: params})
	require.NoError(t, err)

	select {
	case <-prov.held:
	case <-time.After(60 * time.Second):
		t.Fatal("step 4's call did not reach the provider")
	}
	st := tasks.NewStore(rdb)
	recorded := func() int {
		v, err := st.Get(ctx, id)
		require.NoError(t, err)
		return v.Steps
	}
	if goAgent {
		require.Equal(t, 3, recorded(), "req.Step returns once the step is written: steps 1–3 are durable before step 4 runs")
	} else {
		poll(t, 10*time.Second, "the worker to record steps 1–3", func() bool { return recorded() == 3 })
	}

	w1.signal(syscall.SIGKILL)
	<-w1.done
	var ee *exec.ExitError
	require.True(t, errors.As(w1.err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL, "worker 1: %v", w1.err)
	poll(t, 10*time.Second, "step 4's caller to die with the worker", func() bool {
		prov.mu.Lock()
		defer prov.mu.Unlock()
		return prov.cut == 1
	})
	v, err := st.Get(ctx, id)
	require.NoError(t, err)
	require.False(t, v.State.Terminal(), "held by the dead worker: %s", v.State)

	expireLease(t, rdb, id)
	start(t, "worker-2", bin, "--config", cfg, "--redis", srv.URL())
	v = waitStates(t, rdb, []string{id}, 60*time.Second)[id]
	require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
	require.Equal(t, 2, v.Attempts, "the killed attempt and the redelivery")

	calls, served := prov.snapshot()
	require.Equal(t, map[string]int{"s1": 1, "s2": 1, "s3": 1, "s4": 2, "s5": 1}, calls,
		"steps 1–3 and 5 received once; step 4 twice: cut by the kill, then redone")
	require.Equal(t, int64(500), served, "five calls answered")
	require.NotNil(t, v.Usage)
	require.Equal(t, served, v.Usage.TotalTokens, "the task's usage is what the provider served")
	require.Equal(t, 5, v.Steps)

	var result struct {
		Steps  []string `json:"steps"`
		Called int      `json:"called"`
	}
	require.NoError(t, json.Unmarshal(v.Result, &result))
	require.Equal(t, []string{"answer of s1", "answer of s2", "answer of s3", "answer of s4", "answer of s5"}, result.Steps)
	require.Equal(t, 2, result.Called, "the redelivery called the provider for steps 4 and 5 only")

	var names []string
	var stepTokens int64
	for _, ev := range v.History {
		if ev.Event != record.EventStep {
			continue
		}
		names = append(names, ev.Name)
		require.Equal(t, min(len(names)/4, 1)+1, ev.Attempt, "%s: steps 1–3 by attempt 1, 4–5 by attempt 2", ev.Name)
		require.NotNil(t, ev.Usage, ev.Name)
		stepTokens += ev.Usage.TotalTokens
	}
	require.Equal(t, []string{"s1", "s2", "s3", "s4", "s5"}, names, "each step recorded once, in order")
	require.Equal(t, v.Usage.TotalTokens, stepTokens, "the task's usage is its steps' usage")
}
