// Package redistest starts real redis-server processes for tests, each on a
// free loopback port with its own data directory, and stops them when the
// test ends. It never uses a shared instance and never skips: a missing
// redis-server binary fails the test (`make test` installs it).
package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Server is a redis-server child process.
type Server struct {
	t    testing.TB
	Addr string // host:port
	Dir  string // data directory (AOF and RDB live here)
	AOF  bool

	// conf is a config file passed first (a Sentinel group's data node:
	// the sentinels rewrite its replicaof line); extra are arguments after
	// the defaults, which they override (topologies). See topology.go.
	conf  string
	extra []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	paused bool // stopped with SIGSTOP (Pause) and not yet resumed
}

// Option configures Start.
type Option func(*Server)

// WithAOF turns on appendonly with fsync every write, for durability tests.
func WithAOF() Option { return func(s *Server) { s.AOF = true } }

// Start launches a redis-server on a free port and registers its shutdown
// with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found in PATH (run `make test`, which installs it): %v", err)
	}
	_ = bin
	s := &Server{t: t, Dir: t.TempDir()}
	for _, o := range opts {
		o(s)
	}
	s.startOnFreePort(func() int { return freePort(t) })
	t.Cleanup(s.Stop)
	return s
}

// errPortTaken: another process took the port between the pick and the
// bind (tests in other packages start servers at the same time): another
// server answers there, or the server exited because it could not bind
// its port (or, in a Cluster, its bus port: the port + 10000).
var errPortTaken = errors.New("port taken by another process")

// maxPortTries bounds how many ports startOnFreePort tries.
const maxPortTries = 10

// startOnFreePort starts the server on a port pick returns, picking
// another when the one picked was taken before the server could bind it.
func (s *Server) startOnFreePort(pick func() int) {
	s.t.Helper()
	for try := 1; ; try++ {
		s.Addr = "127.0.0.1:" + strconv.Itoa(pick())
		err := s.launch()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || try == maxPortTries {
			s.t.Fatalf("redistest: %v", err)
		}
		// A Cluster node that failed to bind may have written its
		// nodes.conf already: the next try starts a fresh node again.
		_ = os.Remove(filepath.Join(s.Dir, "nodes.conf"))
	}
}

// URL is the redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Client returns a go-redis client closed at the end of the test.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart starts the server again on the same port and data directory (after
// Stop or Kill); it waits until the server answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

// launch starts the server on s.Addr and waits until it answers PING; it
// returns errPortTaken when what answers there is another process.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, port, _ := net.SplitHostPort(s.Addr)
	args := []string{
		"--port", port, "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--protected-mode", "no", "--loglevel", "warning",
		"--daemonize", "no",
	}
	if s.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, s.extra...)
	if s.conf != "" {
		args = append([]string{s.conf}, args...)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout = nil
	logf, err := os.Create(filepath.Join(s.Dir, "redis.log"))
	if err == nil {
		cmd.Stdout = logf
		cmd.Stderr = logf
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	if err := waitUp(s.Addr, exited, 10*time.Second, s.log); err != nil {
		s.cmd = nil
		_ = cmd.Process.Kill()
		return fmt.Errorf("redis-server on %s: %w", s.Addr, err)
	}
	if pid, err := pidAt(s.Addr); err != nil {
		return fmt.Errorf("redis-server on %s: INFO server: %w", s.Addr, err)
	} else if pid != cmd.Process.Pid {
		_ = cmd.Process.Kill()
		s.cmd = nil
		return fmt.Errorf("redis-server on %s: pid %d answers, not %d: %w", s.Addr, pid, cmd.Process.Pid, errPortTaken)
	}
	return nil
}

// pidAt is the process_id of the redis-server that answers at addr.
func pidAt(addr string) (int, error) {
	rdb := quickClient(addr)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id")
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(b)
}

// Stop shuts the server down with SIGTERM (a clean shutdown that flushes the
// AOF) and waits for the port to close. Stopping a stopped server is a no-op;
// a paused one (Pause) is resumed first, so that it can act on the signal.
func (s *Server) Stop() { s.signal(false) }

// Pause freezes the server with SIGSTOP: it keeps its port (the kernel
// still accepts connections and buffers what clients send) but answers
// nothing until Resume, when it runs everything buffered meanwhile — a
// Redis that stalls without closing a connection, so that clients time
// out on commands that Redis then runs anyway. The test's cleanup resumes
// a server left paused (Stop does too).
func (s *Server) Pause() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		s.t.Fatalf("redistest: pause: the server on %s is not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("redistest: pause: %v", err)
	}
	s.paused = true
	s.t.Cleanup(s.Resume)
}

// Resume lets a paused server (Pause) run again with SIGCONT. Resuming a
// server that is not paused is a no-op.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resumeLocked()
}

func (s *Server) resumeLocked() {
	if !s.paused {
		return
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	s.paused = false
}

// Kill stops the server with SIGKILL.
func (s *Server) Kill() { s.signal(true) }

func (s *Server) signal(kill bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	if kill {
		_ = s.cmd.Process.Kill() // SIGKILL ends a stopped process too
		s.paused = false
	} else {
		s.resumeLocked()
		_ = s.cmd.Process.Signal(os.Interrupt)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		_ = conn.Close()
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd = nil
}

func freePort(t testing.TB) int { return FreePort(t) }

// FreePort returns a loopback TCP port that is free now, picked below the
// kernel's ephemeral range (32768 and up on Linux): a port the kernel
// handed out for 127.0.0.1:0 and freed again is soon reused for some
// outgoing connection, so a process started on it later can find it taken
// ("address already in use"). Ports in [20000, 22700) are only ever taken
// by another test's explicit pick, which the bind check below rules out
// at the time of the pick (and a Cluster node's bus port, 10000 above,
// is still below the ephemeral range).
func FreePort(t testing.TB) int {
	for range 50 {
		port := 20000 + rand.IntN(2700)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = l.Close()
			return port
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Backend names one of the two Redis implementations a conformance suite runs on.
type Backend struct {
	Name string
	// New returns a fresh, empty server's client and its URL.
	New func(t testing.TB) (redis.UniversalClient, string)
}

// Backends returns miniredis and a real redis-server, for conformance suites:
//
//	for _, b := range redistest.Backends() { t.Run(b.Name, func(t *testing.T) { c, _ := b.New(t); … }) }
func Backends() []Backend {
	return []Backend{
		{Name: "miniredis", New: func(t testing.TB) (redis.UniversalClient, string) {
			m := miniredis.RunT(t)
			// miniredis runs its scripts in-process, interpreted: under
			// -race on a loaded machine a 2,000-task batch takes longer
			// than go-redis's default 3 s read timeout.
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ReadTimeout: 30 * time.Second})
			t.Cleanup(func() { _ = c.Close() })
			return c, "redis://" + m.Addr() + "/0"
		}},
		{Name: "redis-server", New: func(t testing.TB) (redis.UniversalClient, string) {
			s := Start(t)
			return s.Client(), s.URL()
		}},
	}
}

// Dump renders every key of a server with its type and value, for
// comparing what two code paths wrote: sets sorted, hashes without the
// fields named in ignore (times of writing, …). It fails the test on a
// Redis error or when the server holds no key.
func Dump(t testing.TB, rdb redis.UniversalClient, ignore ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("redistest: dump: %v", err)
	}
	out := map[string]string{}
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		var v any
		switch {
		case err != nil:
		case typ == "hash":
			var h map[string]string
			h, err = rdb.HGetAll(ctx, k).Result()
			for _, f := range ignore {
				delete(h, f)
			}
			v = h
		case typ == "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case typ == "set":
			var m []string
			m, err = rdb.SMembers(ctx, k).Result()
			slices.Sort(m)
			v = m
		case typ == "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		default:
			v, err = rdb.Get(ctx, k).Result()
		}
		if err != nil {
			t.Fatalf("redistest: dump %s: %v", k, err)
		}
		out[k] = fmt.Sprintf("%s %q", typ, fmt.Sprint(v))
	}
	if len(out) == 0 {
		t.Fatalf("redistest: dump: the server holds no key")
	}
	return out
}
