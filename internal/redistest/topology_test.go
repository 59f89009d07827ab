package redistest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// eventually polls f every 50 ms until it returns nil, failing the test
// with f's last error after within.
func eventually(t *testing.T, within time.Duration, what string, f func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := StartSentinel(t)
	t.Logf("sentinel group ready in %v", time.Since(start))

	if len(s.Nodes) != 2 || len(s.Sentinels) != 3 || s.MasterName != "mymaster" {
		t.Fatalf("group: %d nodes, %d sentinels, master name %q", len(s.Nodes), len(s.Sentinels), s.MasterName)
	}
	if want := "redis+sentinel://" + strings.Join(s.Sentinels, ",") + "/mymaster/0"; s.URL() != want {
		t.Fatalf("URL() = %q, want %q", s.URL(), want)
	}
	old := s.Master(t)
	if old != s.Nodes[0].Addr {
		t.Fatalf("Master() = %s, want node 0 %s", old, s.Nodes[0].Addr)
	}

	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.Sentinels})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	// SET and WAIT on one connection: WAIT waits for that connection's writes.
	cn := rdb.Conn()
	if err := cn.Set(ctx, "survivor", "v1", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	if n, err := cn.Wait(ctx, 1, 2*time.Second).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT 1 through the failover client: %d replicas acknowledged, %v", n, err)
	}
	_ = cn.Close()

	killed := s.KillMaster(t)
	if killed != s.Nodes[0] {
		t.Fatalf("KillMaster killed %s, want the master %s", killed.Addr, old)
	}
	start = time.Now()
	now := s.WaitFailover(t, old, 30*time.Second)
	t.Logf("failover to %s in %v", now, time.Since(start))
	if now != s.Nodes[1].Addr {
		t.Fatalf("WaitFailover = %s, want the replica %s", now, s.Nodes[1].Addr)
	}
	if m := s.Master(t); m != now {
		t.Fatalf("Master() after failover = %s, want %s", m, now)
	}

	eventually(t, 20*time.Second, "read back through the failover client", func(ctx context.Context) error {
		v, err := rdb.Get(ctx, "survivor").Result()
		if err != nil {
			return err
		}
		if v != "v1" {
			return fmt.Errorf("survivor = %q, want v1", v)
		}
		return nil
	})
	if err := rdb.Set(ctx, "after", "v2", 0).Err(); err != nil {
		t.Fatalf("write to the new master: %v", err)
	}

	// The old master comes back (as master: it was down when the sentinels
	// rewrote the others' configs) and the sentinels make it a replica.
	killed.Restart()
	start = time.Now()
	eventually(t, 30*time.Second, "old master turned into a replica holding the new write", func(ctx context.Context) error {
		if role, err := roleOf(ctx, killed.Addr); err != nil || role != "slave" {
			return fmt.Errorf("ROLE %q (%v)", role, err)
		}
		return replicaOnline(ctx, now, killed.Addr)
	})
	t.Logf("old master rejoined as replica in %v", time.Since(start))
	// The sentinels rewrote both config files, so a Restart keeps the roles.
	for _, n := range s.Nodes {
		b, err := os.ReadFile(n.conf)
		if err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(string(b), "replicaof "+strings.Replace(now, ":", " ", 1))
		if want := n == killed; has != want {
			t.Fatalf("%s: config file names the new master as its master: %v, want %v:\n%s", n.Addr, has, want, b)
		}
	}
	old0 := quickClient(killed.Addr)
	defer old0.Close()
	if v, err := old0.Get(ctx, "after").Result(); err != nil || v != "v2" {
		t.Fatalf("old master after rejoining: GET after = %q, %v; want v2", v, err)
	}
}

func TestClusterFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartCluster(t)
	t.Logf("cluster ready in %v", time.Since(start))

	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	addrs := c.Addrs()
	if want := "redis+cluster://" + strings.Join(addrs[:3], ","); c.URL() != want {
		t.Fatalf("URL() = %q, want %q", c.URL(), want)
	}
	masters := c.Masters(t)
	if len(masters) != 3 {
		t.Fatalf("Masters() = %v, want 3", masters)
	}
	for _, m := range masters {
		if !slices.Contains(addrs, m) {
			t.Fatalf("master %s is not a node (%v)", m, addrs)
		}
	}

	rdb := c.Client(t)
	ctx := context.Background()
	var keys []string
	holders := map[string][]string{} // master → keys
	for l := 'a'; l <= 'z' && len(holders) < 2; l++ {
		k := "{" + string(l) + "}x"
		if err := rdb.Set(ctx, k, "v-"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		m := c.MasterOf(t, k)
		if !slices.Contains(masters, m) {
			t.Fatalf("MasterOf(%s) = %s, not a master (%v)", k, m, masters)
		}
		keys = append(keys, k)
		holders[m] = append(holders[m], k)
	}
	if len(holders) < 2 {
		t.Fatalf("keys %v all on one master: %v", keys, holders)
	}

	victim := keys[0]
	old := c.MasterOf(t, victim)
	// WAIT waits for its own connection's writes: rewrite the key on a
	// direct connection to its master, then WAIT there, so every earlier
	// write to that master has reached a replica too.
	direct := quickClient(old) // one connection
	defer direct.Close()
	if err := direct.Set(ctx, victim, "v-"+victim, 0).Err(); err != nil {
		t.Fatalf("SET %s on %s: %v", victim, old, err)
	}
	if n, err := direct.Wait(ctx, 1, 2*time.Second).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT 1 on %s: %d replicas acknowledged, %v", old, n, err)
	}

	killed := c.Kill(t, old)
	if killed.Addr != old {
		t.Fatalf("Kill(%s) returned %s", old, killed.Addr)
	}
	start = time.Now()
	now := c.WaitPromoted(t, victim, old, 30*time.Second)
	t.Logf("slot of %s promoted from %s to %s in %v", victim, old, now, time.Since(start))
	if now == old || !slices.Contains(addrs, now) || slices.Contains(masters, now) {
		t.Fatalf("WaitPromoted = %s (old %s, masters before %v): want a former replica", now, old, masters)
	}
	if m := c.MasterOf(t, victim); m != now {
		t.Fatalf("MasterOf(%s) = %s after promotion, want %s", victim, m, now)
	}
	if ms := c.Masters(t); len(ms) != 3 || slices.Contains(ms, old) || !slices.Contains(ms, now) {
		t.Fatalf("Masters() after promotion = %v (old %s, new %s)", ms, old, now)
	}

	eventually(t, 20*time.Second, "read every key back through the cluster client", func(ctx context.Context) error {
		for _, k := range keys {
			v, err := rdb.Get(ctx, k).Result()
			if err != nil {
				return fmt.Errorf("GET %s: %w", k, err)
			}
			if v != "v-"+k {
				return fmt.Errorf("GET %s = %q", k, v)
			}
		}
		return nil
	})

	// The killed master comes back from its nodes.conf as a replica of the
	// node that took its slots.
	killed.Restart()
	eventually(t, 20*time.Second, "old master rejoined as replica", func(ctx context.Context) error {
		if role, err := roleOf(ctx, killed.Addr); err != nil || role != "slave" {
			return fmt.Errorf("ROLE %q (%v)", role, err)
		}
		return replicaOnline(ctx, now, killed.Addr)
	})
}
