package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/agent"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestHTTPTraceparent: an HTTP agent call carries the attempt's W3C
// context as the traceparent and tracestate headers and in the
// ActionRequest body; an untraced call has neither.
func TestHTTPTraceparent(t *testing.T) {
	t.Parallel()
	srv, s := server(t, reply(200, nil, `{}`))
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)

	r := req("t1", `{}`)
	r.Traceparent, r.Tracestate = testTraceparent, "congo=t61rcWkgMzE"
	_, err = h.Run(context.Background(), r)
	require.NoError(t, err)
	_, header, body := s.get()
	require.Equal(t, testTraceparent, header.Get("traceparent"))
	require.Equal(t, "congo=t61rcWkgMzE", header.Get("tracestate"))
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, testTraceparent, got["traceparent"])

	_, err = h.Run(context.Background(), req("t2", `{}`))
	require.NoError(t, err)
	_, header, body = s.get()
	require.Empty(t, header.Values("traceparent"))
	require.Empty(t, header.Values("tracestate"))
	got = nil
	require.NoError(t, json.Unmarshal(body, &got))
	require.NotContains(t, got, "traceparent")
}

// TestHTTPTraceparentParamsBody: with body: params the context is only in
// the headers.
func TestHTTPTraceparentParamsBody(t *testing.T) {
	t.Parallel()
	srv, s := server(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	h, err := agent.NewHTTP(agent.HTTPConfig{URL: srv.URL, Body: agent.BodyParams})
	require.NoError(t, err)
	r := req("t1", `{"q":1}`)
	r.Traceparent = testTraceparent
	_, err = h.Run(context.Background(), r)
	require.NoError(t, err)
	_, header, body := s.get()
	require.Equal(t, testTraceparent, header.Get("traceparent"))
	require.JSONEq(t, `{"q":1}`, string(body))
}

// TestExecTraceparent: an exec agent reads the context as the
// ActionRequest's traceparent and tracestate fields.
func TestExecTraceparent(t *testing.T) {
	t.Parallel()
	e := newExec(t, agent.ExecConfig{})
	r := req("t1", `{"mode":"request"}`)
	r.Traceparent, r.Tracestate = testTraceparent, "k=v"
	data, err := e.Run(context.Background(), r)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	require.Equal(t, testTraceparent, got["traceparent"])
	require.Equal(t, "k=v", got["tracestate"])
	require.Equal(t, "t1", got["task_id"])
}
