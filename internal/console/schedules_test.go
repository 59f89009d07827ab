package console

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/configx"
	"github.com/agentq/agentq/internal/schedule"
)

// setSchedules configures two schedules on f and fires a tick of "beat".
func (f *fixture) setSchedules(t *testing.T) string {
	t.Helper()
	f.cfg.Schedules = map[string]config.Schedule{
		"beat":    {Cron: "@every 1m", Agent: "tool", Overlap: "skip"},
		"nightly": {Cron: "30 1 * * *", Timezone: "Europe/Paris", Agent: "llm"},
	}
	defs, err := configx.Schedules(f.cfg)
	require.NoError(t, err)
	tick := time.Now().Add(-time.Hour).Truncate(time.Minute)
	_, err = schedule.New(f.rdb, f.client, defs, schedule.Options{}).Fire(context.Background(), defs[0], tick)
	require.NoError(t, err)
	return schedule.TickID("beat", tick)
}

// TestSchedulesPage: the Schedules page lists the configured schedules
// with next and last fire and the last task, linked, with its state.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	id := f.setSchedules(t)
	r := call(t, "GET", f.url+"/ui/schedules", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `id="schedules"`)
	require.Contains(t, r.body, "2 schedules")
	require.Regexp(t, `(?s)data-name="beat".*overlap: skip.*href="/ui/tasks/`+id+`".*st-pending.*data-name="nightly".*Europe/Paris`, r.body)
}
