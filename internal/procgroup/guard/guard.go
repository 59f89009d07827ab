//go:build linux

// Package guard is the guard of a procgroup.Group, run by this binary
// re-executed under the name Name (see internal/procgroup). Its init
// function recognizes that name before main runs. The package imports
// almost nothing, so that the Go runtime initializes it among the first
// and the guard skips most of the binary's package initialization
// (about a millisecond and a half of the worker's).
package guard

import (
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Name is the argv[0] under which this binary runs as a group's guard.
const Name = "agentq-procgroup-guard"

// FD is the lifeline's file descriptor in a guard (the Cmd's ExtraFiles[0]).
const FD = 3

func init() {
	if len(os.Args) == 1 && os.Args[0] == Name {
		os.Exit(run())
	}
}

// run waits for the lifeline to close, then SIGKILLs its process group.
// It refuses to run (exit 2) unless it leads its group and fd 3 is a
// pipe, so starting the binary under this name by hand kills nothing.
func run() int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	var st syscall.Stat_t
	if err := syscall.Fstat(FD, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return 2
	}
	if syscall.Getpgrp() != syscall.Getpid() {
		return 2
	}
	// Nothing is ever written: the read returns at end of file, when every
	// write end is closed, that is when the process that started the
	// group has died. (An error other than EOF ends the wait too: better a
	// killed group than an unguarded one.)
	_, _ = io.Copy(io.Discard, os.NewFile(FD, "lifeline"))
	_ = syscall.Kill(0, syscall.SIGKILL) // the group, this guard included
	return 0
}
