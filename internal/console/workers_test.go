package console

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/broker"
	"github.com/agentq/agentq/internal/registry"
)

// seedWorkers writes two workers in the registry: one alive running
// task-live, one gone (its last heartbeat a minute ago) whose task-orphan
// asynq still holds leased. It returns their IDs.
func (f *fixture) seedWorkers(t *testing.T) (alive, gone string) {
	t.Helper()
	ctx := context.Background()
	// The live worker's heartbeat is stamped ten minutes ahead, so that it
	// still counts as alive however long a busy machine takes to reach
	// the page (a worker is gone 15 s after its last heartbeat).
	ahead := func() time.Time { return time.Now().Add(10 * time.Minute) }
	live := registry.NewHeartbeat(f.rdb, map[string]int{"default": 1, "bulk": 3}, 8, "", nil, ahead, 0)
	live.Track("task-live", "task-live", "llm", "default")
	require.NoError(t, live.Beat(ctx))
	past := func() time.Time { return time.Now().Add(-time.Minute) }
	dead := registry.NewHeartbeat(f.rdb, map[string]int{"default": 1}, 4, "", nil, past, 0)
	dead.Track("task-orphan", "task-orphan", "tool", "default")
	require.NoError(t, dead.Beat(ctx))
	lease := time.Now().Add(-20 * time.Second)
	require.NoError(t, f.rdb.ZAdd(ctx, broker.LeaseKey("default"), redis.Z{Score: float64(lease.Unix()), Member: "task-orphan"}).Err())
	return live.ID(), dead.ID()
}

// TestWorkersPage: the Workers page lists a live and a gone worker, their
// tasks in flight, and the gone one's orphaned task with when lease
// recovery brings it back; the navigation links to it.
func TestWorkersPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	alive, gone := f.seedWorkers(t)
	r := call(t, "GET", f.url+"/ui/workers", nil, "Authorization: Bearer "+testToken)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<a href="/ui/workers" aria-current="page">Workers</a>`)
	require.Contains(t, r.body, `<span id="workers-alive">1</span> alive, <span id="workers-gone">1</span> gone`)
	require.Contains(t, r.body, "1 orphaned task</strong>")
	require.Regexp(t, `(?s)data-id="`+alive+`".*st-alive.*data-id="`+gone+`".*st-gone`, r.body, "live workers first")
	require.Contains(t, r.body, `href="/ui/tasks/task-live"`)
	require.Regexp(t, `(?s)data-id="task-orphan" class="failing">.*<td class="orphan">between \d{4}-`, r.body)
}
