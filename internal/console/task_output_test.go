package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// runWithOutput enqueues task id and runs its attempt 1 to success with
// result, the agent reporting evs (progress and output) on the way.
func (f *fixture) runWithOutput(t *testing.T, id string, evs []record.Event, result []byte) {
	t.Helper()
	ctx := context.Background()
	_, err := f.client.Enqueue(ctx, tasks.Task{ID: id, Agent: "llm"})
	require.NoError(t, err)
	st := record.StoreOf(f.store)
	d := record.Delivery{ID: id, Attempt: 1}
	_, err = st.Apply(ctx, d, record.Started())
	require.NoError(t, err)
	if len(evs) > 0 {
		_, kept, err := st.Output(ctx, d, evs)
		require.NoError(t, err)
		require.Equal(t, len(evs), kept)
	}
	_, err = st.Apply(ctx, d, record.Succeeded(record.Attempt{Attempt: 1}, result))
	require.NoError(t, err)
}

// TestTaskPageShowsEndedOutput: an ended task's page shows its last
// progress and its output (the live list, which replays them, is only on
// a live task's page); a long output shows its end with a note saying
// what is left out.
func TestTaskPageShowsEndedOutput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	bearer := "Authorization: Bearer " + testToken
	f.runWithOutput(t, "done-1", []record.Event{
		{Event: record.EventProgress, Attempt: 1, Data: []byte(`{"done":1,"of":3}`)},
		{Event: record.EventOutput, Attempt: 1, Data: []byte(`"compiling module a"`)},
		{Event: record.EventProgress, Attempt: 1, Data: []byte(`{"done":3,"of":3}`)},
		{Event: record.EventOutput, Attempt: 1, Data: []byte(`{"chunk":"<b>", "n": 12345678901234567890}`)},
	}, []byte(`{"summary":"ok"}`))
	r := call(t, "GET", f.url+"/ui/tasks/done-1", nil, bearer)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, `<section id="output">`)
	require.Contains(t, r.body, "Last progress (attempt 1), ")
	require.Regexp(t, `<pre class="json" id="task-progress">\{\s*&#34;done&#34;: 3,\s*&#34;of&#34;: 3\s*}</pre>`, r.body, "the last progress")
	require.Contains(t, r.body, "Output: 2 events, one a line.")
	require.Contains(t, r.body, `<pre id="task-output">compiling module a`+"\n"+`{&#34;chunk&#34;:&#34;&lt;b&gt;&#34;,&#34;n&#34;:12345678901234567890}</pre>`)
	require.NotContains(t, r.body, `id="output-cut"`)
	require.NotContains(t, r.body, `id="live"`)
	require.Regexp(t, `<pre class="json" id="task-result">\{\s*&#34;summary&#34;: &#34;ok&#34;\s*}</pre>`, r.body)

	// Long: 60 lines of 1 KiB (the last 31 fit in 32 KiB).
	var evs []record.Event
	for i := range 60 {
		evs = append(evs, record.Event{Event: record.EventOutput, Data: []byte(fmt.Sprintf(`"line %02d %s"`, i, strings.Repeat("x", 1016)))})
	}
	f.runWithOutput(t, "done-long", evs, []byte(`"ok"`))
	r = call(t, "GET", f.url+"/ui/tasks/done-long", nil, bearer)
	require.Equal(t, http.StatusOK, r.status)
	out := between(t, r.body, `<pre id="task-output">`, `</pre>`)
	require.LessOrEqual(t, len(out), maxShownOutput)
	require.True(t, strings.HasPrefix(out, "line 29 "), out[:20])
	require.True(t, strings.HasSuffix(out, strings.Repeat("x", 1016)))
	require.Contains(t, r.body, `<span id="output-cut">Only the last`)
	require.Contains(t, r.body, "the first 29 events are left out; <code>GET /api/v1/tasks/done-long/events</code> replays them all.")

	// A live task's page has the live list instead; a task that reported
	// nothing has no output section.
	f.seedTask(t, "live-1")
	r = call(t, "GET", f.url+"/ui/tasks/live-1", nil, bearer)
	require.Contains(t, r.body, `id="live"`)
	require.NotContains(t, r.body, `<section id="output">`)
	f.runWithOutput(t, "quiet-1", nil, []byte(`1`))
	r = call(t, "GET", f.url+"/ui/tasks/quiet-1", nil, bearer)
	require.NotContains(t, r.body, `<section id="output">`)
}

// TestOutputTail: the output's tail keeps whole lines within the limit,
// or the end of the last line cut at a rune boundary.
func TestOutputTail(t *testing.T) {
	t.Parallel()
	text, hidden, cut := tail([]string{"aa", "bb", "cc"}, 6)
	require.Equal(t, "bb\ncc", text)
	require.Equal(t, 1, hidden)
	require.Zero(t, cut)
	text, hidden, cut = tail([]string{"aa", "ééé"}, 3) // é is 2 bytes
	require.Equal(t, "é", text)
	require.Equal(t, 1, hidden)
	require.Equal(t, 4, cut)
	text, hidden, _ = tail(nil, 3)
	require.Empty(t, text)
	require.Zero(t, hidden)
}

// between is the text of s between the first from and the to after it.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	require.True(t, ok, "no %s", from)
	in, _, ok := strings.Cut(rest, to)
	require.True(t, ok, "no %s after %s", to, from)
	return in
}
