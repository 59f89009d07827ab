package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
)

// openAIReply is a no-op agent's answer shaped as an OpenAI chat
// completion that reports its usage and model.
var openAIReply = json.RawMessage(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":20}}}`)

// BenchmarkUsage measures what usage accounting costs: the whole pipeline
// (as BenchmarkThroughput's "agentq", c=50) where the agent's replies
// report usage (read, priced, on the attempt's event, summed on the task,
// counted in the fleet's totals) against the same agent answering
// nothing, in the same run, rounds interleaved. The goal: ≤ 5% more Redis
// CPU per task, and nothing for agents that report no usage.
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
			if err == nil && reply != nil {
				// The usage was accounted: the fleet's totals hold this hour's.
				rdb := newClient(srv)
				defer rdb.Close()
				if keys, kerr := rdb.Keys(ctx, "agentq:{usage}:h:*").Result(); kerr != nil || len(keys) == 0 {
					return 0, fmt.Errorf("no usage totals after a round whose replies reported usage (%v)", kerr)
				}
			}
			return rate, err
		}}
	}
	none, used := mk("no-usage", nil), mk("usage", openAIReply)
	res := interleave(b, srv, rounds, []side{mk("warm", openAIReply)}, []side{none, used})
	m0, c0 := median(res[none.name]), median(res[none.name+redisSuffix])
	m1, c1 := median(res[used.name]), median(res[used.name+redisSuffix])
	report("c=%d replies with usage %.0f tasks/s  without %.0f tasks/s  ratio %.2f", c, m1, m0, m1/m0)
	report("c=%d Redis CPU per task with usage %.1fµs  without %.1fµs  ratio %.2f (+%.1fµs)", c, c1, c0, c1/c0, c1-c0)
	detail("rounds usage: %s | no usage: %s", fmtRates(res[used.name]), fmtRates(res[none.name]))
}
