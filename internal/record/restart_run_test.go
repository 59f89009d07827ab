package record

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestRestartedRunReadsActive (issue #39 item 7): a restarted run that
// runs reads active, whatever order the writes of its restart come in —
// the restart recorded by the run that scheduled it (Restarting), or by
// the redelivery of that run after its worker died before recording it
// (RestartRecovered) before or after the restart run's start, and after a
// deferral of the restart run's admission. A write of the superseded run
// that lands after the restart run started is stale and changes nothing.
func TestRestartedRunReadsActive(t *testing.T) {
	eachBackend(t, func(t *testing.T, _ redis.UniversalClient, st *Store) {
		run0 := func(id string) Delivery { return Delivery{ID: id, Attempt: 2, Seed: seed(), Worker: "host:1"} }
		run1 := func(id string, attempt int) Delivery {
			return Delivery{ID: id, Run: 1, Restarts: 1, Attempt: attempt, Seed: seed(), Worker: "host:2"}
		}
		failed := Attempt{Attempt: 2, ErrorClass: "network_transient", Error: "agent down"}
		next := NextRun{Run: 1, Restarts: 1}
		requireActive := func(id string) {
			t.Helper()
			v := get(t, st, id)
			require.Equal(t, StateActive, v.State, "%s: %v", id, events(v))
			require.Equal(t, 1, v.Run)
			require.Equal(t, 1, v.Restarts)
		}
		for _, id := range []string{"recorded", "recovered-first", "started-first", "deferred"} {
			create(t, st, id)
			require.Equal(t, Applied, apply(t, st, run0(id), Started()))
		}

		// The worker records the restart; the restart run starts.
		require.Equal(t, Applied, apply(t, st, run0("recorded"), Restarting(failed, next, time.Minute)))
		require.Equal(t, StateRestarting, get(t, st, "recorded").State)
		require.Equal(t, Applied, apply(t, st, run1("recorded", 1), Started()))
		requireActive("recorded")
		// Run 0's worker, killed before asynq's ack, is redelivered: stale.
		require.Equal(t, Stale, apply(t, st, run0("recorded"), RestartRecovered(failed, next)))
		require.Equal(t, Stale, apply(t, st, run0("recorded"), Restarting(failed, next, time.Minute)))
		requireActive("recorded")

		// Killed before recording: the redelivery records it, then run 1 starts.
		require.Equal(t, Applied, apply(t, st, run0("recovered-first"), RestartRecovered(failed, next)))
		require.Equal(t, StateRestarting, get(t, st, "recovered-first").State)
		require.Equal(t, Applied, apply(t, st, run1("recovered-first", 1), Started()))
		requireActive("recovered-first")

		// Killed before recording; run 1 starts before run 0's redelivery.
		require.Equal(t, Applied, apply(t, st, run1("started-first", 1), Started()))
		require.Equal(t, Stale, apply(t, st, run0("started-first"), RestartRecovered(failed, next)))
		requireActive("started-first")

		// The restart run's admission is deferred (breaker open), then it runs.
		require.Equal(t, Applied, apply(t, st, run0("deferred"), Restarting(failed, next, time.Minute)))
		require.Equal(t, Applied, apply(t, st, run1("deferred", 0), Deferred(Attempt{}, WaitingBreaker, "breaker open", time.Second)))
		require.Equal(t, StateDeferred, get(t, st, "deferred").State)
		require.Equal(t, Applied, apply(t, st, run1("deferred", 2), Started()))
		requireActive("deferred")
	})
}
