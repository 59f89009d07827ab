package redistest

import (
	"net"
	"strconv"
	"testing"

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
