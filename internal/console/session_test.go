package console

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/stretchr/testify/require"
)

// TestLogoutEndsTheSession: a cookie copied before logout is refused
// after it, for a GET (back to the login form) and for a POST (401, with
// the CSRF token of the session), on this server and on another replica
// sharing the Redis and the token; other sessions live on. With Redis
// unable to say whether a session was revoked, no cookie is trusted.
func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	other := f.replica(t, testToken, slog.New(slog.DiscardHandler))
	copied := login(t, f)
	kept := login(t, f)

	page := call(t, "GET", f.url+"/ui/breakers", nil, copied)
	require.Equal(t, http.StatusOK, page.status)
	csrf := csrfOf(t, page.body)
	r := call(t, "GET", other+"/ui/breakers", nil, copied)
	require.Equal(t, http.StatusOK, r.status, "any replica accepts a live session")

	r = call(t, "POST", f.url+"/ui/logout", url.Values{"csrf": {csrf}}, copied, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	require.Equal(t, "/ui/login", r.header.Get("Location"))
	require.Contains(t, r.header.Get("Set-Cookie"), "Max-Age=0")

	for _, base := range []string{f.url, other} {
		r = call(t, "GET", base+"/ui/breakers", nil, copied)
		require.Equal(t, http.StatusSeeOther, r.status, "GET with the logged-out cookie on %s", base)
		require.True(t, strings.HasPrefix(r.header.Get("Location"), "/ui/login?"), r.header.Get("Location"))
		r = call(t, "POST", base+"/ui/breakers/trip", url.Values{"csrf": {csrf}, "key": {"llm.example"}, "for": {"5m"}}, copied, "Origin: "+base)
		require.Equal(t, http.StatusUnauthorized, r.status, "POST with the logged-out cookie on %s", base)
	}
	snap, err := breaker.New(f.rdb).Get(context.Background(), "llm.example")
	require.NoError(t, err)
	require.Equal(t, breaker.StateClosed, snap.State, "the refused POST tripped nothing")

	r = call(t, "GET", f.url+"/ui/breakers", nil, kept)
	require.Equal(t, http.StatusOK, r.status, "another session is not logged out")

	f.redis.Stop()
	r = call(t, "GET", f.url+"/ui/breakers", nil, kept)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "Redis down: the cookie cannot be checked")
}

// TestFlashIsNotTakenFromTheURL: a link cannot make the console say
// anything: the URL carries only the kind of a flash, and what the page
// says comes from the session's server-side state — nothing for a kind the
// session did not do, and never text from the query.
func TestFlashIsNotTakenFromTheURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedDeadLetters(t, 2)
	cookie := login(t, f)
	const spoof = "ZZspoofZZ your token expired, log in at evil.example"
	q := url.Values{"id": {spoof}, "key": {spoof}, "n": {spoof}, "failed": {spoof}, "for": {spoof}, "more": {"1"}}
	for _, kind := range []string{"requeued", "deleted", "requeued-n", "deleted-n", "reset", "tripped", "canceled", spoof} {
		q.Set("done", kind)
		for _, path := range []string{"/ui/", "/ui/deadletters", "/ui/breakers"} {
			r := call(t, "GET", f.url+path+"?"+q.Encode(), nil, cookie)
			require.Equal(t, http.StatusOK, r.status)
			require.NotContains(t, r.body, "ZZspoofZZ", "%s done=%s", path, kind)
			require.NotContains(t, r.body, `class="flash"`, "no flash the session did not cause (%s done=%s)", path, kind)
		}
	}

	// A real requeue: the redirect names only the kind; the page names the
	// dead letter from the session's flash, and no query text.
	page := call(t, "GET", f.url+"/ui/deadletters", nil, cookie)
	r := call(t, "POST", f.url+"/ui/deadletter/dl-2/requeue", url.Values{"csrf": {csrfOf(t, page.body)}}, cookie, "Origin: "+f.url)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	loc := r.header.Get("Location")
	require.Equal(t, "/ui/deadletters?done=requeued", loc)
	r = call(t, "GET", f.url+loc+"&id="+url.QueryEscape(spoof), nil, cookie)
	require.Contains(t, r.body, "Requeued dl-2: it is pending again.")
	require.NotContains(t, r.body, "ZZspoofZZ")
	r = call(t, "GET", f.url+"/ui/?done=deleted", nil, cookie)
	require.NotContains(t, r.body, "dl-2", "the flash shows only for its own kind")

	// Another session sees none of it.
	r = call(t, "GET", f.url+loc, nil, login(t, f))
	require.NotContains(t, r.body, "Requeued dl-2")
}
