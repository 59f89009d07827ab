package tasks

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
