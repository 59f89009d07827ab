package api_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/rkeys"
)

// enqueueQueued puts task id in the queue (no worker runs it).
func enqueueQueued(t testing.TB, e env, id string) {
	t.Helper()
	r := do(t, http.MethodPost, e.url+"/api/v1/tasks", "", `{"id":"`+id+`","agent":"tool"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
}

// watched reports whether someone waits for or streams task id (its
// record's watch flag).
func watched(e env, id string) bool {
	v, err := e.rdb.HGet(context.Background(), rkeys.Task(id), record.FieldWatch).Result()
	return err == nil && v == "1"
}

// finish records an attempt of task id and its end.
func finish(t *testing.T, e env, id string, c record.Change) {
	t.Helper()
	ctx := context.Background()
	d := record.Delivery{ID: id, Attempt: 1}
	for _, ch := range []record.Change{record.Started(), c} {
		out, err := record.StoreOf(e.store).Apply(ctx, d, ch)
		require.NoError(t, err)
		require.Equal(t, record.Applied, out)
	}
}

// TestWaitAnswersAtTheEnd: GET ?wait= answers when the task ends, with
// its result, well before the wait elapses; a dead letter's reply says
// why (reason); a wait that elapses answers the current state.
func TestWaitAnswersAtTheEnd(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{})
	enqueueQueued(t, e, "w1")
	got := make(chan reply, 1)
	start := time.Now()
	go func() { got <- do(t, http.MethodGet, e.url+"/api/v1/tasks/w1?wait=50s", "", "") }()
	require.Eventually(t, func() bool { return watched(e, "w1") }, 10*time.Second, 5*time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("answered before the end: %s", r.body)
	default:
	}
	finish(t, e, "w1", record.Succeeded(record.Attempt{Attempt: 1}, []byte(`{"answer":42}`)))
	r := <-got
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "succeeded", r.json["state"])
	require.Equal(t, map[string]any{"answer": float64(42)}, r.json["result"])
	require.Less(t, time.Since(start), 40*time.Second, "answered at the end, not at the timeout")

	enqueueQueued(t, e, "w2")
	finish(t, e, "w2", record.DeadLettered(record.Attempt{Attempt: 1, ErrorClass: "invalid_request", Error: "bad"}, "not_retryable"))
	r = do(t, http.MethodGet, e.url+"/api/v1/tasks/w2?wait=30", "", "")
	require.Equal(t, "dead_lettered", r.json["state"])
	require.Equal(t, "not_retryable", r.json["reason"])
	require.Equal(t, "invalid_request", r.json["error_class"])

	enqueueQueued(t, e, "w3")
	r = do(t, http.MethodGet, e.url+"/api/v1/tasks/w3?wait=100ms", "", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, "pending", r.json["state"])
}

// TestWaitRefusals: a wait over 60 s or not a duration is 400 naming
// wait; an unknown task is 404; the token is required.
func TestWaitRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{Token: token})
	for _, w := range []string{"61s", "61", "-1s", "soon", "NaN"} {
		requireError(t, do(t, http.MethodGet, e.url+"/api/v1/tasks/x?wait="+w, token, ""), http.StatusBadRequest, api.CodeInvalidRequest, `"wait"`)
	}
	requireError(t, do(t, http.MethodGet, e.url+"/api/v1/tasks/nope?wait=1s", token, ""), http.StatusNotFound, api.CodeNotFound)
	requireError(t, do(t, http.MethodGet, e.url+"/api/v1/tasks/nope?wait=1s", "", ""), http.StatusUnauthorized, api.CodeUnauthorized)
	requireError(t, do(t, http.MethodGet, e.url+"/api/v1/tasks/nope/events", token, ""), http.StatusNotFound, api.CodeNotFound)
	requireError(t, do(t, http.MethodGet, e.url+"/api/v1/tasks/nope/events", "", ""), http.StatusUnauthorized, api.CodeUnauthorized)
	requireError(t, do(t, http.MethodGet, e.url+"/api/v1/tasks/nope/events?after=x", token, ""), http.StatusBadRequest, api.CodeInvalidRequest, "after")
}

// sseEvent is one event of a stream.
type sseEvent struct{ id, event, data string }

// stream opens task id's event stream with the given Last-Event-ID
// (empty: none) and returns its events as they come, and how many
// comments it had, until the stream ends (the channel closes).
func stream(t *testing.T, url, lastID string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan sseEvent, 100)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				out <- sseEvent{event: "comment", data: line}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out, resp
}

// next is the stream's next event (comments skipped unless wanted).
func next(t *testing.T, c <-chan sseEvent, comments bool) (sseEvent, bool) {
	t.Helper()
	for {
		select {
		case ev, ok := <-c:
			if ok && ev.event == "comment" && !comments {
				continue
			}
			return ev, ok
		case <-time.After(20 * time.Second):
			t.Fatal("no event")
		}
	}
}

// TestEventStream: the stream sends each event as recorded (id: seq,
// event: name, data: JSON), keep-alive comments while idle, and ends after
// the terminal event; Last-Event-ID and ?after= resume with the events
// after, none repeated; an ended task replays and ends.
func TestEventStream(t *testing.T) {
	t.Parallel()
	e := setup(t, api.Options{KeepAlive: 20 * time.Millisecond})
	enqueueQueued(t, e, "s1")
	c, _ := stream(t, e.url+"/api/v1/tasks/s1/events", "")
	ev, _ := next(t, c, false)
	require.Equal(t, sseEvent{id: "1", event: "queued", data: ev.data}, ev)
	require.Contains(t, ev.data, `"seq":1`)
	for {
		if ev, _ := next(t, c, true); ev.event == "comment" && strings.Contains(ev.data, "keep-alive") {
			break
		}
	}
	ctx := context.Background()
	d := record.Delivery{ID: "s1", Attempt: 1}
	_, err := record.StoreOf(e.store).Apply(ctx, d, record.Started())
	require.NoError(t, err)
	_, _, err = record.StoreOf(e.store).Output(ctx, d, []record.Event{{Event: record.EventProgress, Data: []byte(`{"pct":50}`)}})
	require.NoError(t, err)
	ev, _ = next(t, c, false)
	require.Equal(t, "2", ev.id)
	require.Equal(t, "progress", ev.event)
	require.Contains(t, ev.data, `"pct":50`)
	_, err = record.StoreOf(e.store).Apply(ctx, d, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	require.NoError(t, err)
	ev, _ = next(t, c, false)
	require.Equal(t, sseEvent{id: "3", event: "succeeded", data: ev.data}, ev)
	_, open := next(t, c, false)
	require.False(t, open, "the stream ends after the terminal event")

	for _, tc := range []struct{ url, lastID, want string }{
		{"/api/v1/tasks/s1/events", "", "1,2,3"},
		{"/api/v1/tasks/s1/events", "1", "2,3"},
		{"/api/v1/tasks/s1/events?after=2", "", "3"},
		{"/api/v1/tasks/s1/events?after=1", "2", "3"},
		{"/api/v1/tasks/s1/events?after=3", "", ""},
	} {
		c, _ := stream(t, e.url+tc.url, tc.lastID)
		var ids []string
		for {
			ev, ok := next(t, c, false)
			if !ok {
				break
			}
			ids = append(ids, ev.id)
		}
		require.Equal(t, tc.want, strings.Join(ids, ","), "%s Last-Event-ID %q", tc.url, tc.lastID)
	}
}
