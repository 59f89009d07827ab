package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/tasks"
)

// TestSchedules: GET /api/v1/schedules lists the configured schedules
// with next and last fire and the last task's ID and state.
func TestSchedules(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	defs, err := configx.Schedules(testConfig())
	require.NoError(t, err)
	tick := time.Now().Add(-time.Hour).Truncate(time.Minute)
	_, err = schedule.New(e.rdb, tasks.NewClient(e.rdb), defs, schedule.Options{}).Fire(context.Background(), defs[0], tick)
	require.NoError(t, err)

	r := do(t, "GET", e.url+"/api/v1/schedules", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	list := r.json["schedules"].([]any)
	require.Len(t, list, 2)
	beat, nightly := list[0].(map[string]any), list[1].(map[string]any)
	require.Equal(t, "beat", beat["name"])
	require.Equal(t, "@every 1m", beat["cron"])
	require.Equal(t, "UTC", beat["timezone"])
	require.Equal(t, "default", beat["queue"])
	require.Equal(t, "allow", beat["overlap"])
	require.Equal(t, tick.UTC().Format(time.RFC3339), beat["last_fire"])
	require.Equal(t, schedule.TickID("beat", tick), beat["last_task_id"])
	require.Equal(t, "pending", beat["last_task_state"])
	next, err := time.Parse(time.RFC3339, beat["next_fire"].(string))
	require.NoError(t, err)
	require.True(t, next.After(time.Now().Add(-time.Second)))
	require.Equal(t, "nightly", nightly["name"])
	require.Equal(t, "Europe/Paris", nightly["timezone"])
	require.Equal(t, "skip", nightly["overlap"])
	require.Nil(t, nightly["last_fire"])
	require.NotContains(t, nightly, "last_task_id")
}
