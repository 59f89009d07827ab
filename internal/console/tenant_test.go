package console

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/tasks"
)

// TestTaskPageShowsTenantAndPriority (#28): the task page shows the task's
// tenant ("(default)" for the default tenant) and priority ("normal" when
// it was given none), escaped like every other field.
func TestTaskPageShowsTenantAndPriority(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	ctx := context.Background()
	_, err := f.client.Enqueue(ctx, tasks.Task{ID: "tp-1", Agent: "llm", Tenant: "<team-a>", Priority: tasks.PriorityHigh})
	require.NoError(t, err)
	_, err = f.client.Enqueue(ctx, tasks.Task{ID: "tp-2", Agent: "llm"})
	require.NoError(t, err)
	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/tasks/tp-1", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<dd id="task-tenant">&lt;team-a&gt;</dd>`)
	require.Contains(t, r.body, `<dd id="task-priority">high</dd>`)
	r = call(t, "GET", f.url+"/ui/tasks/tp-2", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<dd id="task-tenant">(default)</dd>`)
	require.Contains(t, r.body, `<dd id="task-priority">normal</dd>`)
}
