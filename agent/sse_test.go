package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/resilience"
)

// sseServer serves frames (each written and flushed as it is) as a
// text/event-stream; when gate is not nil it waits for it to close after
// the first frame.
func sseServer(t *testing.T, frames []string, gate <-chan struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		for i, f := range frames {
			_, _ = w.Write([]byte(f))
			w.(http.Flusher).Flush()
			if i == 0 && gate != nil {
				select {
				case <-gate:
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func dataFrames(chunks ...string) []string {
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = "data: " + c + "\n\n"
	}
	return out
}

const openAIChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`

var openAIStream = dataFrames(
	fmt.Sprintf(openAIChunk, `{"role":"assistant","content":""}`, `null`),
	fmt.Sprintf(openAIChunk, `{"content":"Let me "}`, `null`),
	fmt.Sprintf(openAIChunk, `{"content":"check."}`, `null`),
	fmt.Sprintf(openAIChunk, `{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]}`, `null`),
	fmt.Sprintf(openAIChunk, `{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, `null`),
	fmt.Sprintf(openAIChunk, `{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, `null`),
	fmt.Sprintf(openAIChunk, `{"tool_calls":[{"index":1,"id":"call_def","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`, `null`),
	fmt.Sprintf(openAIChunk, `{}`, `"tool_calls"`),
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
	`[DONE]`,
)

const openAIResult = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1",
 "choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.","tool_calls":[
   {"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
   {"id":"call_def","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
  "finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`

func anthropicFrame(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

var anthropicStream = []string{
	anthropicFrame("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`),
	anthropicFrame("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	anthropicFrame("ping", `{"type": "ping"}`),
	anthropicFrame("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
	anthropicFrame("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}`),
	anthropicFrame("content_block_stop", `{"type":"content_block_stop","index":0}`),
	anthropicFrame("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`),
	anthropicFrame("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`),
	anthropicFrame("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}`),
	anthropicFrame("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\"}"}}`),
	anthropicFrame("content_block_stop", `{"type":"content_block_stop","index":1}`),
	anthropicFrame("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}`),
	anthropicFrame("message_stop", `{"type":"message_stop"}`),
}

const anthropicResult = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
 "content":[{"type":"text","text":"Hello!"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],
 "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":15}}`

func newHTTP(t *testing.T, url string) *agent.HTTP {
	t.Helper()
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: url})
	require.NoError(t, err)
	return h
}

// frameData is the data an event of frame f is relayed with.
func frameData(t *testing.T, f string) string {
	t.Helper()
	var data []string
	for _, l := range strings.Split(f, "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			data = append(data, d)
		}
	}
	d := strings.Join(data, "\n")
	if json.Valid([]byte(d)) {
		var buf bytes.Buffer
		require.NoError(t, json.Compact(&buf, []byte(d)))
		return buf.String()
	}
	b, _ := json.Marshal(d)
	return string(b)
}

// TestHTTPStreamAssembled: an OpenAI chat-completions stream (a tool
// call split over chunks, a second one, usage in the last chunk) and an
// Anthropic messages stream are relayed event by event, live (the
// server holds the rest of the stream until the test has seen the first
// event), and the call's result is the non-streaming message.
func TestHTTPStreamAssembled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		frames []string
		want   string
	}{
		{"openai", openAIStream, openAIResult},
		{"anthropic", anthropicStream, anthropicResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate := make(chan struct{})
			srv := sseServer(t, tc.frames, gate)
			got := newEvents()
			r := req("t-"+tc.name, `{"stream":true}`)
			r.Emit = got.emit
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			type result struct {
				data json.RawMessage
				err  error
			}
			done := make(chan result, 1)
			go func() {
				data, err := newHTTP(t, srv.URL).Run(ctx, r)
				done <- result{data, err}
			}()
			select {
			case <-got.first:
			case res := <-done:
				t.Fatalf("the call ended (%s, %v) before its first event was relayed", res.data, res.err)
			}
			close(gate)
			res := <-done
			require.NoError(t, res.err)
			require.JSONEq(t, tc.want, string(res.data))
			var want []string
			for _, f := range tc.frames {
				want = append(want, "output "+frameData(t, f))
			}
			require.Equal(t, want, got.list())
		})
	}
}

// TestHTTPStreamOther: a stream that is neither OpenAI's nor
// Anthropic's is relayed, and its result is the list of its events'
// data (JSON, or strings); comments and other fields are ignored, a
// multi-line data is joined; without Emit the result is the same.
func TestHTTPStreamOther(t *testing.T) {
	t.Parallel()
	frames := []string{
		": keep-alive\n\n",
		"event: tick\ndata: {\"n\": 1}\nid: 1\n\n",
		"data: plain\ndata: text\r\n\r\n",
		"data: 2\n\n",
	}
	srv := sseServer(t, frames, nil)
	got := newEvents()
	r := req("t-other", `{}`)
	r.Emit = got.emit
	data, err := newHTTP(t, srv.URL).Run(context.Background(), r)
	require.NoError(t, err)
	require.JSONEq(t, `[{"n":1},"plain\ntext",2]`, string(data))
	require.Equal(t, []string{`output {"n":1}`, `output "plain\ntext"`, `output 2`}, got.list())

	data, err = newHTTP(t, srv.URL).Run(context.Background(), req("t-other2", `{}`))
	require.NoError(t, err)
	require.JSONEq(t, `[{"n":1},"plain\ntext",2]`, string(data))
}

// TestHTTPStreamFailures: an error event inside a stream, and a stream
// cut before its end marker, are classified like other failures.
func TestHTTPStreamFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		frames []string
		status int
		class  resilience.Class
	}{
		{"anthropic overloaded", append(append([]string{}, anthropicStream[:4]...),
			anthropicFrame("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)), 529, resilience.RateLimited},
		{"openai error chunk", append(append([]string{}, openAIStream[:2]...),
			dataFrames(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":null}}`)...), 500, resilience.ProviderError},
		{"openai context length", dataFrames(`{"error":{"message":"This model's maximum context length is 4097 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`), 400, resilience.ContextLength},
		{"openai cut", openAIStream[:5], 0, resilience.NetworkTransient},
		{"anthropic cut", anthropicStream[:6], 0, resilience.NetworkTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := sseServer(t, tc.frames, nil)
			got := newEvents()
			r := req("t-fail", `{}`)
			r.Emit = got.emit
			_, err := newHTTP(t, srv.URL).Run(context.Background(), r)
			f := requireFailure(t, err)
			require.Equal(t, tc.status, f.Status)
			require.Equal(t, tc.class, resilience.Classify(err).Class, "%v", err)
			require.Len(t, got.list(), len(tc.frames), "every event relayed, the error's too")
		})
	}
}

// TestHTTPStreamTooLarge: a stream over MaxResponse is logic_error.
func TestHTTPStreamTooLarge(t *testing.T) {
	t.Parallel()
	srv := sseServer(t, dataFrames(strings.Repeat(`"xxxxxxxx",`, 200)+`"x"`, "[1]", "[2]"), nil)
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL, MaxResponse: 1024})
	require.NoError(t, err)
	_, err = h.Run(context.Background(), req("t-big", `{}`))
	require.Equal(t, resilience.LogicError, requireFailure(t, err).Class)
}
