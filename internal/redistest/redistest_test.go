package redistest

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartSkipsATakenPort: a port another test's server took between the
// pick and the bind is noticed (another process answers there) and the
// server starts on another port.
func TestStartSkipsATakenPort(t *testing.T) {
	t.Parallel()
	other := Start(t)
	_, taken, err := net.SplitHostPort(other.Addr)
	require.NoError(t, err)
	s := &Server{t: t, Dir: t.TempDir()}
	t.Cleanup(s.Kill)
	var picks []string
	s.startOnFreePort(func() int {
		p := freePort(t)
		if len(picks) == 0 {
			p, _ = strconv.Atoi(taken)
		}
		picks = append(picks, strconv.Itoa(p))
		return p
	})
	require.Len(t, picks, 2, "the taken port is given up")
	require.NotEqual(t, other.Addr, s.Addr)
	pid, err := pidAt(s.Addr)
	require.NoError(t, err)
	require.Equal(t, s.cmd.Process.Pid, pid)
}

// TestPauseResume: a paused server answers nothing but keeps what clients
// send, and runs it once resumed; a server the test leaves paused is still
// stopped by the cleanup.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := Start(t)
	rdb := s.Client()
	ctx := context.Background()
	require.NoError(t, rdb.Ping(ctx).Err()) // a connection ready before the pause
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.Error(t, rdb.Set(short, "k", "v", 0).Err(), "a paused server answers nothing")
	s.Resume()
	s.Resume() // a no-op
	// The SET whose reply the client gave up on ran once the server resumed.
	require.Eventually(t, func() bool { return rdb.Get(ctx, "k").Val() == "v" }, 10*time.Second, 20*time.Millisecond)

	s.Pause() // left paused: Stop (the cleanup) resumes it to stop it
	s.Stop()
	require.Nil(t, s.cmd)
	_, err := net.DialTimeout("tcp", s.Addr, time.Second)
	require.Error(t, err, "stopped")
}

// holdPort binds a free loopback port until the test ends (a process that
// is not a Redis server: it answers nothing) and returns it.
func holdPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// heldFirst is a pick that returns held first, then free ports, and
// records what it returned.
func heldFirst(t *testing.T, held int, picks *[]int) func() int {
	return func() int {
		p := held
		if len(*picks) > 0 {
			p = freePorts(t, 1, true)[0]
		}
		*picks = append(*picks, p)
		return p
	}
}

// A port another process holds (which answers no PING): redis-server
// exits, saying "Address already in use", and the helper moves to another
// port at once instead of waiting 10 s for an answer and failing.
func TestStartMovesOffAPortAnotherProcessHolds(t *testing.T) {
	t.Parallel()
	held := holdPort(t)
	s := &Server{t: t, Dir: t.TempDir()}
	t.Cleanup(s.Kill)
	var picks []int
	// Only a failed bind seen from the exit ("Address already in use")
	// is errPortTaken, which moves to the next port; an answer waited out
	// fails the start (t.Fatalf). So a second pick proves the exit was
	// seen, without timing it (the machine may be busy).
	s.startOnFreePort(heldFirst(t, held, &picks))
	require.Len(t, picks, 2)
	require.NotEqual(t, "127.0.0.1:"+strconv.Itoa(held), s.Addr)
	pid, err := pidAt(s.Addr)
	require.NoError(t, err)
	require.Equal(t, s.cmd.Process.Pid, pid)
}

// A Cluster node whose bus port (port + 10000) another process holds
// moves to another port too.
func TestClusterNodeMovesOffATakenBusPort(t *testing.T) {
	t.Parallel()
	var port int
	for {
		port = freePorts(t, 1, true)[0]
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err == nil {
			t.Cleanup(func() { _ = l.Close() })
			break
		}
	}
	s := &Server{t: t, Dir: t.TempDir(), extra: slices.Concat(dataNodeArgs, clusterNodeArgs)}
	t.Cleanup(s.Kill)
	var picks []int
	s.startOnFreePort(heldFirst(t, port, &picks))
	require.Len(t, picks, 2)
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(picks[1]), s.Addr)
	rdb := quickClient(s.Addr)
	defer rdb.Close()
	info, err := rdb.ClusterInfo(context.Background()).Result()
	require.NoError(t, err)
	require.Contains(t, info, "cluster_known_nodes:1", "a cluster node answers CLUSTER INFO")
}

// A sentinel on a port another process holds moves to another port.
func TestSentinelMovesOffATakenPort(t *testing.T) {
	t.Parallel()
	held := holdPort(t)
	sp, err := startSentinelOnFreePort(t, held, "127.0.0.1:1")
	require.NoError(t, err)
	require.NotEqual(t, "127.0.0.1:"+strconv.Itoa(held), sp.addr)
	require.NoError(t, sp.answersItself())
}
