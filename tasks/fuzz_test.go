package tasks

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// FuzzDecode: the decoder never panics; it either returns a valid envelope
// that survives an encode/decode round trip, or an ErrInvalidEnvelope.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","agent":"tool","params":{"x":1}}`,
		`{"id":"a","agent":"tool","restarts":1,"run":2,"queue":"q"}`,
		`{"id":"a","agent":"tool","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"k=v"}`,
		`{"id":"","agent":""}`, `[]`, `null`, `"str"`, `{"id":"a","agent":"t","params":"\xff"}`,
		`{"id":"a","agent":"t","params":[[[[[[[[[[[]]]]]]]]]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidEnvelope) {
				t.Fatalf("error not wrapping ErrInvalidEnvelope: %v", err)
			}
			return
		}
		enc, err := Encode(env)
		if err != nil {
			t.Fatalf("decoded envelope does not encode: %v", err)
		}
		if _, err := Decode(enc); err != nil {
			t.Fatalf("round trip failed: %v", err)
		}
	})
}

// FuzzDecodeFast: Decode's fast path takes only payloads encoding/json
// decodes, and decodes them to the same envelope.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"0e4f784b5bd72d15d21f5c46","agent":"noop","params":{"n":1},"queue":"default","restarts":0,"run":0,"enqueued_at":"2026-11-23T19:27:13.701717467Z"}`,
		`{"id":"a","agent":"tool","action":"x","correlation_id":"c","restarts":2,"run":3}`,
		`{"id":"a","agent":"t","queue":"q","restarts":0,"run":1,"enqueued_at":"2026-11-23T19:27:13Z","not_before_ms":1795465955500}`,
		`{"id":"a","agent":"t","run":0,"deadline_ms":1795465955500}`, `{"id":"a","agent":"t","deadline_ms":1.5}`, `{"id":"a","agent":"t","deadline_ms":null}`,
		` { "id" : "a" , "agent":"t", "params" : [1, "}", {"a":[]}] } `,
		`{"id":"a","agent":"t","params":"s\"}"}`, `{"id":"a","agent":"t","params":null}`,
		`{"id":"a","ID":"b","agent":"t"}`, `{"id":"a\u0041","agent":"t"}`, `{"id":"é","agent":"t"}`,
		`{"id":"a","agent":"t","run":1.0}`, `{"id":"a","agent":"t","run":01}`, `{"id":"a","agent":"t","run":-0}`,
		`{"id":"a","agent":"t","enqueued_at":"nope"}`, `{"id":"a","agent":"t"}x`, `{}`, `{"id":"a","id":"b","agent":"t"}`,
		`{"id":"a","agent":"t","params":{"a":1}}`,
		`{"id":"a","agent":"t","run":0,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}`,
		`{"id":"a","agent":"t","tenant":"team-a","priority":"high"}`, `{"id":"a","agent":"t","tenant":"é","priority":"normal"}`,
		`{"id":"a","agent":"t","tenant":null}`, `{"id":"a","agent":"t","Tenant":"x"}`,
		`{"id":"a","agent":"t","traceparent":null}`, `{"id":"a","agent":"t","tracestate":"a\u003db"}`, `{"id":"a","agent":"t","Traceparent":"x"}`, `{"id":"a","agent":"t","params":{]}`, `{"id":"a","agent":"t","params":tru}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast Envelope
		if !decodeFast(b, &fast) {
			return
		}
		var slow Envelope
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("fast path took %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast path decoded %q as %+v, encoding/json as %+v", b, fast, slow)
		}
	})
}

// FuzzEnvelopeMarshal: Envelope.marshal writes the bytes json.Marshal
// writes, for every valid envelope.
func FuzzEnvelopeMarshal(f *testing.F) {
	f.Add("0e4f784b5bd72d15d21f5c46", "noop", "", []byte(`{"n":1}`), "", "default", 0, 0, int64(1700000000123456789), true, int64(0), "", "", int64(0), "", "")
	f.Add("a", "tool", "go", []byte(` { "a" : [1, "x y", {"b":null}] } `), "corr", "q", 2, 3, int64(0), true, int64(1795465955500), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v", int64(1795465985500), "team-a", "high")
	f.Add("a<b", "t", "x&y", []byte(`"<\u2028>"`), "é", "", 0, 0, int64(-62167219200000000), false, int64(0), "", "", int64(-1), "é<&>", "low")
	f.Add("a", "t", "", []byte("\"\xe2\x80\xa8\""), "", "", 0, 0, int64(1), true, int64(0), "", "", int64(0), "", "normal")
	f.Add("a", "t", "", []byte(`null`), "", "", 0, 0, int64(1), true, int64(0), "", "", int64(0), "x\"y", "")
	f.Fuzz(func(t *testing.T, id, agent, action string, params []byte, corr, queue string, restarts, run int,
		at int64, utc bool, notBefore int64, tp, ts string, deadline int64, tenant, priority string) {
		e := &Envelope{ID: id, Agent: agent, Action: action, Params: params, CorrelationID: corr, Queue: queue,
			Restarts: restarts, Run: run, EnqueuedAt: time.Unix(0, at), NotBefore: notBefore, Traceparent: tp, Tracestate: ts,
			Deadline: deadline, Tenant: tenant, Priority: priority}
		if utc {
			e.EnqueuedAt = e.EnqueuedAt.UTC()
		}
		if e.Validate() != nil {
			return
		}
		want, werr := json.Marshal(e)
		got, gerr := e.marshal()
		if (werr == nil) != (gerr == nil) || string(got) != string(want) {
			t.Fatalf("marshal wrote %s (%v), json.Marshal %s (%v)", got, gerr, want, werr)
		}
	})
}
