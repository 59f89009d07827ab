package bench

import (
	"context"
	"encoding/json"
	"fmt"
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
	mk := func(name string, reply json.RawMessage) side {
		return side{name, func(ctx context.Context) (float64, error) {
			noopReply = reply
			defer func() { noopReply = nil }()
			rate, err := runAgentqFill(ctx, srv, c, n, func(ctx context.Context, rdb redis.UniversalClient) error {
				return prefill(ctx, rdb, n)
			})
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
	res := interleave(b, srv, rounds, []side{mk("warm", openAIReply)}, []side{none, used, bare})
	m0, c0 := median(res[none.name]), median(res[none.name+redisSuffix])
	m1, c1 := median(res[used.name]), median(res[used.name+redisSuffix])
	m2, c2 := median(res[bare.name]), median(res[bare.name+redisSuffix])
	report("c=%d replies with usage %.0f tasks/s  without %.0f tasks/s  ratio %.2f", c, m1, m0, m1/m0)
	report("c=%d Redis CPU per task with usage %.1fµs  without %.1fµs  ratio %.2f (+%.1fµs)", c, c1, c0, c1/c0, c1-c0)
	detail("no reply at all (no result kept): %.0f tasks/s, Redis CPU per task %.1fµs; with usage against it: ratio %.2f (+%.1fµs)",
		m2, c2, c1/c2, c1-c2)
	detail("rounds usage: %s | no usage: %s | no reply: %s", fmtRates(res[used.name]), fmtRates(res[none.name]), fmtRates(res[bare.name]))
	detail("Redis µs per task, usage: %s | no usage: %s | no reply: %s", fmtFloats(res[used.name+redisSuffix], 1),
		fmtFloats(res[none.name+redisSuffix], 1), fmtFloats(res[bare.name+redisSuffix], 1))
}
