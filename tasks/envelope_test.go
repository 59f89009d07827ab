package tasks

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		payload string
		field   string // expected ValidationError field; "" for a JSON error; "-" for success
	}{
		{"ok", `{"id":"a","agent":"tool","params":{"x":1}}`, "-"},
		{"ok no params", `{"id":"a","agent":"tool"}`, "-"},
		{"unknown fields ignored", `{"id":"a","agent":"tool","future":true}`, "-"},
		{"not json", `hello`, ""},
		{"truncated", `{"id":"a","agent":`, ""},
		{"trailing data", `{"id":"a","agent":"t"} {"id":"b"}`, ""},
		{"wrong type", `{"id":"a","agent":42}`, ""},
		{"missing id", `{"agent":"tool"}`, "id"},
		{"missing agent", `{"id":"a"}`, "agent"},
		{"id with brace", `{"id":"a{b}","agent":"t"}`, "id"},
		{"id too long", `{"id":"` + strings.Repeat("x", MaxIDLen+1) + `","agent":"t"}`, "id"},
		{"agent with space", `{"id":"a","agent":"a b"}`, "agent"},
		{"negative restarts", `{"id":"a","agent":"t","restarts":-1}`, "restarts"},
		{"negative run", `{"id":"a","agent":"t","run":-2}`, "run"},
		{"resumed run with its wait", `{"id":"a","agent":"t","run":1,"resumes":1,"wait":{"kind":"sleep"}}`, "-"},
		{"wait on a run not resumed", `{"id":"a","agent":"t","wait":{"kind":"sleep"}}`, "wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, err := Decode([]byte(tc.payload))
			if tc.field == "-" {
				require.NoError(t, err)
				require.Equal(t, DefaultQueue, env.Queue)
				return
			}
			require.ErrorIs(t, err, ErrInvalidEnvelope)
			var ve *ValidationError
			if tc.field == "" {
				require.False(t, errors.As(err, &ve), "a JSON error, not a field error: %v", err)
				return
			}
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.field, ve.Field)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	in := &Envelope{ID: "t1", Agent: "llm", Action: "chat", Params: json.RawMessage(`{"q":"hi"}`),
		CorrelationID: "c", Queue: "q", Restarts: 2, Run: 3}
	b, err := Encode(in)
	require.NoError(t, err)
	out, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, in, out)
	require.Equal(t, "t1#3", out.AsynqID())
	out.Run = 0
	require.Equal(t, "t1", out.AsynqID())
}

func TestEncodeRejectsInvalid(t *testing.T) {
	t.Parallel()
	_, err := Encode(&Envelope{ID: "a", Agent: "t", Params: json.RawMessage(`{nope`)})
	require.ErrorIs(t, err, ErrInvalidEnvelope)
}

// TestValidateID: producers refuse '#' in a caller ID (run N of task X is
// X#N), while Decode still accepts a payload queued before the rule.
func TestValidateID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id, reason string // reason: "" when valid
	}{
		{"job-1", ""},
		{"a.b:c/d_e", ""},
		{"X#1", "reserved"},
		{"#", "reserved"},
		{"X#", "reserved"},
		{"", "is empty"},
		{"a{b}", "not allowed"},
		{strings.Repeat("x", MaxIDLen+1), "longer"},
	} {
		err := ValidateID(tc.id)
		if tc.reason == "" {
			require.NoError(t, err, tc.id)
			continue
		}
		var ve *ValidationError
		require.ErrorAs(t, err, &ve, tc.id)
		require.Equal(t, "id", ve.Field)
		require.Contains(t, err.Error(), tc.reason)
		require.ErrorIs(t, err, ErrInvalidEnvelope)
	}
	require.Contains(t, ValidateID("X#1").Error(), `run N of task X has the ID X#N`)

	env, err := Decode([]byte(`{"id":"old#1","agent":"tool","run":2}`))
	require.NoError(t, err, "a payload queued before the rule still runs")
	require.Equal(t, "old#1#2", env.AsynqID())
}

func TestCheckQueue(t *testing.T) {
	t.Parallel()
	served := []string{"high", "default", "batch"}
	require.NoError(t, CheckQueue("high", served))
	require.NoError(t, CheckQueue("", served), "empty is the default queue")
	require.NoError(t, CheckQueue("", []string{DefaultQueue}))
	err := CheckQueue("nope", served)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "queue", ve.Field)
	require.Contains(t, err.Error(), `"nope"`)
	require.Contains(t, err.Error(), "served queues: batch, default, high")
	require.Error(t, CheckQueue("", []string{"high"}), "the default queue must be served too")
}

// TestDecodeFastTakesEncodedPayloads: what Encode writes (and what the
// producers enqueue) takes Decode's fast path.
func TestDecodeFastTakesEncodedPayloads(t *testing.T) {
	t.Parallel()
	for _, in := range []*Envelope{
		{ID: NewID(), Agent: "noop", Params: json.RawMessage(`{"n":1}`), Queue: DefaultQueue, EnqueuedAt: time.Now()},
		{ID: "t1", Agent: "llm", Action: "chat", Params: json.RawMessage(`{"q":"hi \"there\"","xs":[1,2.5,null,{}]}`),
			CorrelationID: "c", Queue: "q", Restarts: 2, Run: 3, EnqueuedAt: time.Now().UTC()},
		{ID: "t2", Agent: "tool"},
		{ID: "t3", Agent: "tool", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "congo=t61rcWkgMzE,rojo=1"},
	} {
		b, err := Encode(in)
		require.NoError(t, err)
		var fast Envelope
		require.True(t, decodeFast(b, &fast), "%s", b)
		var slow Envelope
		require.NoError(t, json.Unmarshal(b, &slow))
		require.Equal(t, slow, fast)
	}
}
