package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
)

// TestEnqueueNotify: a task names configured webhooks in "notify" (its
// record keeps them, after its agent's agents.NAME.notify); a name the
// config does not have is a 400 naming it, and nothing is enqueued: an API
// caller cannot make workers call an address of its choosing.
func TestEnqueueNotify(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	ctx := context.Background()
	r := do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"n1","agent":"tool","notify":["results"]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	v, err := e.store.Get(ctx, "n1")
	require.NoError(t, err)
	require.Equal(t, []string{"results"}, v.Notify)

	r = do(t, "POST", e.url+"/api/v1/tasks", "", `{"id":"n2","agent":"llm","notify":["results","audit"]}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	v, err = e.store.Get(ctx, "n2")
	require.NoError(t, err)
	require.Equal(t, []string{"audit", "results"}, v.Notify, "the agent's notify first, no repeat")

	for _, body := range []string{
		`{"id":"n3","agent":"tool","notify":["http://evil.example/x"]}`,
		`{"id":"n3","agent":"tool","notify":["resultz"]}`,
		`{"tasks":[{"id":"n3","agent":"tool"},{"id":"n4","agent":"tool","notify":["resultz"]}]}`,
	} {
		r = do(t, "POST", e.url+"/api/v1/tasks", "", body)
		requireError(t, r, http.StatusBadRequest, api.CodeInvalidRequest, `"notify"`, "unknown webhook")
	}
	_, err = e.store.Get(ctx, "n3")
	require.Error(t, err, "nothing enqueued")
}
