package agent

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMarshalRequestIsJSONMarshal: the request an agent gets is
// json.Marshal's, byte for byte (and its error), on plain requests and
// on those that take json.Marshal's own path.
func TestMarshalRequestIsJSONMarshal(t *testing.T) {
	t.Parallel()
	base := Request{TaskID: "t-1", Agent: "a", Action: "run", Params: json.RawMessage(`{"x":1}`),
		CorrelationID: "c", Attempt: 2, Restart: 1}
	with := func(f func(*Request)) Request { r := base; f(&r); return r }
	cases := map[string]Request{
		"plain":            base,
		"zero":             {},
		"nil params":       with(func(r *Request) { r.Params = nil }),
		"spaced params":    with(func(r *Request) { r.Params = json.RawMessage(" {\n \"a\" : [1, 2] }\t") }),
		"html params":      with(func(r *Request) { r.Params = json.RawMessage(`{"h":"<b>&"}`) }),
		"u2028 params":     with(func(r *Request) { r.Params = json.RawMessage("\"a\u2028b\u2029\"") }),
		"invalid params":   with(func(r *Request) { r.Params = json.RawMessage(`{"x":`) }),
		"empty params":     with(func(r *Request) { r.Params = json.RawMessage{} }),
		"escaped strings":  with(func(r *Request) { r.TaskID, r.Action = "a\"b\\c\n", "<&>" }),
		"unicode":          with(func(r *Request) { r.CorrelationID = "é\u2028\xff" }),
		"trace":            with(func(r *Request) { r.Traceparent, r.Tracestate = "00-abc-def-01", "k=v" }),
		"trace state only": with(func(r *Request) { r.Tracestate = "k=\"v\"" }),
		"negative":         with(func(r *Request) { r.Attempt, r.Restart = -1, 1<<40 }),
		"emit is not sent": with(func(r *Request) { r.Emit = func(string, json.RawMessage) {} }),
		"steps": with(func(r *Request) {
			r.Steps = map[string]json.RawMessage{"b": json.RawMessage(`2`), "a": json.RawMessage(`{"x":1}`)}
		}),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, wantErr := json.Marshal(req)
			got, err := marshalRequest(req)
			if wantErr != nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

// TestMarshalRequestKnowsEveryField: a Request with every JSON field set
// to a plain value is encoded as json.Marshal encodes it, so a field added
// to Request without teaching marshalRequest fails here instead of being
// dropped from every agent's ActionRequest.
func TestMarshalRequestKnowsEveryField(t *testing.T) {
	t.Parallel()
	var req Request
	v := reflect.ValueOf(&req).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case v.Type().Field(i).Tag.Get("json") == "-":
		case f.Type() == reflect.TypeOf(json.RawMessage(nil)):
			f.SetBytes([]byte(`{"k":1}`))
		case f.Kind() == reflect.String:
			f.SetString("v" + strconv.Itoa(i))
		case f.Kind() == reflect.Int:
			f.SetInt(int64(i + 1))
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			f.Set(reflect.New(f.Type().Elem()))
		case f.Kind() == reflect.Map && f.Type().Key().Kind() == reflect.String &&
			f.Type().Elem() == reflect.TypeOf(json.RawMessage(nil)):
			m := reflect.MakeMap(f.Type())
			m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf(json.RawMessage(`{"k":1}`)))
			f.Set(m)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		default:
			t.Fatalf("Request.%s (%s): teach this test and marshalRequest the field", v.Type().Field(i).Name, f.Type())
		}
	}
	want, err := json.Marshal(req)
	require.NoError(t, err)
	got, err := marshalRequest(req)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
