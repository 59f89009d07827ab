package main

import (
	"fmt"
	"math"
	"strings"
)

// figure is one row of the summary table: one measured figure of one
// scenario, the median over the rounds that passed their checks.
type figure struct {
	scenario string
	label    string // with %s for the scenario's task count where it has one
	unit     string // "/s", " µs", " ms"
	higher   bool   // higher is better (throughputs)
	value    func(Result) float64
}

var figures = []figure{
	{"noop", "no-op drain, %s prefilled, c=50", "/s", true, func(r Result) float64 { return r.Throughput }},
	{"noop", "server CPU per no-op task (Redis; River: Postgres)", " µs", false, func(r Result) float64 { return r.ServerCPU }},
	{"noop", "worker CPU per no-op task", " µs", false, func(r Result) float64 { return r.WorkerCPU }},
	{"io", "I/O-bound agent: 50 ms HTTP, %s prefilled, c=200", "/s", true, func(r Result) float64 { return r.Throughput }},
	{"io", "worker CPU per I/O-bound task", " µs", false, func(r Result) float64 { return r.WorkerCPU }},
	{"stream", "steady 500/s: enqueue → start p50", " ms", false, func(r Result) float64 { return r.StartP50 }},
	{"stream", "steady 500/s: enqueue → start p99", " ms", false, func(r Result) float64 { return r.StartP99 }},
	{"enqueue", "single enqueues: %s from 16 callers", "/s", true, func(r Result) float64 { return r.Throughput }},
	{"retry", "retries: %s tasks × fail, fail, ok, c=50", "/s", true, func(r Result) float64 { return r.Throughput }},
	{"durable", "durable run: %s tasks × 5 steps, c=50", "/s", true, func(r Result) float64 { return r.Throughput }},
}

// column is one system of the summary: its variants (the better one is
// shown) and the mark that says a variant other than the first was better.
type column struct {
	name     string
	variants []string
	mark     string // after a figure of variants[1]
}

var columns = []column{
	{"agentq", []string{"agentq"}, ""},
	{"asynq", []string{"asynq", "asynq-def"}, " ᵈ"},
	{"BullMQ", []string{"bullmq"}, ""},
	{"River", []string{"river", "river-tuned"}, " ᵗ"},
}

// cell is one system's figure in one row.
type cell struct {
	v    float64 // NaN: none
	text string
}

const summaryNotes = `Medians over the rounds that passed their checks; **bold**: the best in the row. asynq: the better of plain asynq at the intervals agentq's own bench gives it (poll 10 ms, forwarder 50 ms) and, in the stream and retries only, at its defaults (poll 1 s, forwarder 5 s): ᵈ marks the defaults. River: the better of River's defaults (fetch cooldown 100 ms, poll 1 s) and River tuned (fetch cooldown 10 ms, poll 50 ms): ᵗ marks tuned. ˢ BullMQ's durable run is its "process step jobs" pattern: steps via job.updateData, not memoised results. "no steps": asynq and River have no steps; the durable run is not run for them.
`

// renderSummary is the table: one row per measured figure, a
// column per system, and how agentq stands against the best peer.
func renderSummary(results []Result, scs []scen) string {
	var b strings.Builder
	b.WriteString("## Summary\n\n| figure | agentq | asynq | BullMQ | River | agentq is |\n|---|---|---|---|---|---|\n")
	n := map[string]int{}
	for _, sc := range scs {
		n[sc.name] = sc.n
	}
	for _, f := range figures {
		count, ran := n[f.scenario]
		if !ran {
			continue
		}
		label := f.label
		if strings.Contains(label, "%s") {
			label = fmt.Sprintf(label, num(float64(count)))
		}
		cells := make([]cell, len(columns))
		for i, c := range columns {
			cells[i] = summaryCell(results, f, c)
		}
		boldBest(cells, f.higher)
		texts := make([]string, len(cells))
		for i, c := range cells {
			texts[i] = c.text
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", label, strings.Join(texts, " | "), agentqStands(cells, f))
	}
	b.WriteString("\n" + summaryNotes)
	return b.String()
}

// summaryCell is a column's figure: the better of its variants' medians.
func summaryCell(results []Result, f figure, c column) cell {
	if f.scenario == "durable" && !hasSteps(c.variants[0]) {
		return cell{v: math.NaN(), text: "no steps"}
	}
	best, mark, seen := math.NaN(), "", false
	for i, sys := range c.variants {
		var vs []float64
		for _, r := range results {
			if r.Scenario == f.scenario && r.System == sys {
				seen = true
				if r.OK {
					vs = append(vs, f.value(r))
				}
			}
		}
		if len(vs) == 0 {
			continue
		}
		if v := median(vs); math.IsNaN(best) || better(v, best, f.higher) {
			best, mark = v, ""
			if i > 0 {
				mark = c.mark
			}
		}
	}
	switch {
	case !math.IsNaN(best):
		if f.scenario == "durable" && c.name == "BullMQ" {
			mark += " ˢ"
		}
		return cell{v: best, text: figureText(best, f.unit) + mark}
	case seen:
		return cell{v: math.NaN(), text: "failed"}
	}
	return cell{v: math.NaN(), text: "—"}
}

func better(a, b float64, higher bool) bool {
	if higher {
		return a > b
	}
	return a < b
}

func figureText(v float64, unit string) string {
	switch unit {
	case "/s", " µs":
		return num(v) + unit
	}
	return ms(v) + unit
}

// boldBest marks the row's best figure (every cell that equals it).
func boldBest(cells []cell, higher bool) {
	best := math.NaN()
	for _, c := range cells {
		if !math.IsNaN(c.v) && (math.IsNaN(best) || better(c.v, best, higher)) {
			best = c.v
		}
	}
	for i, c := range cells {
		if !math.IsNaN(c.v) && c.v == best {
			cells[i].text = "**" + c.text + "**"
		}
	}
}

// agentqStands is the last column: agentq's figure over the best peer's,
// for a throughput "N× the fastest peer (X)", for a cost or a latency
// (lower is better) "N× X's".
func agentqStands(cells []cell, f figure) string {
	a := cells[0].v
	best, who := math.NaN(), ""
	for i, c := range cells[1:] {
		if !math.IsNaN(c.v) && (math.IsNaN(best) || better(c.v, best, f.higher)) {
			best, who = c.v, columns[i+1].name
		}
	}
	switch {
	case math.IsNaN(a):
		return "n/a (agentq failed)"
	case math.IsNaN(best):
		return "no peer measured"
	case f.higher:
		return fmt.Sprintf("%.2f× the fastest peer (%s)", a/best, who)
	}
	return fmt.Sprintf("%.2f× %s's (lower is better)", a/best, who)
}
