package console

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiveEventsBehindLogin: the Task page's event stream needs the
// console's login (a bearer token here); with it, an ended task's events
// are replayed and the stream ends; an unknown task is 404.
func TestLiveEventsBehindLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedTask(t, "live-1")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.url + "/ui/tasks/live-1/events")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "no session: to the login page")
	require.Contains(t, resp.Header.Get("Location"), "/ui/login")

	get := func(path string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, f.url+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Last-Event-ID", "1")
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	require.Equal(t, http.StatusNotFound, get("/ui/tasks/nope/events").StatusCode)
	resp = get("/ui/tasks/live-1/events")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	var ids []string
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
		}
		if sc.Text() == "event: retrying" {
			break
		}
	}
	require.Equal(t, []string{"2"}, ids, "resumed after event 1")
}
