package main

import (
	"strings"
	"testing"
)

// TestRenderSummary: one row per figure, the better variant shown and
// marked, the best bolded, agentq's standing against the best peer, and
// "no steps" for the systems without steps.
func TestRenderSummary(t *testing.T) {
	res := []Result{
		{Scenario: "noop", System: "agentq", OK: true, Throughput: 5000, ServerCPU: 100, WorkerCPU: 200},
		{Scenario: "noop", System: "asynq", OK: true, Throughput: 8000, ServerCPU: 70, WorkerCPU: 120},
		{Scenario: "noop", System: "bullmq", OK: true, Throughput: 10000, ServerCPU: 50, WorkerCPU: 100},
		{Scenario: "noop", System: "river", OK: true, Throughput: 3000, ServerCPU: 300, WorkerCPU: 60},
		{Scenario: "noop", System: "river-tuned", OK: true, Throughput: 4000, ServerCPU: 250, WorkerCPU: 70},
		{Scenario: "noop", System: "river-tuned", OK: false, Throughput: 9e9},
		{Scenario: "durable", System: "agentq", OK: true, Throughput: 1500},
		{Scenario: "durable", System: "bullmq", OK: true, Throughput: 1000},
	}
	got := renderSummary(res, []scen{{name: "noop", n: 20000}, {name: "durable", n: 2000}})
	for _, want := range []string{
		"| no-op drain, 20,000 prefilled, c=50 | 5,000/s | 8,000/s | **10,000/s** | 4,000/s ᵗ | 0.50× the fastest peer (BullMQ) |",
		"| server CPU per no-op task (Redis; River: Postgres) | 100 µs | 70 µs | **50 µs** | 250 µs ᵗ | 2.00× BullMQ's (lower is better) |",
		"| worker CPU per no-op task | 200 µs | 120 µs | 100 µs | **60 µs** | 3.33× River's (lower is better) |",
		"| durable run: 2,000 tasks × 5 steps, c=50 | **1,500/s** | no steps | 1,000/s ˢ | no steps | 1.50× the fastest peer (BullMQ) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "I/O-bound") {
		t.Errorf("a scenario not run has a row:\n%s", got)
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}
