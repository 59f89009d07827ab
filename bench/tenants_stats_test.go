package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
)

// BenchmarkTenantsStats explains BenchmarkTenants' figures; it runs only
// with AGENTQ_BENCH_STATS=1. One warm-up round, then rounds of no tenant,
// one tenant and 1,000 tenants one after another, each printing per task,
// for its enqueue and apart for dispatch to acknowledgement, Redis's CPU,
// the commands run and INFO commandstats (calls and µs per task of each
// command; a script's commands count inside its EVALSHA too).
//
// With AGENTQ_BENCH_CALLGRIND=1 and a redis-server on PATH that execs
// `valgrind --tool=callgrind --callgrind-out-file=DIR/out.%p
// /usr/bin/redis-server "$@"`, it also asks callgrind to dump its counts
// at each phase's end (callgrind_control -d r<round>-t<tenants>-<enq|run>):
// instruction counts, which a shared machine's load does not move, for
// choosing between variants of the scripts (BENCHMARKS.md, Fair dispatch).
func BenchmarkTenantsStats(b *testing.B) {
	skipShort(b)
	if os.Getenv("AGENTQ_BENCH_STATS") != "1" && os.Getenv("AGENTQ_BENCH_CALLGRIND") != "1" {
		b.Skip("diagnostic: set AGENTQ_BENCH_STATS=1")
	}
	srv := redistest.Start(b)
	n, rounds := envInt("AGENTQ_BENCH_TASKS", 5000), envInt("AGENTQ_BENCH_ROUNDS", 2)
	const c = 50
	ctx := context.Background()
	{
		flush(b, srv)
		if _, err := runAgentqFill(ctx, srv, c, n, func(ctx context.Context, rdb redis.UniversalClient) error {
			return prefillTenants(ctx, rdb, n, 1)
		}); err != nil {
			b.Fatal(err)
		}
	}
	for r := range rounds {
		for _, tn := range []int{0, 1, 1000} {
			flush(b, srv)
			rdb := newClient(srv)
			cgDump(b, ctx, rdb, "start")
			s0, err := readSnap(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			var s1 redisSnap
			_, err = runAgentqFill(ctx, srv, c, n, func(ctx context.Context, rdb redis.UniversalClient) error {
				// a client that waits for a slow (callgrind) server rather than retrying
				slow := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: time.Minute, MaxRetries: -1})
				defer slow.Close()
				if err := prefillTenants(ctx, slow, n, tn); err != nil {
					return err
				}
				var err error
				s1, err = readSnap(ctx, rdb)
				cgDump(b, ctx, rdb, fmt.Sprintf("r%d-t%d-enq", r+1, tn))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			s2, err := readSnap(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			cgDump(b, ctx, rdb, fmt.Sprintf("r%d-t%d-run", r+1, tn))
			rdb.Close()
			detail("round %d tenants=%d enqueue cpu %.1fµs/task: %s", r+1, tn, (s1.cpu-s0.cpu)/float64(n)*1e6, statDiff(s0, s1, n))
			detail("round %d tenants=%d run cpu %.1fµs/task cmds %.1f/task: %s", r+1, tn, (s2.cpu-s1.cpu)/float64(n)*1e6,
				float64(s2.cmds-s1.cmds)/float64(n), statDiff(s1, s2, n))
		}
	}
}

// cgDump asks callgrind (AGENTQ_BENCH_CALLGRIND=1: redis-server runs
// under valgrind --tool=callgrind) to dump its counts so far as label.
func cgDump(b *testing.B, ctx context.Context, rdb redis.UniversalClient, label string) {
	if os.Getenv("AGENTQ_BENCH_CALLGRIND") != "1" {
		return
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	pid := ""
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			pid = v
		}
	}
	if out, err := exec.Command("callgrind_control", "-d", label, pid).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control: %v %s", err, out)
	}
}

func statDiff(a, b redisSnap, n int) string {
	var names []string
	for k := range b.stats {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		d := cmdStat{b.stats[k].calls - a.stats[k].calls, b.stats[k].usec - a.stats[k].usec}
		if d.calls == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.3f/%.2fµs", k, d.calls/float64(n), d.usec/float64(n)))
	}
	return strings.Join(parts, " ")
}
