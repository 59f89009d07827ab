//go:build linux

package procgroup_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/procgroup"
	"github.com/agentq/agentq/internal/testbin"
)

// starterEnv makes this test binary a starter (see TestMain): it starts
// groups running the command in starterCmd, one per pid file named in
// starterPIDs (comma-separated), writes the groups' IDs to starterPgids,
// and waits for ever.
const (
	starterEnv   = "PROCGROUP_TEST_STARTER"
	starterCmd   = "PROCGROUP_TEST_CMD"
	starterPIDs  = "PROCGROUP_TEST_PID_FILES"
	starterPgids = "PROCGROUP_TEST_PGID_FILE"
)

func TestMain(m *testing.M) {
	if os.Getenv(starterEnv) != "" {
		starter()
		return
	}
	os.Exit(m.Run())
}

func starter() {
	files := strings.Split(os.Getenv(starterPIDs), ",")
	pgids := make(chan int)
	for _, f := range files {
		go func() {
			var g procgroup.Group
			cmd := exec.Command(os.Getenv(starterCmd), "hang", "children=2", "ignore_term=true", "pid_file="+f)
			cmd.Env = []string{}
			if err := g.Start(cmd); err != nil {
				fmt.Fprintln(os.Stderr, "starter:", err)
				os.Exit(2)
			}
			pgids <- g.Pgid()
			_ = g.Wait()
		}()
	}
	var out []string
	for range files {
		out = append(out, strconv.Itoa(<-pgids))
	}
	if err := os.WriteFile(os.Getenv(starterPgids), []byte(strings.Join(out, "\n")), 0o644); err != nil {
		os.Exit(2)
	}
	select {} // the Wait goroutines keep the runtime from calling this a deadlock
}

func testAgent(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "github.com/agentq/agentq/internal/testagent")
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return !(i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X'))
}

func readInts(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		out = append(out, n)
	}
	return out
}

// members lists the processes of process group pgid, from /proc.
func members(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestGroupsDieWithTheirStarter (#23 item 1): a process that started 4
// groups (each an agent and 2 children, all ignoring SIGTERM) is
// SIGKILLed: within 2 s not one process of any group runs, guards
// included.
func TestGroupsDieWithTheirStarter(t *testing.T) {
	t.Parallel()
	agent := testAgent(t)
	dir := t.TempDir()
	var files []string
	for i := range 4 {
		files = append(files, filepath.Join(dir, fmt.Sprintf("pids-%d", i)))
	}
	pgidFile := filepath.Join(dir, "pgids")
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = []string{starterEnv + "=1", starterCmd + "=" + agent, starterPIDs + "=" + strings.Join(files, ","), starterPgids + "=" + pgidFile}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })

	require.Eventually(t, func() bool {
		for _, f := range append(files, pgidFile) {
			if _, err := os.Stat(f); err != nil {
				return false
			}
		}
		return true
	}, 60*time.Second, 10*time.Millisecond, "the starter's groups to start: %s", &stderr)
	pgids := readInts(t, pgidFile)
	var pids []int
	for _, pgid := range pgids {
		m := members(pgid)
		require.Len(t, m, 4, "group %d: a guard, an agent, 2 children", pgid)
		pids = append(pids, m...)
	}
	for _, f := range files {
		pids = append(pids, readInts(t, f)...)
	}

	killed := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-waited
	deadline := killed.Add(2 * time.Second)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			t.Logf("%d processes of %d groups gone %s after the starter's SIGKILL", len(pids), len(pgids), time.Since(killed).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes %v outlived their starter by 2s", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGroupSignalAndWait: Signal reaches the command and its children but
// not the guard, which keeps the group; Wait leaves no process of the
// group, and a Signal after Wait is os.ErrProcessDone.
func TestGroupSignalAndWait(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	var g procgroup.Group
	cmd := exec.Command(testAgent(t), "hang", "children=2", "pid_file="+pidFile) // the agent exits on SIGTERM, its children do not
	require.NoError(t, g.Start(cmd))
	require.Eventually(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, 30*time.Second, 5*time.Millisecond)
	kids := readInts(t, pidFile)
	require.ElementsMatch(t, append([]int{g.Pgid(), cmd.Process.Pid}, kids...), members(g.Pgid()))

	require.NoError(t, g.Signal(syscall.SIGTERM))
	err := g.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, syscall.SIGTERM, ee.Sys().(syscall.WaitStatus).Signal())
	require.False(t, alive(g.Pgid()), "Wait reaps the guard")
	require.Eventually(t, func() bool { // SIGKILLed by Wait, dying
		for _, pid := range kids {
			if alive(pid) {
				return false
			}
		}
		return true
	}, 2*time.Second, 5*time.Millisecond, "children %v outlived Wait", kids)
	require.ErrorIs(t, g.Signal(syscall.SIGTERM), os.ErrProcessDone)
}

// TestGroupStartFailure: a command that cannot start fails Start with
// exec's own error (a caller still classifies it), and its guard is gone.
func TestGroupStartFailure(t *testing.T) {
	t.Parallel()
	var g procgroup.Group
	err := g.Start(exec.Command(filepath.Join(t.TempDir(), "missing")))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NotErrorIs(t, err, procgroup.ErrGuard)
	require.NotZero(t, g.Pgid())
	require.False(t, alive(g.Pgid()), "the guard outlived a failed Start")
}

// TestGuardRefusesToRunByHand: the binary started under the guard's name
// without a lifeline kills nothing and exits 2.
func TestGuardRefusesToRunByHand(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := &exec.Cmd{Path: self, Args: []string{procgroup.GuardName}, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	err = cmd.Run()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, 2, ee.ExitCode())
}

// TestGroupPassesExtraFiles (#26): a command's ExtraFiles reach it
// through the guard (an exec agent's events pipe is its descriptor 3),
// and the guard does not hold the pipe: it ends when the command does.
func TestGroupPassesExtraFiles(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	var g procgroup.Group
	cmd := exec.Command("/bin/sh", "-c", "echo events >&3")
	cmd.ExtraFiles = []*os.File{w}
	require.NoError(t, g.Start(cmd))
	require.NoError(t, w.Close())
	done := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(r); done <- b }() // EOF once the command is gone
	// Before Wait: the guard still runs, and must not hold the pipe.
	select {
	case b := <-done:
		require.Equal(t, "events\n", string(b))
	case <-time.After(30 * time.Second):
		t.Fatal("the pipe did not end with the command: another process (the guard?) holds it")
	}
	require.NoError(t, g.Wait())
}
