//go:build unix && !linux

package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// Group is one command's process group; the zero value is ready for Start.
// Outside Linux the command leads its group and nothing guards it against
// the death of the process that started it (see the package comment).
type Group struct {
	cmd *exec.Cmd

	mu   sync.Mutex
	done bool
}

// Start starts cmd as the leader of a new process group.
func (g *Group) Start(cmd *exec.Cmd) error {
	attr := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.Setpgid, attr.Pgid = true, 0
	cmd.SysProcAttr = &attr
	g.cmd = cmd // before Start: a Cancel function may call Signal at once
	return cmd.Start()
}

// Signal sends sig to every process of the group; os.ErrProcessDone once
// the group is gone or Wait has ended it.
func (g *Group) Signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done || g.cmd == nil || g.cmd.Process == nil {
		return os.ErrProcessDone
	}
	err := syscall.Kill(-g.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Wait waits for the command, then SIGKILLs whatever is left of the group.
func (g *Group) Wait() error {
	err := g.cmd.Wait()
	g.mu.Lock()
	g.done = true
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	g.mu.Unlock()
	return err
}

// Pgid is the group's ID (the command's PID); zero before Start.
func (g *Group) Pgid() int {
	if g.cmd == nil || g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}
