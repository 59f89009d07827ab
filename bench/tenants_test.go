package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/tasks"
)

// BenchmarkTenants measures what fair dispatch costs: the whole agentq
// pipeline (as BenchmarkThroughput's "agentq") over tasks of no tenant,
// of one tenant, and spread over 1,000 tenants, in the same run, rounds
// interleaved. It reports throughput and Redis CPU per task (dispatch to
// acknowledgement; and, apart, the enqueue's) as ratios to the tasks of no
// tenant. The goal: fairness costs at most 15% Redis CPU per task.
func BenchmarkTenants(b *testing.B) {
	skipShort(b)
	srv := redistest.Start(b)
	n, rounds := envInt("AGENTQ_BENCH_TASKS", 5000), envInt("AGENTQ_BENCH_ROUNDS", 5)
	const c = 50
	mk := func(name string, tenants int) side {
		return side{name, func(ctx context.Context) (float64, error) {
			return runAgentqFill(ctx, srv, c, n, func(ctx context.Context, rdb redis.UniversalClient) error {
				return prefillTenants(ctx, rdb, n, tenants)
			})
		}}
	}
	none, one, many := mk("no-tenant", 0), mk("1-tenant", 1), mk("1000-tenants", 1000)
	res := interleave(b, srv, rounds, []side{mk("warm", 0)}, []side{none, one, many})
	m0, c0, e0 := median(res[none.name]), median(res[none.name+redisSuffix]), median(res[none.name+enqSuffix])
	for _, s := range []side{one, many} {
		m, cpu, enq := median(res[s.name]), median(res[s.name+redisSuffix]), median(res[s.name+enqSuffix])
		report("c=%d %s %.0f tasks/s  no tenant %.0f tasks/s  ratio %.2f", c, s.name, m, m0, m/m0)
		report("c=%d %s Redis CPU per task %.1fµs  no tenant %.1fµs  ratio %.2f (dispatch to ack)", c, s.name, cpu, c0, cpu/c0)
		report("c=%d %s enqueue Redis CPU per task %.1fµs  no tenant %.1fµs  ratio %.2f", c, s.name, enq, e0, enq/e0)
		report("c=%d %s Redis CPU per task, enqueue included: ratio %.2f", c, s.name, (cpu+enq)/(c0+e0))
		detail("rounds %-14s %s", s.name+":", fmtRates(res[s.name]))
	}
	detail("rounds %-14s %s", none.name+":", fmtRates(res[none.name]))
}

// prefillTenants enqueues n tasks of the no-op agent spread round-robin
// over tenants tenants (none: the default tenant), in batches of 1000.
func prefillTenants(ctx context.Context, rdb redis.UniversalClient, n, tenants int) error {
	cl := tasks.NewClient(rdb)
	for lo := 0; lo < n; lo += 1000 {
		ts := make([]tasks.Task, min(1000, n-lo))
		for i := range ts {
			ts[i] = tasks.Task{Agent: noopAgent, Params: json.RawMessage(`{"n":1}`)}
			if tenants > 0 {
				ts[i].Tenant = fmt.Sprintf("t%d", (lo+i)%tenants)
			}
		}
		if _, err := cl.EnqueueMany(ctx, ts); err != nil {
			return err
		}
	}
	return nil
}
