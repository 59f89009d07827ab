package tasks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// BenchmarkDecode decodes the payload a worker gets for a plain task
// (Encode's output): every delivery starts here.
func BenchmarkDecode(b *testing.B) { benchDecode(b, json.RawMessage(`{"n":1}`)) }

// BenchmarkDecodeLargeParams is BenchmarkDecode with 64 KiB of params (a
// long prompt): the params are read by as few JSON passes as possible.
func BenchmarkDecodeLargeParams(b *testing.B) {
	params, err := json.Marshal(map[string]string{"prompt": strings.Repeat("lorem ipsum ", 64<<10/12)})
	if err != nil {
		b.Fatal(err)
	}
	benchDecode(b, params)
}

func benchDecode(b *testing.B, params json.RawMessage) {
	payload, err := Encode(&Envelope{ID: NewID(), Agent: "io", Params: params, Queue: DefaultQueue, EnqueuedAt: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(payload); err != nil {
			b.Fatal(err)
		}
	}
}
