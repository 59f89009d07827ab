package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The simulated agent backend of BenchmarkIOBound and TestProfileDelivery
// runs in a process of its own (the test binary run again as
// TestHelperBackend), so that the measuring process's CPU is the worker's
// alone: the backend's HTTP server, its connections and its timers are
// not in it.
//
// The backend listens on loopback and answers every POST with a small
// JSON body after its delay. The parent talks to it over its stdin and
// stdout, one line each way: it prints "addr <host:port>" when it
// listens; "reset" clears its counters ("ok"); "stats" answers
// "<first> <calls> <conns>": the time of the first request since the last
// reset (Unix ns, 0: none), the requests and the connections accepted
// since then. It exits when its stdin closes (the parent closed it, or
// died).

// ioBackendEnv is the backend process's delay (a time.Duration);
// TestHelperBackend is skipped without it.
const ioBackendEnv = "AGENTQ_BENCH_IO_BACKEND"

// TestHelperBackend is not a test: it is the backend process (see above).
func TestHelperBackend(t *testing.T) {
	d := os.Getenv(ioBackendEnv)
	if d == "" {
		t.Skip("the backend process of BenchmarkIOBound: run by it, with " + ioBackendEnv + " set")
	}
	delay, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("%s=%q: %v", ioBackendEnv, d, err)
	}
	os.Exit(serveBackend(delay, os.Stdin, os.Stdout))
}

// backendCounts are the backend process's counters.
type backendCounts struct {
	first firstMark
	calls atomic.Int64
	conns atomic.Int64
}

// serveBackend is the backend process: it serves on loopback and answers
// the parent's lines on in until in closes, and returns the exit status.
func serveBackend(delay time.Duration, in io.Reader, out io.Writer) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var n backendCounts
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.first.hit()
			n.calls.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			time.Sleep(delay) // the backend's work, not a test wait
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				n.conns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(out, "addr %s\n", ln.Addr())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch sc.Text() {
		case "reset":
			n.first.ns.Store(0)
			n.calls.Store(0)
			n.conns.Store(0)
			fmt.Fprintln(out, "ok")
		case "stats":
			fmt.Fprintf(out, "%d %d %d\n", n.first.ns.Load(), n.calls.Load(), n.conns.Load())
		default:
			fmt.Fprintf(out, "unknown command %q\n", sc.Text())
		}
	}
	return 0
}

// ioBackend is the parent's end of a backend process.
type ioBackend struct {
	url string // the agent's endpoint: http://<addr>/run
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// backendStats is what "stats" answers.
type backendStats struct {
	first        time.Time // the first request since the last reset
	calls, conns int64
}

// newIOBackend starts a backend process answering after delay; the test's
// cleanup stops it.
func newIOBackend(tb testing.TB, delay time.Duration) *ioBackend {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBackend$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), ioBackendEnv+"="+delay.String())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	be := &ioBackend{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	tb.Cleanup(be.close)
	line, err := be.line()
	addr, ok := strings.CutPrefix(line, "addr ")
	if err != nil || !ok {
		tb.Fatalf("backend process: %q, %v", line, err)
	}
	be.url = "http://" + addr + "/run"
	return be
}

// line reads the backend's next line.
func (be *ioBackend) line() (string, error) {
	if !be.out.Scan() {
		return "", fmt.Errorf("backend process ended: %v", be.out.Err())
	}
	return be.out.Text(), nil
}

// ask sends the backend a command and returns its answer.
func (be *ioBackend) ask(cmd string) (string, error) {
	if _, err := fmt.Fprintln(be.in, cmd); err != nil {
		return "", err
	}
	return be.line()
}

// reset clears the backend's counters (the start of a round).
func (be *ioBackend) reset() error {
	if a, err := be.ask("reset"); err != nil || a != "ok" {
		return fmt.Errorf("backend reset: %q, %v", a, err)
	}
	return nil
}

// stats reads the backend's counters.
func (be *ioBackend) stats() (backendStats, error) {
	a, err := be.ask("stats")
	if err != nil {
		return backendStats{}, err
	}
	var first int64
	var s backendStats
	if _, err := fmt.Sscanf(a, "%d %d %d", &first, &s.calls, &s.conns); err != nil {
		return s, fmt.Errorf("backend stats %q: %w", a, err)
	}
	if first != 0 {
		s.first = time.Unix(0, first)
	}
	return s, nil
}

// close ends the backend process (its stdin closes) and waits for it.
func (be *ioBackend) close() {
	_ = be.in.Close()
	_ = be.cmd.Wait()
}

// TestServeBackend holds the backend process's protocol: its address
// line, a POST answered and counted, reset and stats.
func TestServeBackend(t *testing.T) {
	t.Parallel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	exit := make(chan int, 1)
	go func() { exit <- serveBackend(time.Millisecond, inR, outW) }()
	out := bufio.NewScanner(outR)
	ask := func(cmd string) string {
		_, err := fmt.Fprintln(inW, cmd)
		require.NoError(t, err)
		require.True(t, out.Scan())
		return out.Text()
	}
	require.True(t, out.Scan())
	addr, ok := strings.CutPrefix(out.Text(), "addr ")
	require.True(t, ok, out.Text())
	require.Equal(t, "0 0 0", ask("stats"))

	resp, err := http.Post("http://"+addr+"/run", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, `{"ok":true}`, string(body))

	var first, calls, conns int64
	_, err = fmt.Sscanf(ask("stats"), "%d %d %d", &first, &calls, &conns)
	require.NoError(t, err)
	require.Positive(t, first)
	require.Equal(t, int64(1), calls)
	require.Equal(t, int64(1), conns)
	require.Equal(t, "ok", ask("reset"))
	require.Equal(t, "0 0 0", ask("stats"))
	require.NoError(t, inW.Close())
	require.Equal(t, 0, <-exit)
}
