package redistest

import (
	"context"
	"net"
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
