package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/registry"
)

// TestWorkers: GET /api/v1/workers lists a live worker with its task in
// flight and a gone one (its last heartbeat a minute ago) with its
// orphaned task and when lease recovery brings it back; it requires the
// token when one is set.
func TestWorkers(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{Token: "tok"})
	ctx := context.Background()
	// Stamped ahead: alive however slow the machine (gone is 15 s silent).
	ahead := func() time.Time { return time.Now().Add(10 * time.Minute) }
	live := registry.NewHeartbeat(e.rdb, map[string]int{"default": 1}, 2, "", nil, ahead, 0)
	live.Track("t-live", "t-live", "tool", "default")
	require.NoError(t, live.Beat(ctx))
	past := func() time.Time { return time.Now().Add(-time.Minute) }
	gone := registry.NewHeartbeat(e.rdb, map[string]int{"default": 1}, 2, "", nil, past, 0)
	gone.Track("t-gone", "t-gone", "llm", "default")
	require.NoError(t, gone.Beat(ctx))
	lease := time.Now().Add(-25 * time.Second)
	require.NoError(t, e.rdb.ZAdd(ctx, broker.LeaseKey("default"), redis.Z{Score: float64(lease.Unix()), Member: "t-gone"}).Err())

	require.Equal(t, http.StatusUnauthorized, do(t, "GET", e.url+"/api/v1/workers", "", "").status)
	r := do(t, "GET", e.url+"/api/v1/workers", "tok", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	ws := r.json["workers"].([]any)
	require.Len(t, ws, 2)
	a, g := ws[0].(map[string]any), ws[1].(map[string]any)
	require.Equal(t, live.ID(), a["id"])
	require.Equal(t, "alive", a["state"])
	require.Equal(t, "t-live", a["tasks"].([]any)[0].(map[string]any)["id"])
	require.Equal(t, gone.ID(), g["id"])
	require.Equal(t, "gone", g["state"])
	require.EqualValues(t, 1, g["orphaned"])
	task := g["tasks"].([]any)[0].(map[string]any)
	require.Equal(t, "t-gone", task["id"])
	require.Equal(t, true, task["orphaned"])
	require.NotEmpty(t, task["recovery_from"])
	require.NotEmpty(t, task["recovery_by"])
}
