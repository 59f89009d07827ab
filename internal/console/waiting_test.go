package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
)

// TestTaskPageLeadsWithWaitingFor (#39): a task deferred by its tenant's
// budget after a failed attempt leads with what it waits for and when its
// next attempt is due; the earlier attempt's error comes after, as its
// last error, not as the red error of a failed task. A dead-lettered
// task's error stays the error.
func TestTaskPageLeadsWithWaitingFor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	ctx := context.Background()
	st := record.NewStore(f.rdb)
	seed := record.Seed{Agent: "llm", Action: "chat", Queue: "default", Tenant: "acme", EnqueuedAt: time.Now()}
	for _, id := range []string{"held", "dead"} {
		ok, err := st.Create(ctx, record.New{ID: id, Seed: seed, State: record.StatePending})
		require.NoError(t, err)
		require.True(t, ok)
	}
	failed := record.Attempt{Attempt: 1, Agent: "llm", ErrorClass: "provider_error", Error: "status 500: provider_error"}
	_, err := st.Apply(ctx, record.Delivery{ID: "held", Attempt: 1, Seed: seed}, record.Retrying(failed, time.Second, time.Now().Add(time.Second)))
	require.NoError(t, err)
	why := `budget "tenant acme" tokens 1000/1h0m0s`
	_, err = st.Apply(ctx, record.Delivery{ID: "held", Attempt: 2, Seed: seed}, record.Deferred(record.Attempt{Agent: "llm"}, record.WaitingBudget, why, 50*time.Minute))
	require.NoError(t, err)
	_, err = st.Apply(ctx, record.Delivery{ID: "dead", Attempt: 1, Seed: seed}, record.DeadLettered(failed, "not_retryable"))
	require.NoError(t, err)

	cookie := login(t, f)
	r := call(t, "GET", f.url+"/ui/tasks/held", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	waitAt := strings.Index(r.body, `id="task-waiting"><strong>Waiting for: budget</strong> — budget &#34;tenant acme&#34; tokens 1000/1h0m0s · next attempt at <time datetime="`)
	require.Positive(t, waitAt, r.body)
	errAt := strings.Index(r.body, `<h2 id="last-error">Last error (attempt 1)</h2>`)
	require.Positive(t, errAt, r.body)
	require.Less(t, waitAt, errAt, "the waiting line comes before the last error")
	require.Less(t, waitAt, strings.Index(r.body, `<dl class="facts">`), "the waiting line leads the page")
	require.Contains(t, r.body, `<pre class="last-error">status 500: provider_error</pre>`)
	require.NotContains(t, r.body, `<pre class="error">`)

	r = call(t, "GET", f.url+"/ui/tasks/dead", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<h2>Error</h2><pre class="error">status 500: provider_error</pre>`)
	require.NotContains(t, r.body, `task-waiting`)
}
