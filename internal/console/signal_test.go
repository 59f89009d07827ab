package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
	"github.com/agentq/agentq/worker"
)

// approver is a Go agent that suspends its first run for the signal
// "approve" (timeout an hour) and, resumed, returns the signal's data.
var approver = agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
	if req.Resume == 0 {
		return nil, agent.Suspend(agent.Wait{Signal: "approve", Timeout: time.Hour})
	}
	return json.RawMessage(fmt.Sprintf(`{"approval":%s}`, req.Signals["approve"])), nil
})

// runApprover runs a real worker on the fixture's Redis serving agent
// "approver" (the approver agent) on queue until the test ends.
func (f *fixture) runApprover(t *testing.T, queue string) {
	t.Helper()
	yaml := fmt.Sprintf("redis: {url: %q}\nworker: {concurrency: 2, shutdown_timeout: 2s, queues: {%s: 1}}\nagents:\n  approver: {}\n", f.redis.URL(), queue)
	cfg, err := config.Parse([]byte(yaml), "test.yaml")
	require.NoError(t, err)
	w, err := worker.New(cfg, f.redis.Client(), worker.WithAgent("approver", approver),
		worker.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// waitState polls task id until it is in state st.
func (f *fixture) waitState(t *testing.T, id string, st tasks.State) *tasks.View {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := f.store.Get(context.Background(), id)
		if err == nil && v.State == st {
			return v
		}
		require.False(t, time.Now().After(deadline), "task %s never got to %s (now %+v, %v)", id, st, v, err)
		time.Sleep(10 * time.Millisecond)
	}
}

// seedRecord creates task id's record, pending, with no run in a queue
// (no worker takes it).
func (f *fixture) seedRecord(t *testing.T, id string) {
	t.Helper()
	seed := record.Seed{Agent: "llm", Action: "chat", Queue: "default", EnqueuedAt: time.Now()}
	ok, err := record.NewStore(f.rdb).Create(context.Background(), record.New{ID: id, Seed: seed, State: record.StatePending})
	require.NoError(t, err)
	require.True(t, ok)
}

// TestSignalForm (#37): the page of a task waiting for a signal (put
// there by a real worker's suspend) shows the wait and a form prefilled
// with the signal's name; data that is not JSON is refused and sends
// nothing; the form's signal resumes the task, whose agent gets the data;
// sending it again says it is a duplicate; a signal to a task that waits
// for none is kept. The form is refused without the CSRF token or from
// another origin, as every console form is.
func TestSignalForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.runApprover(t, tasks.DefaultQueue)
	ctx := context.Background()
	_, err := f.client.Enqueue(ctx, tasks.Task{ID: "appr/1", Agent: "approver"})
	require.NoError(t, err)
	f.waitState(t, "appr/1", tasks.StateWaiting)

	cookie, origin := login(t, f), "Origin: "+f.url
	r := call(t, "GET", f.url+"/ui/tasks?state=waiting", nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<option value="waiting" selected>waiting</option>`, "the filter offers waiting")
	require.Contains(t, r.body, `<a href="/ui/tasks/appr%2F1">appr/1</a>`)
	require.Contains(t, r.body, `<span class="badge st-waiting">waiting</span>`)
	r = call(t, "GET", f.url+"/ui/", nil, cookie)
	require.Contains(t, r.body, `state=scheduled,waiting">1</a>`, "the overview's scheduled count holds the waiting run, and links to it")
	page := f.url + "/ui/tasks/" + url.PathEscape("appr/1")
	r = call(t, "GET", page, nil, cookie)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<dd id="task-state">waiting</dd>`)
	require.Contains(t, r.body, `<dd id="task-resumes">0 (waiting for resume 1)</dd>`)
	require.Contains(t, r.body, `<dt>Waits for</dt><dd id="task-wait">signal <code class="wait-signal">approve</code>, timeout 1h0m0s · due `)
	require.Contains(t, r.body, `<h2>Send signal <code>approve</code></h2>`)
	require.Contains(t, r.body, `<input type="text" name="name" value="approve"`)
	require.Contains(t, r.body, `action="/ui/tasks/appr%2F1/signal"`)
	require.Contains(t, r.body, `<span class="badge ev-badge">waiting</span>`)
	require.Contains(t, r.body, `<span class="meta ev-wait">signal <code class="wait-signal">approve</code>`)
	csrf := csrfOf(t, r.body)
	send := func(data string, hdr ...string) resp {
		form := url.Values{"csrf": {csrf}, "name": {"approve"}, "data": {data}}
		return call(t, "POST", page+"/signal", form, append([]string{cookie}, hdr...)...)
	}

	r = send(`{"approved": tru`, origin)
	require.Equal(t, http.StatusBadRequest, r.status, r.body)
	require.Contains(t, r.body, "not sent: its data is not JSON")
	r = call(t, "POST", page+"/signal", url.Values{"name": {"approve"}, "data": {`true`}}, cookie, origin)
	require.Equal(t, http.StatusForbidden, r.status, "no CSRF token")
	r = send(`true`, "Origin: http://evil.example")
	require.Equal(t, http.StatusForbidden, r.status, "cross-site")
	v, err := f.store.Get(ctx, "appr/1")
	require.NoError(t, err)
	require.Equal(t, tasks.StateWaiting, v.State, "nothing refused was sent")
	require.Zero(t, v.Signals)

	r = send(` {"approved": true, "by": "ops"} `, origin)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	require.Equal(t, "/ui/tasks/appr%2F1?done=signal-resumed", r.header.Get("Location"))
	r = call(t, "GET", f.url+r.header.Get("Location"), nil, cookie)
	require.Contains(t, r.body, "Sent signal approve to task appr/1: it waited for it and resumes now.")
	v = f.waitState(t, "appr/1", tasks.StateSucceeded)
	require.JSONEq(t, `{"approval":{"approved":true,"by":"ops"}}`, string(v.Result), "the agent got the data")
	require.Equal(t, 1, v.Resumes)

	r = call(t, "GET", page, nil, cookie)
	require.Contains(t, r.body, `<dd id="task-resumes">1</dd>`)
	require.Contains(t, r.body, `<dt>Last wait</dt><dd id="task-wait">signal <code class="wait-signal">approve</code>`)
	require.Contains(t, r.body, ` · ended: resumed</dd>`)
	require.Contains(t, r.body, `<dd id="task-signals">1 received</dd>`)
	require.Contains(t, r.body, `<span class="meta ev-resume">resume 1 by signal</span>`)
	require.Contains(t, r.body, `<li class="ev ev-signal">`)
	require.Contains(t, r.body, `<span class="meta ev-name">approve</span>`)
	require.NotContains(t, r.body, `signal-form`, "an ended task takes no signal")

	// The task has ended: a page still open refuses it clearly.
	r = send(`true`, origin)
	require.Equal(t, http.StatusConflict, r.status, r.body)
	require.Contains(t, r.body, "has ended (succeeded)")

	// A task that waits for no signal keeps it; the same name again is a
	// duplicate; a bad name is refused.
	f.seedRecord(t, "busy-1")
	busy := f.url + "/ui/tasks/busy-1"
	r = call(t, "GET", busy, nil, cookie)
	require.Contains(t, r.body, `<details id="signal"><summary>Send a signal</summary>`)
	require.Contains(t, r.body, `<input type="text" name="name" value=""`)
	for i, want := range []string{"signal-kept", "signal-duplicate"} {
		r = call(t, "POST", busy+"/signal", url.Values{"csrf": {csrf}, "name": {"later"}, "data": {""}}, cookie, origin)
		require.Equal(t, http.StatusSeeOther, r.status, r.body)
		require.Equal(t, "/ui/tasks/busy-1?done="+want, r.header.Get("Location"), i)
	}
	r = call(t, "GET", busy+"?done=signal-duplicate", nil, cookie)
	require.Contains(t, r.body, "Signal later had been sent to task busy-1 already: the first one is kept, nothing was written.")
	r = call(t, "POST", busy+"/signal", url.Values{"csrf": {csrf}, "name": {"no spaces"}}, cookie, origin)
	require.Equal(t, http.StatusBadRequest, r.status, r.body)
	require.Contains(t, r.body, `Signal &#34;no spaces&#34; not sent`)
	r = call(t, "POST", f.url+"/ui/tasks/nope/signal", url.Values{"csrf": {csrf}, "name": {"x"}}, cookie, origin)
	require.Equal(t, http.StatusNotFound, r.status, r.body)
	v, err = f.store.Get(ctx, "busy-1")
	require.NoError(t, err)
	require.Equal(t, 1, v.Signals)
}

// TestSignalFormSize: the signal form takes data up to the signal's cap
// however it is encoded (a form body larger than other forms'); data over
// the cap is refused (413) and nothing is sent.
func TestSignalFormSize(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.seedRecord(t, "big-1")
	bearer := "Authorization: Bearer " + testToken
	quoted := func(n int) string { return `"` + strings.Repeat(`\"`, (n-2)/2) + `"` } // encodes to ~3n bytes
	r := call(t, "POST", f.url+"/ui/tasks/big-1/signal", url.Values{"name": {"fits"}, "data": {quoted(tasks.MaxSignalBytes - 2)}}, bearer)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	r = call(t, "POST", f.url+"/ui/tasks/big-1/signal", url.Values{"name": {"over"}, "data": {quoted(tasks.MaxSignalBytes + 2)}}, bearer)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.body)
	v, err := f.store.Get(context.Background(), "big-1")
	require.NoError(t, err)
	require.Equal(t, 1, v.Signals)
}

// TestParseWait: the Task page's reading of a task's wait: every kind,
// a timeout in seconds, and how it ended.
func TestParseWait(t *testing.T) {
	t.Parallel()
	require.Nil(t, parseWait(nil))
	require.Nil(t, parseWait(json.RawMessage(`{"sleep":"1m"}`)), "no kind: not a wait")
	require.Nil(t, parseWait(json.RawMessage(`not json`)))
	w := parseWait(json.RawMessage(`{"kind":"signal","signal":"ok","timeout":90,"due":"2026-01-02T03:04:05Z","timed_out":true}`))
	require.Equal(t, "1m30s", w.TimeoutText())
	require.True(t, w.Ended())
	require.True(t, w.Expired())
	w = parseWait(json.RawMessage(`{"kind":"sleep","sleep":"10m","due":"2026-01-02T03:04:05Z","timed_out":false}`))
	require.Equal(t, "", w.TimeoutText())
	require.True(t, w.Ended())
	require.False(t, w.Expired())
	w = parseWait(json.RawMessage(`{"kind":"until","until":"2026-01-02T03:04:05Z","due":"2026-01-02T03:04:05Z"}`))
	require.False(t, w.Ended())
	require.Equal(t, "", waitingSignal(tasks.StateWaiting, json.RawMessage(`{"kind":"sleep","sleep":"1m"}`)))
	require.Equal(t, "", waitingSignal(tasks.StateActive, json.RawMessage(`{"kind":"signal","signal":"ok"}`)))
	require.Equal(t, "ok", waitingSignal(tasks.StateWaiting, json.RawMessage(`{"kind":"signal","signal":"ok"}`)))

	var b strings.Builder
	require.NoError(t, parsePages()["task.html"].ExecuteTemplate(&b, "waitfor", parseWait(json.RawMessage(`{"kind":"until","until":"2026-01-02T03:04:05Z","due":"2026-01-02T03:04:05Z"}`))))
	require.Equal(t, "until 2026-01-02 03:04:05Z · due 2026-01-02 03:04:05Z", b.String())
}
