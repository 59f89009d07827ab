package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
)

// TestEnqueueTenantPriority (#28): POST /api/v1/tasks takes "tenant" and
// "priority" (one task and a batch), the task JSON returns them (priority
// "normal" when none was given, tenant omitted for the default tenant), and
// a bad value is 400 naming the field, with nothing enqueued.
func TestEnqueueTenantPriority(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"tp-1","agent":"tool","tenant":"team-a","priority":"high"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"tasks":[{"id":"tp-2","agent":"tool","tenant":"équipe_b","priority":"low"},{"id":"tp-3","agent":"tool"}]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	for id, want := range map[string][2]string{"tp-1": {"team-a", "high"}, "tp-2": {"équipe_b", "low"}, "tp-3": {"", "normal"}} {
		r := do(t, "GET", e.url+"/api/v1/tasks/"+id, "", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.Equal(t, want[1], r.json["priority"], id)
		if want[0] == "" {
			require.NotContains(t, r.json, "tenant", id)
		} else {
			require.Equal(t, want[0], r.json["tenant"], id)
		}
	}
	// A duplicate answers with the existing task, tenant and all.
	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"tp-1","agent":"tool"}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	task, _ := r.json["task"].(map[string]any)
	require.Equal(t, "team-a", task["tenant"])

	for _, tc := range []struct {
		body   string
		errHas []string
	}{
		{`{"id":"bad-1","agent":"tool","priority":"urgent"}`, []string{`field "priority"`, `"urgent"`, "high, normal, low"}},
		{`{"id":"bad-2","agent":"tool","priority":"HIGH"}`, []string{`field "priority"`}},
		{`{"id":"bad-3","agent":"tool","tenant":"` + strings.Repeat("x", 129) + `"}`, []string{`field "tenant"`, "at most 128"}},
		{`{"id":"bad-4","agent":"tool","tenant":"a\u001b[2Jb"}`, []string{`field "tenant"`, "control character"}},
		{`{"tasks":[{"id":"bad-5","agent":"tool"},{"id":"bad-6","agent":"tool","tenant":"a\u202eb"}]}`, []string{"tasks[1]", `field "tenant"`}},
		{`{"id":"bad-7","agent":"tool","priority":1}`, []string{`"priority"`}},
		// #35 item 11: invisible characters make look-alike tenants.
		{`{"id":"bad-8","agent":"tool","tenant":"acme\u200b"}`, []string{`field "tenant"`, "format character (U+200B"}},
		{`{"id":"bad-9","agent":"tool","tenant":"\ufeffacme"}`, []string{`field "tenant"`, "format character (U+FEFF"}},
		{`{"tasks":[{"id":"bad-10","agent":"tool","tenant":"acme\u2028"}]}`, []string{"tasks[0]", `field "tenant"`, "separator (U+2028"}},
		{`{"id":"bad-11","agent":"tool","tenant":"acme corp"}`, []string{`field "tenant"`, "separator (U+0020"}},
	} {
		r := do(t, "POST", e.url+"/api/v1/tasks", "", tc.body)
		requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, tc.errHas...)
	}
	for _, id := range []string{"bad-1", "bad-2", "bad-3", "bad-4", "bad-5", "bad-6", "bad-7", "bad-8", "bad-9", "bad-10", "bad-11"} {
		ok, err := e.store.Exists(ctx, id)
		require.NoError(t, err)
		require.False(t, ok, id)
	}
}
