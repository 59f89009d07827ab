package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// TestRedeliveryAfterEnd (#11 item 3): a worker killed after a run's
// outcome is recorded (or after its dead letter is stored) but before
// asynq's ack leaves the run leased; asynq redelivers it. The redelivery
// must be acked without calling the agent again: the backend sees exactly
// the calls of the first worker, a succeeded task never reaches the dead
// letters, and a dead letter's record is completed.
func TestRedeliveryAfterEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	for _, tc := range []struct {
		failpoint string
		down      bool
		want      tasks.State
		calls     int
	}{
		{"after_success_recorded", false, tasks.StateSucceeded, 1},
		{"before_dead_letter_recorded", true, tasks.StateDeadLettered, 2},
		{"after_dead_letter_recorded", true, tasks.StateDeadLettered, 2},
	} {
		t.Run(tc.failpoint, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			rdb := srv.Client()
			be := newFlakyBackend(t, func(string, int) bool { return tc.down })
			cfg := restartConfig(t, be.srv.URL, "{max_restarts: 0}")
			id := "end-" + tc.failpoint

			crashAtFailpoint(t, b, srv, cfg, tc.failpoint, id)
			require.Equal(t, map[int]int{0: tc.calls}, be.runs(id))
			expireLease(t, rdb, id)
			w2 := start(t, "worker-2", b.worker, "--config", cfg, "--redis", srv.URL())
			poll(t, 30*time.Second, "worker 2 to ack the redelivery", func() bool {
				log, _ := os.ReadFile(w2.log)
				return strings.Contains(string(log), "the agent is not called again")
			})
			v := waitStates(t, rdb, []string{id}, 30*time.Second)[id]
			require.Equal(t, tc.want, v.State)
			require.Equal(t, map[int]int{0: tc.calls}, be.runs(id), "the agent is not called again")
			dead, err := deadletter.NewStore(rdb).IDs(context.Background(), deadletter.Filter{})
			require.NoError(t, err)
			if tc.want == tasks.StateSucceeded {
				require.NotContains(t, dead, id)
			} else {
				require.Equal(t, []string{id}, dead)
			}
			require.Equal(t, 0, w2.stop(t, 15*time.Second))
		})
	}
}
