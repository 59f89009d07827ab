package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// fanoutResult is what the test agent's "fanout" mode answers on its
// resumed run.
type fanoutResult struct {
	Resume    int               `json:"resume"`
	Children  int               `json:"children"`
	Succeeded int               `json:"succeeded"`
	IDs       []string          `json:"ids"`
	Results   []json.RawMessage `json:"results"`
	Wait      struct {
		Kind     string `json:"kind"`
		TimedOut bool   `json:"timed_out"`
	} `json:"wait"`
}

// TestFanOutEndToEnd (#37 §3): a real worker process (concurrency 1) runs
// an exec parent that suspends with 5 exec children (mode all): the
// parent waits holding no slot, the children run, and the parent resumes
// once, by its children, with their 5 results in spawn order.
func TestFanOutEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	cfg := writeConfig(t, fmt.Sprintf(`
worker: {concurrency: 1, shutdown_timeout: 5s}
defaults:
  timeout: 1m
agents:
  boss: {exec: {command: [%q]}}
  kid: {exec: {command: [%q]}}
`, b.agent, b.agent))
	start(t, "worker", b.worker, "--config", cfg, "--redis", srv.URL())
	rdb := srv.Client()
	_, err := tasks.NewClient(rdb).Enqueue(context.Background(), tasks.Task{ID: "fan", Agent: "boss",
		Params: json.RawMessage(`{"mode":"fanout","n":5,"child":{"agent":"kid","params":{"mode":"echo"}},"timeout":"1h"}`)})
	require.NoError(t, err)

	v := waitStates(t, rdb, []string{"fan"}, 90*time.Second)["fan"]
	require.Equal(t, tasks.StateSucceeded, v.State, "%s: %s", v.ErrorClass, v.Error)
	var r fanoutResult
	require.NoError(t, json.Unmarshal(v.Result, &r), string(v.Result))
	require.Equal(t, 1, r.Resume)
	require.Equal(t, "children", r.Wait.Kind)
	require.False(t, r.Wait.TimedOut)
	require.Equal(t, 5, r.Children)
	require.Equal(t, 5, r.Succeeded)
	for i, id := range r.IDs {
		require.Equal(t, fmt.Sprintf("fan.c%d", i+1), id)
		require.JSONEq(t, fmt.Sprintf(`{"mode":"echo","i":%d}`, i+1), string(r.Results[i]))
	}
	require.Equal(t, "children", eventOf(t, v, tasks.EventResumed).By)
	require.Equal(t, 1, v.Resumes)
	require.Equal(t, r.IDs, v.Children)
	for _, id := range r.IDs {
		kid, err := tasks.NewStore(rdb).Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, "fan", kid.Parent)
	}
}
