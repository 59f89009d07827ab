package console

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/rkeys"
)

// TestBreakerFormsRefuseUnknownKeys: the console's Trip and Reset refuse
// (400, naming the known keys) a key that no configured agent uses and
// Redis has no breaker for, and write nothing; a configured key is fine.
func TestBreakerFormsRefuseUnknownKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	bearer := "Authorization: Bearer " + testToken
	for _, path := range []string{"/ui/breakers/trip", "/ui/breakers/reset"} {
		r := call(t, "POST", f.url+path, url.Values{"key": {"phantom"}, "for": {"1m"}}, bearer)
		require.Equal(t, http.StatusBadRequest, r.status, path)
		require.Contains(t, r.body, "phantom")
		require.Contains(t, r.body, "known breaker keys: &#34;llm.example&#34;, &#34;tool&#34;", path)
	}
	n, err := f.rdb.Exists(context.Background(), rkeys.Breaker("phantom")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a refused trip writes nothing")
	list, err := breaker.New(f.rdb).List(context.Background())
	require.NoError(t, err)
	require.Empty(t, list)

	r := call(t, "POST", f.url+"/ui/breakers/trip", url.Values{"key": {"tool"}, "for": {"1m"}}, bearer)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	snap, err := breaker.New(f.rdb).Get(context.Background(), "tool")
	require.NoError(t, err)
	require.Equal(t, breaker.StateOpen, snap.State)
}
