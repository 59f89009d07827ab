package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
)

// openAIReply is a no-op agent's answer shaped as an OpenAI chat
// completion that reports its usage and model.
var openAIReply = json.RawMessage(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":20}}}`)

// unusedReply is openAIReply with its usage object renamed: the same
// bytes of result, no usage reported.
var unusedReply = json.RawMessage(strings.Replace(string(openAIReply), `"usage":`, `"extra":`, 1))

// BenchmarkUsage measures what usage accounting costs: the whole pipeline
// (as BenchmarkThroughput's "agentq", c=50) where the agent's replies
// report usage (read, priced, on the attempt's event, summed on the task,
// counted in the fleet's totals) against the same agent answering the
// same reply with its usage object renamed (the same result kept on the
// task, no usage), in the same run, rounds interleaved. The goal: ≤ 5%
// more Redis CPU per task, and nothing for agents that report no usage.
// A third side answers nothing (no result kept): the usage side against
// it is what earlier runs measured, result storage included.
func BenchmarkUsage(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	n, rounds := envInt("AGENTQ_BENCH_TASKS", 5000), envInt("AGENTQ_BENCH_ROUNDS", 5)
	const c = 50
	// stats are each side's INFO commandstats per task, averaged over its
	// rounds (enqueue, start-up and shutdown included): what differs.
	stats := map[string]map[string][2]float64{}
	mk := func(name string, reply json.RawMessage) side {
		return side{name, func(ctx context.Context) (float64, error) {
			noopReply = reply
			defer func() { noopReply = nil }()
			sr := newClient(srv)
			defer sr.Close()
			if err := sr.ConfigResetStat(ctx).Err(); err != nil {
				return 0, err
			}
			rate, err := runAgentqFill(ctx, srv, c, n, func(ctx context.Context, rdb redis.UniversalClient) error {
				return prefill(ctx, rdb, n)
			})
			if err == nil {
				err = addCommandStats(ctx, sr, stats, name, n)
			}
			if err == nil {
				// The usage was accounted, or not: the fleet's totals hold
				// this hour's only when the replies reported usage.
				rdb := newClient(srv)
				defer rdb.Close()
				keys, kerr := rdb.Keys(ctx, "agentq:{usage}:h:*").Result()
				if want := string(reply) == string(openAIReply); kerr != nil || (len(keys) > 0) != want {
					return 0, fmt.Errorf("usage totals %v after a round whose replies reported usage: %v (%v)", keys, want, kerr)
				}
			}
			return rate, err
		}}
	}
	none, used, bare := mk("no-usage", unusedReply), mk("usage", openAIReply), mk("no-reply", nil)
	sides, warm := []side{none, used, bare}, []side{mk("warm", openAIReply)}
	if only := os.Getenv("AGENTQ_BENCH_USAGE_SIDE"); only != "" {
		// One side, no warm-up: for a count of what redis-server did in
		// the whole run (scripts/usage-instructions.sh).
		sides = slices.DeleteFunc(sides, func(s side) bool { return s.name != only })
		if len(sides) == 0 {
			b.Fatalf("AGENTQ_BENCH_USAGE_SIDE=%s: no-usage, usage or no-reply", only)
		}
		res := interleave(b, srv, rounds, nil, sides)
		report("%s only: %.0f tasks/s, Redis CPU per task %.1fµs", only, median(res[only]), median(res[only+redisSuffix]))
		return
	}
	res := interleave(b, srv, rounds, warm, sides)
	m0, c0 := median(res[none.name]), median(res[none.name+redisSuffix])
	m1, c1 := median(res[used.name]), median(res[used.name+redisSuffix])
	m2, c2 := median(res[bare.name]), median(res[bare.name+redisSuffix])
	report("c=%d replies with usage %.0f tasks/s  without %.0f tasks/s  ratio %.2f", c, m1, m0, m1/m0)
	report("c=%d Redis CPU per task with usage %.1fµs  without %.1fµs  ratio %.2f (+%.1fµs)", c, c1, c0, c1/c0, c1-c0)
	detail("no reply at all (no result kept): %.0f tasks/s, Redis CPU per task %.1fµs; with usage against it: ratio %.2f (+%.1fµs)",
		m2, c2, c1/c2, c1-c2)
	for _, l := range diffCommandStats(stats, none.name, used.name) {
		detail("%s", l)
	}
	detail("rounds usage: %s | no usage: %s | no reply: %s", fmtRates(res[used.name]), fmtRates(res[none.name]), fmtRates(res[bare.name]))
	detail("Redis µs per task, usage: %s | no usage: %s | no reply: %s", fmtFloats(res[used.name+redisSuffix], 1),
		fmtFloats(res[none.name+redisSuffix], 1), fmtFloats(res[bare.name+redisSuffix], 1))
}

// addCommandStats adds rdb's INFO commandstats, per task of a round of n,
// to stats[side]: per command, calls and µs ("" counts the rounds).
func addCommandStats(ctx context.Context, rdb redis.UniversalClient, stats map[string]map[string][2]float64, side string, n int) error {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return err
	}
	if stats[side] == nil {
		stats[side] = map[string][2]float64{}
	}
	for _, l := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls = f
			case "usec":
				usec = f
			}
		}
		s := stats[side][name]
		stats[side][name] = [2]float64{s[0] + calls/float64(n), s[1] + usec/float64(n)}
	}
	stats[side][""] = [2]float64{stats[side][""][0] + 1}
	return nil
}

// diffCommandStats lists, averaged over the rounds, the commands whose
// calls per task differ between sides a and b, and the µs per task of
// those that take at least half a µs.
func diffCommandStats(stats map[string]map[string][2]float64, a, b string) []string {
	names := map[string]bool{}
	for _, side := range []string{a, b} {
		for k := range stats[side] {
			names[k] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(names))
	var calls, usec []string
	var ta, tb float64
	ra, rb := max(stats[a][""][0], 1), max(stats[b][""][0], 1)
	for _, k := range sorted {
		if k == "" {
			continue
		}
		x, y := stats[a][k], stats[b][k]
		x, y = [2]float64{x[0] / ra, x[1] / ra}, [2]float64{y[0] / rb, y[1] / rb}
		ta, tb = ta+x[1], tb+y[1]
		if math.Abs(x[0]-y[0]) > 0.001 {
			calls = append(calls, fmt.Sprintf("%s %.3f→%.3f", k, x[0], y[0]))
		}
		if x[1] > 0.5 || y[1] > 0.5 {
			usec = append(usec, fmt.Sprintf("%s %.1f→%.1f", k, x[1], y[1]))
		}
	}
	return []string{
		fmt.Sprintf("commandstats %s→%s, calls per task that differ: %s", a, b, strings.Join(calls, ", ")),
		fmt.Sprintf("commandstats %s→%s, µs per task (all commands %.1f→%.1f): %s", a, b, ta, tb, strings.Join(usec, ", ")),
	}
}
