package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/resilience"
)

// TestValidJSON (#35 item 4): invalid UTF-8 inside JSON strings becomes
// U+FFFD and the JSON stays JSON; valid data is returned as it is.
func TestValidJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"valid", `{"a":"é"}`, `{"a":"é"}`},
		{"in a string", "{\"a\":\"x\xff\xfey\"}", "{\"a\":\"x\uFFFDy\"}"},
		{"in a key", "{\"\xff\":1}", "{\"\uFFFD\":1}"},
		{"truncated rune", "\"\xe2\x82\"", "\"\uFFFD\""},
		{"not JSON", "plain \xff text", "plain \uFFFD text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := agent.ValidJSON(json.RawMessage(tc.in))
			require.Equal(t, tc.want, string(got))
			require.True(t, utf8.Valid(got))
			require.Equal(t, json.Valid([]byte(tc.in)), json.Valid(got))
		})
	}
}

// collect is an Emit that keeps the events' data.
type collect struct {
	mu   sync.Mutex
	data []string
}

func (c *collect) emit(_ string, d json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data = append(c.data, string(d))
}

// TestRunnersValidUTF8 (#35 item 4): whatever bytes an agent writes,
// each runner hands back a valid UTF-8 result, events and error: an exec
// agent (result, events-fd line, stderr tail), an HTTP agent (a JSON
// body, an event stream, an error body) and a Go function (agent.Valid).
func TestRunnersValidUTF8(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			_, _ = w.Write([]byte("{\"text\":\"a\xff\xfeb\"}"))
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"text\":\"a\xff\xfeb\"}\n\n"))
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("bad \xff\xfe"))
		}
	}))
	t.Cleanup(srv.Close)
	httpRunner := func(path string) agent.Runner {
		h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL + path})
		require.NoError(t, err)
		return h
	}
	goFunc := agent.Valid(agent.Func(func(_ context.Context, req agent.Request) (json.RawMessage, error) {
		req.Emit(agent.EventOutput, json.RawMessage("{\"text\":\"a\xff\xfeb\"}"))
		if string(req.Params) == `"fail"` {
			return nil, fmt.Errorf("wrapped \xff: %w", &resilience.Failure{Status: 500, Text: "bad \xff\xfe", Err: errors.New("cause \xfe")})
		}
		return json.RawMessage("{\"text\":\"a\xff\xfeb\"}"), nil
	}))
	for _, tc := range []struct {
		name   string
		run    agent.Runner
		params string
		events int
		fail   bool
	}{
		{"exec", newExec(t, agent.ExecConfig{Command: []string{testAgent(t), "bad_utf8"}}), `{}`, 1, false},
		{"exec stderr", newExec(t, agent.ExecConfig{Command: []string{testAgent(t), "bad_utf8", "exit=true"}}), `{}`, 1, true},
		{"http json", httpRunner("/json"), `{}`, 0, false},
		{"http stream", httpRunner("/stream"), `{}`, 1, false},
		{"http error", httpRunner("/error"), `{}`, 0, true},
		{"go", goFunc, `{}`, 1, false},
		{"go error", goFunc, `"fail"`, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c collect
			r := req("utf8-"+tc.name, tc.params)
			r.Emit = c.emit
			data, err := tc.run.Run(context.Background(), r)
			require.True(t, utf8.Valid(data), "result %q", data)
			if tc.fail {
				require.Error(t, err)
				require.True(t, utf8.ValidString(err.Error()), "error %q", err.Error())
				var f *resilience.Failure
				require.ErrorAs(t, err, &f, "the chain is kept")
				require.True(t, utf8.ValidString(f.Text), "failure text %q", f.Text)
				require.Contains(t, err.Error(), "bad \uFFFD")
			} else {
				require.NoError(t, err)
				require.Contains(t, string(data), "a\uFFFDb")
			}
			require.Len(t, c.data, tc.events)
			for _, d := range c.data {
				require.True(t, utf8.ValidString(d), "event %q", d)
				require.True(t, json.Valid([]byte(d)), "event %q", d)
			}
		})
	}
}

// TestValidNeverWritesTheAgentsError: a Go agent may return one error
// value from many calls at once (a sentinel *resilience.Failure): making
// its text valid must not write to it (the race detector saw the worker's
// pipeline tests race on a shared Failure), and errors.As still finds a
// Failure with a valid Text, its Status kept.
func TestValidNeverWritesTheAgentsError(t *testing.T) {
	t.Parallel()
	shared := &resilience.Failure{Status: 503, Text: "bad \xff\xfe", Err: errors.New("cause \xfe")}
	valid := &resilience.Failure{Status: 500, Text: "fine"}
	for _, sentinel := range []*resilience.Failure{shared, valid} {
		r := agent.Valid(agent.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
			return nil, fmt.Errorf("call: %w", sentinel)
		}))
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := r.Run(context.Background(), agent.Request{TaskID: "t"})
				var f *resilience.Failure
				require.True(t, errors.As(err, &f))
				require.Equal(t, sentinel.Status, f.Status)
				require.True(t, utf8.ValidString(f.Text), f.Text)
				require.True(t, utf8.ValidString(err.Error()), err.Error())
				if f.Err != nil {
					require.True(t, utf8.ValidString(f.Err.Error()))
				}
			}()
		}
		wg.Wait()
	}
	require.Equal(t, "bad \xff\xfe", shared.Text, "the agent's own error is left as it is")
}
