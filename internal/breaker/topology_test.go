package breaker

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
)

// TestBreakerHalfOpenOnTopologies: the half-open invariants (at most
// half_open_max_calls trials per episode, every transition one step, no
// trial outside a half-open generation) hold on a Sentinel master and on a
// Cluster as on one node: 4 clients × 20 goroutines, each client its own
// connection pool as separate workers would have.
func TestBreakerHalfOpenOnTopologies(t *testing.T) {
	t.Parallel()
	// Each topology gives a factory: every call is a new client with its
	// own pool, as a separate worker process has.
	topologies := []struct {
		name    string
		clients func(t *testing.T) func() redis.UniversalClient
	}{
		{"sentinel", func(t *testing.T) func() redis.UniversalClient {
			sg := redistest.StartSentinel(t)
			return func() redis.UniversalClient {
				return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sg.MasterName, SentinelAddrs: sg.Sentinels, PoolSize: 20, ReadTimeout: hammerCallTimeout})
			}
		}},
		{"cluster", func(t *testing.T) func() redis.UniversalClient {
			cl := redistest.StartCluster(t)
			return func() redis.UniversalClient {
				return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 20, ReadTimeout: hammerCallTimeout})
			}
		}},
	}
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			t.Parallel()
			newClient := tp.clients(t)
			client := func() redis.UniversalClient {
				c := newClient()
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			hammerRun(t, client(), client, hammerCfg(2), 4, 20)
			hammerRun(t, client(), client, rateHammerCfg(2), 4, 20)
		})
	}
}
