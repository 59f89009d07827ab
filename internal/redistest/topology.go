package redistest

// Multi-node topologies of real redis-server processes: a Sentinel group
// (master, replica, 3 sentinels) and a Cluster (3 masters, 3 replicas), each
// process on free loopback ports with its own directory and log file, killed
// when the test ends.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// dataNodeArgs are the arguments both topologies' data nodes add to Start's:
// a restarted node keeps its data, and the log says what failed over.
var dataNodeArgs = []string{
	"--appendonly", "yes", "--appendfsync", "everysec",
	"--min-replicas-to-write", "0", "--loglevel", "notice",
	// A replica's first sync starts at once, not after the default 5 s
	// wait for more replicas to share the diskless transfer.
	"--repl-diskless-sync-delay", "0",
}

// clusterNodeArgs are the extra arguments of a Cluster's nodes.
var clusterNodeArgs = []string{
	"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
	"--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "yes",
	"--cluster-replica-validity-factor", "0",
}

const logTail = 6 << 10 // bytes of each process's log printed on a failure

// Sentinel is a Sentinel group: a master, one replica and 3 sentinels
// monitoring them as MasterName (quorum 2, down-after 1 s, failover-timeout 5 s).
type Sentinel struct {
	MasterName string    // "mymaster"
	Nodes      []*Server // the data nodes: [0] starts as master, [1] as replica
	Sentinels  []string  // sentinel addresses host:port

	procs []*sentinelProc
}

// StartSentinel starts a Sentinel group and waits (20 s at most) until the
// replica is in sync and every sentinel knows the master, the replica and the
// 2 other sentinels. Every process is killed when the test ends.
//
// Each data node reads a config file of its own that the sentinels rewrite,
// so Server.Restart brings a node back with the role the sentinels last gave
// it (a master killed before a failover comes back as master and is turned
// into a replica by the sentinels some seconds later, as in production).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	lookRedis(t, "redis-server")
	ports := freePorts(t, 5, false)
	s := &Sentinel{MasterName: "mymaster"}
	for i := range 2 {
		n := &Server{t: t, Dir: t.TempDir(), extra: dataNodeArgs}
		n.conf = filepath.Join(n.Dir, "redis.conf")
		conf := "# redistest Sentinel data node; the sentinels rewrite this file\n"
		if i == 1 {
			conf += "replicaof 127.0.0.1 " + strings.TrimPrefix(s.Nodes[0].Addr, "127.0.0.1:") + "\n"
		}
		if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
			t.Fatalf("redistest: sentinel: write %s: %v", n.conf, err)
		}
		t.Cleanup(n.Kill)
		s.Nodes = append(s.Nodes, n)
		first := true
		n.startOnFreePort(func() int {
			if first {
				first = false
				return ports[i]
			}
			return freePort(t)
		})
	}
	master := s.Nodes[0].Addr
	for _, p := range ports[2:] {
		sp, err := startSentinelOnFreePort(t, p, master)
		if err != nil {
			t.Fatalf("redistest: %v\n%s", err, s.logs())
		}
		s.procs = append(s.procs, sp)
		s.Sentinels = append(s.Sentinels, sp.addr)
	}

	await(t, 20*time.Second, s.ready, s.logs, "sentinel group not ready")
	return s
}

// ready says why the group is not ready yet, or nil.
func (s *Sentinel) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := replicaOnline(ctx, s.Nodes[0].Addr, s.Nodes[1].Addr); err != nil {
		return err
	}
	for _, a := range s.Sentinels {
		sc := sentinelClient(a)
		m, err := sc.Master(ctx, s.MasterName).Result()
		if err != nil {
			sc.Close()
			return fmt.Errorf("sentinel %s: SENTINEL MASTER: %w", a, err)
		}
		if got := m["ip"] + ":" + m["port"]; got != s.Nodes[0].Addr || m["flags"] != "master" {
			sc.Close()
			return fmt.Errorf("sentinel %s: master %s flags %q", a, got, m["flags"])
		}
		if n, _ := strconv.Atoi(m["num-slaves"]); n < 1 {
			sc.Close()
			return fmt.Errorf("sentinel %s: num-slaves %q", a, m["num-slaves"])
		}
		if n, _ := strconv.Atoi(m["num-other-sentinels"]); n < 2 {
			sc.Close()
			return fmt.Errorf("sentinel %s: num-other-sentinels %q", a, m["num-other-sentinels"])
		}
		reps, err := sc.Replicas(ctx, s.MasterName).Result()
		sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: SENTINEL REPLICAS: %w", a, err)
		}
		ok := false
		for _, r := range reps {
			ok = ok || r["ip"]+":"+r["port"] == s.Nodes[1].Addr && r["flags"] == "slave" && r["master-link-status"] == "ok"
		}
		if !ok {
			return fmt.Errorf("sentinel %s: replica %s not seen healthy: %v", a, s.Nodes[1].Addr, reps)
		}
	}
	return nil
}

// URL is the redis+sentinel:// URL of the group, database 0.
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + strings.Join(s.Sentinels, ",") + "/" + s.MasterName + "/0"
}

// Master returns the current master's address per the sentinels
// (SENTINEL GET-MASTER-ADDR-BY-NAME, asked to each until one answers).
func (s *Sentinel) Master(t testing.TB) string {
	t.Helper()
	var errs []string
	for _, a := range s.Sentinels {
		addr, err := s.masterBy(a)
		if err == nil {
			return addr
		}
		errs = append(errs, err.Error())
	}
	t.Fatalf("redistest: no sentinel gave the master of %s: %s\n%s", s.MasterName, strings.Join(errs, "; "), s.logs())
	return ""
}

func (s *Sentinel) masterBy(sentinel string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sc := sentinelClient(sentinel)
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", sentinel, err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME answered %q", sentinel, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// KillMaster SIGKILLs the current master's process and returns it.
func (s *Sentinel) KillMaster(t testing.TB) *Server {
	t.Helper()
	addr := s.Master(t)
	if n := killAt(s.Nodes, addr); n != nil {
		return n
	}
	t.Fatalf("redistest: the sentinels' master %s is none of the data nodes\n%s", addr, s.logs())
	return nil
}

// WaitFailover polls until every answering sentinel (2 at least) reports the
// same master address, other than old, and that node answers ROLE as
// master; it returns the new master's address. It fails the test after within.
func (s *Sentinel) WaitFailover(t testing.TB, old string, within time.Duration) string {
	t.Helper()
	var addr string
	await(t, within, func() (err error) {
		addr, err = s.failedOver(old)
		return err
	}, s.logs, "no failover from "+old)
	return addr
}

func (s *Sentinel) failedOver(old string) (string, error) {
	seen := map[string][]string{}
	var errs []string
	for _, a := range s.Sentinels {
		m, err := s.masterBy(a)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		seen[m] = append(seen[m], a)
	}
	if len(seen) != 1 {
		return "", fmt.Errorf("sentinels disagree or do not answer: %v %v", seen, errs)
	}
	for m, by := range seen {
		if len(by) < 2 {
			return "", fmt.Errorf("only %v answer (master %s): %v", by, m, errs)
		}
		if m == old {
			return "", fmt.Errorf("sentinels still report %s", old)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if role, err := roleOf(ctx, m); err != nil || role != "master" {
			return "", fmt.Errorf("sentinels report %s, whose ROLE is %q (%v)", m, role, err)
		}
		return m, nil
	}
	panic("unreachable")
}

// logs renders the tail of every process's log, for failure messages.
func (s *Sentinel) logs() string {
	var b strings.Builder
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, "--- redis-server %s (%s/redis.log):\n%s\n", n.Addr, n.Dir, tail(n.log()))
	}
	for _, sp := range s.procs {
		fmt.Fprintf(&b, "--- sentinel %s (%s/sentinel.log):\n%s\n", sp.addr, sp.dir, tail(sp.log()))
	}
	return b.String()
}

// startSentinelOnFreePort starts a sentinel of master on port, or on
// another free port when port was taken before the sentinel could bind
// it, and waits until it answers PING.
func startSentinelOnFreePort(t testing.TB, port int, master string) (*sentinelProc, error) {
	t.Helper()
	for try := 1; ; try++ {
		sp := startSentinelProc(t, port, master)
		err := waitUp(sp.addr, sp.done, 10*time.Second, sp.log)
		if err == nil {
			err = sp.answersItself()
		}
		if err == nil {
			return sp, nil
		}
		sp.kill()
		if !errors.Is(err, errPortTaken) || try == maxPortTries {
			return nil, fmt.Errorf("sentinel %s: %w", sp.addr, err)
		}
		port = freePort(t)
	}
}

// sentinelProc is a `redis-server sentinel.conf --sentinel` child process.
type sentinelProc struct {
	addr, dir string
	cmd       *exec.Cmd
	done      chan struct{}
}

func startSentinelProc(t testing.TB, port int, master string) *sentinelProc {
	t.Helper()
	sp := &sentinelProc{addr: "127.0.0.1:" + strconv.Itoa(port), dir: t.TempDir(), done: make(chan struct{})}
	mhost, mport, _ := net.SplitHostPort(master)
	conf := filepath.Join(sp.dir, "sentinel.conf")
	text := strings.Join([]string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"protected-mode no",
		"daemonize no",
		"dir " + sp.dir,
		"sentinel resolve-hostnames no",
		"sentinel monitor mymaster " + mhost + " " + mport + " 2",
		"sentinel down-after-milliseconds mymaster 1000",
		"sentinel failover-timeout mymaster 5000",
		"sentinel parallel-syncs mymaster 1",
		"",
	}, "\n")
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatalf("redistest: sentinel: write %s: %v", conf, err)
	}
	logf, err := os.Create(filepath.Join(sp.dir, "sentinel.log"))
	if err != nil {
		t.Fatalf("redistest: sentinel: %v", err)
	}
	sp.cmd = exec.Command("redis-server", conf, "--sentinel")
	sp.cmd.Stdout, sp.cmd.Stderr = logf, logf
	if err := sp.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("redistest: start sentinel: %v", err)
	}
	go func() { _ = sp.cmd.Wait(); _ = logf.Close(); close(sp.done) }()
	t.Cleanup(sp.kill)
	return sp
}

// answersItself returns an error wrapping errPortTaken when another
// process answers at the sentinel's address.
func (sp *sentinelProc) answersItself() error {
	pid, err := pidAt(sp.addr)
	switch {
	case err != nil:
		return fmt.Errorf("INFO server: %w", err)
	case pid != sp.cmd.Process.Pid:
		return fmt.Errorf("pid %d answers, not %d: %w", pid, sp.cmd.Process.Pid, errPortTaken)
	}
	return nil
}

// kill SIGKILLs the sentinel and waits for it to exit.
func (sp *sentinelProc) kill() {
	_ = sp.cmd.Process.Kill()
	select {
	case <-sp.done:
	case <-time.After(10 * time.Second):
	}
}

func (sp *sentinelProc) log() string {
	b, _ := os.ReadFile(filepath.Join(sp.dir, "sentinel.log"))
	return string(b)
}

// Cluster is a Redis Cluster of 6 nodes: 3 masters with a replica each
// (node timeout 1 s, full coverage required, any replica may fail over).
type Cluster struct {
	Nodes []*Server // all 6 data nodes
}

// StartCluster starts the 6 nodes, creates the cluster with
// `redis-cli --cluster create … --cluster-replicas 1` and waits (30 s at
// most) until every node says cluster_state:ok and lists 3 masters each with
// a connected replica, and every master's replica is in sync. Every node is
// killed when the test ends; Server.Restart brings a node back into the
// cluster (its nodes.conf stays in its Dir).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	lookRedis(t, "redis-server")
	lookRedis(t, "redis-cli")
	c := &Cluster{}
	extra := slices.Concat(dataNodeArgs, clusterNodeArgs)
	ports := freePorts(t, 6, true)
	for i := range ports {
		n := &Server{t: t, Dir: t.TempDir(), extra: extra}
		t.Cleanup(n.Kill)
		c.Nodes = append(c.Nodes, n)
		// about 10 ms each: not worth starting them in parallel
		n.startOnFreePort(func() int {
			if p := ports[i]; p != 0 {
				ports[i] = 0
				return p
			}
			return freePorts(t, 1, true)[0]
		})
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", args...)
	cmd.Stdin = nil // --cluster-yes: no question asked
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s\n%s", strings.Join(args, " "), err, out, c.logs())
	}

	await(t, 30*time.Second, c.ready, c.logs, "cluster not ready")
	return c
}

// ready says why the cluster is not ready yet, or nil.
func (c *Cluster) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		rdb := quickClient(n.Addr)
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			rdb.Close()
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			rdb.Close()
			return fmt.Errorf("%s: cluster_state not ok", n.Addr)
		}
		text, err := rdb.ClusterNodes(ctx).Result()
		rdb.Close()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr, err)
		}
		nodes := parseClusterNodes(text)
		var masters []clusterNode
		for _, m := range nodes {
			if m.is("master") && !m.failing() && len(m.slots) > 0 {
				masters = append(masters, m)
			}
		}
		if len(masters) != 3 {
			return fmt.Errorf("%s: %d masters with slots, not 3:\n%s", n.Addr, len(masters), text)
		}
		for _, m := range masters {
			i := slices.IndexFunc(nodes, func(r clusterNode) bool {
				return r.master == m.id && r.is("slave") && !r.failing() && r.link == "connected"
			})
			if i < 0 {
				return fmt.Errorf("%s: master %s has no connected replica:\n%s", n.Addr, m.addr, text)
			}
			if err := replicaOnline(ctx, m.addr, nodes[i].addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// Addrs returns every node's address.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// URL is the redis+cluster:// URL with the first 3 nodes as seeds.
func (c *Cluster) URL() string {
	return "redis+cluster://" + strings.Join(c.Addrs()[:3], ",")
}

// Client returns a go-redis cluster client seeded with every node, closed at
// the end of the test. It reloads the slot map every second: a killed master
// sends no MOVED, so with go-redis's default ClusterStateReloadInterval
// (60 s) the client would keep sending that master's slots to the dead
// address for up to a minute after a replica took them over.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Masters returns the addresses of the current masters, per CLUSTER NODES
// of the first node that answers, leaving out nodes flagged fail (or fail?).
func (c *Cluster) Masters(t testing.TB) []string {
	t.Helper()
	text := c.ask(t, func(ctx context.Context, rdb *redis.Client) (string, error) {
		return rdb.ClusterNodes(ctx).Result()
	})
	var out []string
	for _, n := range parseClusterNodes(text) {
		if n.is("master") && !n.failing() {
			out = append(out, n.addr)
		}
	}
	slices.Sort(out)
	return out
}

// MasterOf returns the address of the master serving key's slot, per the
// first node that answers.
func (c *Cluster) MasterOf(t testing.TB, key string) string {
	t.Helper()
	return c.ask(t, func(ctx context.Context, rdb *redis.Client) (string, error) {
		return slotMaster(ctx, rdb, key)
	})
}

// Kill SIGKILLs the node with address addr and returns it.
func (c *Cluster) Kill(t testing.TB, addr string) *Server {
	t.Helper()
	if n := killAt(c.Nodes, addr); n != nil {
		return n
	}
	t.Fatalf("redistest: no cluster node has address %s (nodes: %v)", addr, c.Addrs())
	return nil
}

// WaitPromoted polls until key's slot is served by a master other than old:
// every node that answers names the same master for it, that master answers
// ROLE as master, and every node that answers says cluster_state:ok. It
// returns the new master's address, and fails the test after within.
func (c *Cluster) WaitPromoted(t testing.TB, key string, old string, within time.Duration) string {
	t.Helper()
	var addr string
	await(t, within, func() (err error) {
		addr, err = c.promoted(key, old)
		return err
	}, c.logs, fmt.Sprintf("slot of %q not served by a new master (old %s)", key, old))
	return addr
}

func (c *Cluster) promoted(key, old string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	seen := map[string][]string{}
	live := 0
	for _, n := range c.Nodes {
		rdb := quickClient(n.Addr)
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			rdb.Close()
			continue // down
		}
		live++
		if !strings.Contains(info, "cluster_state:ok") {
			rdb.Close()
			return "", fmt.Errorf("%s: cluster_state not ok", n.Addr)
		}
		m, err := slotMaster(ctx, rdb, key)
		rdb.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.Addr, err)
		}
		seen[m] = append(seen[m], n.Addr)
	}
	if live == 0 {
		return "", fmt.Errorf("no node answers")
	}
	if len(seen) != 1 {
		return "", fmt.Errorf("nodes disagree on the master of %q: %v", key, seen)
	}
	for m := range seen {
		if m == old {
			return "", fmt.Errorf("the slot of %q is still served by %s", key, old)
		}
		if role, err := roleOf(ctx, m); err != nil || role != "master" {
			return "", fmt.Errorf("new master %s: ROLE %q (%v)", m, role, err)
		}
		return m, nil
	}
	panic("unreachable")
}

// ask runs f against the first node that answers and fails the test if none does.
func (c *Cluster) ask(t testing.TB, f func(context.Context, *redis.Client) (string, error)) string {
	t.Helper()
	var errs []string
	for _, n := range c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rdb := quickClient(n.Addr)
		out, err := f(ctx, rdb)
		rdb.Close()
		cancel()
		if err == nil {
			return out
		}
		errs = append(errs, n.Addr+": "+err.Error())
	}
	t.Fatalf("redistest: no cluster node answered: %s\n%s", strings.Join(errs, "; "), c.logs())
	return ""
}

// logs renders the tail of every node's log, for failure messages.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "--- redis-server %s (%s/redis.log):\n%s\n", n.Addr, n.Dir, tail(n.log()))
	}
	return b.String()
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master, link string
	flags                  []string
	slots                  []string
}

func (n clusterNode) is(flag string) bool { return slices.Contains(n.flags, flag) }
func (n clusterNode) failing() bool       { return n.is("fail") || n.is("fail?") }

func parseClusterNodes(text string) []clusterNode {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@") // ip:port@cport[,hostname]
		addr, _, _ = strings.Cut(addr, ",")
		out = append(out, clusterNode{
			id: f[0], addr: addr, flags: strings.Split(f[2], ","),
			master: f[3], link: f[7], slots: f[8:],
		})
	}
	return out
}

// slotMaster asks rdb's node which master serves key's slot.
func slotMaster(ctx context.Context, rdb *redis.Client, key string) (string, error) {
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("CLUSTER KEYSLOT: %w", err)
	}
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("slot %d of %q is served by no node", slot, key)
}

// replicaOnline says whether master's INFO replication shows replica with
// state=online.
func replicaOnline(ctx context.Context, master, replica string) error {
	rdb := quickClient(master)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%s: INFO replication: %w", master, err)
	}
	_, port, _ := net.SplitHostPort(replica)
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ",port="+port+",") && strings.Contains(line, "state=online") {
			return nil
		}
	}
	return fmt.Errorf("%s: replica %s not online:\n%s", master, replica, info)
}

// roleOf returns the first element of ROLE at addr ("master", "slave", …).
func roleOf(ctx context.Context, addr string) (string, error) {
	rdb := quickClient(addr)
	defer rdb.Close()
	v, err := rdb.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", fmt.Errorf("empty ROLE reply")
	}
	role, _ := v[0].(string)
	return role, nil
}

// quickClient is a one-connection client that fails fast, for probes.
func quickClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
	})
}

func sentinelClient(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{
		Addr: addr, MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
	})
}

// killAt SIGKILLs the node of nodes with address addr and returns it; nil
// when none has it.
func killAt(nodes []*Server, addr string) *Server {
	for _, n := range nodes {
		if n.Addr == addr {
			n.Kill()
			return n
		}
	}
	return nil
}

// await calls try every 50 ms until it returns nil; when within has passed
// first, it fails t with what, try's last error and the processes' logs.
func await(t testing.TB, within time.Duration, try func() error, logs func() string, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s within %v: %v\n%s", what, within, err, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitUp waits until the process that exited (closed when it ends)
// answers PING on addr. When it exits first, it returns an error wrapping
// errPortTaken if its log (read by log) says it could not bind a port
// ("Address already in use"), else one with the log.
func waitUp(addr string, exited <-chan struct{}, within time.Duration, log func() string) error {
	deadline := time.Now().Add(within)
	rdb := quickClient(addr)
	defer rdb.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			text := log()
			if strings.Contains(text, "Address already in use") {
				return fmt.Errorf("it could not bind its port: %w\n%s", errPortTaken, tail(text))
			}
			return fmt.Errorf("it exited before it answered: %w\n%s", err, tail(text))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("it did not answer within %v: %w\n%s", within, err, tail(log()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePorts returns n distinct free loopback ports. With bus, each port P is
// below 55536 and P+10000 (its cluster bus port) can be bound too.
func freePorts(t testing.TB, n int, bus bool) []int {
	t.Helper()
	used := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("redistest: found only %d of %d free ports (bus %v)", len(out), n, bus)
		}
		p := freePort(t)
		if used[p] || bus && (p >= 55536 || used[p+10000] || !canBind(p+10000)) {
			continue
		}
		used[p] = true
		if bus {
			used[p+10000] = true
		}
		out = append(out, p)
	}
	return out
}

func canBind(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func lookRedis(t testing.TB, bin string) {
	t.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("redistest: %s not found in PATH (run `make test`, which installs it): %v", bin, err)
	}
}

func tail(s string) string {
	if len(s) > logTail {
		return "…" + s[len(s)-logTail:]
	}
	return s
}
