package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"github.com/agentq/agentq/internal/procgroup/guard"
)

// GuardName is the argv[0] under which this binary runs as a group's guard.
const GuardName = guard.Name

// lifeline is the pipe every guard of this process reads. Its write end is
// never closed: the package variable keeps it (and its finalizer) alive
// for the life of the process, and O_CLOEXEC keeps it out of every
// program this process starts.
var lifeline struct {
	once sync.Once
	r, w *os.File
	exe  string
	err  error
}

func guardSetup() (*os.File, string, error) {
	lifeline.once.Do(func() {
		lifeline.exe = "/proc/self/exe" // this binary even if its file was replaced since
		if _, err := os.Stat(lifeline.exe); err != nil {
			if lifeline.exe, err = os.Executable(); err != nil {
				lifeline.err = err
				return
			}
		}
		lifeline.r, lifeline.w, lifeline.err = os.Pipe()
	})
	return lifeline.r, lifeline.exe, lifeline.err
}

// Group is one command's process group; the zero value is ready for Start.
// Start and Wait must be called on the same goroutine; Signal may be
// called from any goroutine (a Cmd.Cancel function, a timer).
type Group struct {
	cmd   *exec.Cmd
	guard *exec.Cmd
	pgid  int

	mu   sync.Mutex
	done bool // Wait has killed the group: Signal must not reach a reused ID
}

// Start starts cmd in a new process group led by a guard, with SIGKILL as
// its parent-death signal, and locks the calling goroutine to its thread
// until Wait. cmd.SysProcAttr's Setpgid, Pgid and Pdeathsig are set here.
// A failure to start the guard is ErrGuard; a failure to start cmd is
// exec.Cmd.Start's error as it is.
func (g *Group) Start(cmd *exec.Cmd) error {
	r, exe, err := guardSetup()
	if err != nil {
		return guardError(err)
	}
	gc := &exec.Cmd{
		Path:        exe,
		Args:        []string{guard.Name},
		Env:         []string{},
		Dir:         "/",
		ExtraFiles:  []*os.File{r},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := gc.Start(); err != nil {
		return guardError(err)
	}
	g.guard, g.pgid, g.cmd = gc, gc.Process.Pid, cmd

	attr := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.Setpgid, attr.Pgid, attr.Pdeathsig = true, g.pgid, syscall.SIGKILL
	cmd.SysProcAttr = &attr
	runtime.LockOSThread() // the fork's thread must outlive the command (Pdeathsig)
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		g.end()
		return err
	}
	return nil
}

// Signal sends sig to every process of the group. It answers
// os.ErrProcessDone once the group is gone or Wait has ended it.
func (g *Group) Signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done || g.pgid == 0 {
		return os.ErrProcessDone
	}
	err := syscall.Kill(-g.pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Wait waits for the command (exec.Cmd.Wait, whose error it returns),
// unlocks the goroutine from its thread, SIGKILLs whatever is left of the
// group (its guard included) and reaps the guard.
func (g *Group) Wait() error {
	err := g.cmd.Wait()
	runtime.UnlockOSThread()
	g.end()
	return err
}

// end SIGKILLs the group and reaps its guard. The guard leads the group
// until it is reaped, so the group's ID cannot have been reused.
func (g *Group) end() {
	g.mu.Lock()
	g.done = true
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	g.mu.Unlock()
	_ = g.guard.Wait()
}

// Pgid is the group's ID (its guard's PID); zero before Start.
func (g *Group) Pgid() int { return g.pgid }
