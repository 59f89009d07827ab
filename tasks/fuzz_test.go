package tasks

import (
	"errors"
	"testing"
)

// FuzzDecode: the decoder never panics; it either returns a valid envelope
// that survives an encode/decode round trip, or an ErrInvalidEnvelope.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","agent":"tool","params":{"x":1}}`,
		`{"id":"a","agent":"tool","restarts":1,"run":2,"queue":"q"}`,
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
