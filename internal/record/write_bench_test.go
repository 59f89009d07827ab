package record

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/usage"
)

// BenchmarkWriteArgs is the Go side of a success's checked write: the
// Change, its event, and rec_apply's ARGV (the worker's every task).
func BenchmarkWriteArgs(b *testing.B) {
	s := NewStore(nil)
	d := Delivery{ID: "01JTESTTASKID0000000000000", Run: 0, Attempt: 1, Seed: Seed{Agent: "io", Queue: "default"}}
	a := Attempt{Attempt: 1, Agent: "io", Worker: "host-1234", Duration: 52 * time.Millisecond,
		Usage: usage.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 30}}
	result := json.RawMessage(`{"ok":true}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.write(Succeeded(a, result)).args(d, false)
	}
}
