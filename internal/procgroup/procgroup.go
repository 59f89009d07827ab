// Package procgroup runs a subprocess (an exec agent, a health-probe
// command) in a process group of its own that does not outlive the
// process that started it.
//
// Group.Start starts the command as a member of a new process group;
// Group.Signal signals the whole group; Group.Wait waits for the command,
// then SIGKILLs whatever is left of the group. Between Start and Wait the
// group belongs to the caller, who may die at any moment (SIGKILL, the
// out-of-memory killer, a panic): on Linux the group is then SIGKILLed
// within milliseconds, children and grandchildren included, whatever they
// do with SIGTERM. Two mechanisms make it so:
//
//   - a guard. The group's leader is not the command but a guard: this
//     very binary re-executed (/proc/self/exe) under the name GuardName,
//     which an init function of package guard recognizes before main runs.
//     The guard holds the read end of a pipe (the lifeline) whose only
//     write end stays open in the starting process for its whole life, and
//     blocks reading it. The kernel closes the write end when that process
//     dies, however it dies; the guard's read then returns end of file and
//     it SIGKILLs its group (itself included). One pipe serves every group
//     of the process; a guard costs a fork and exec of this binary (about a
//     millisecond) and its Go runtime's memory. The guard ignores SIGTERM,
//     SIGINT, SIGHUP and SIGQUIT, so Signal's SIGTERM reaches the command
//     and its children only; it dies with the group's SIGKILL in Wait.
//   - a parent-death signal. The command itself gets PR_SET_PDEATHSIG
//     SIGKILL. The kernel sends it when the *thread* that forked the
//     command exits, not the process, and Go runs goroutines on any
//     thread: Start therefore locks the calling goroutine to its OS thread
//     (runtime.LockOSThread) before the fork and Wait unlocks it after the
//     command is reaped, so the forking thread lives exactly as long as the
//     command needs it (a locked thread never runs anything else, and Go
//     ends a thread only when a goroutine exits while locked to it). Start
//     and Wait must be called on the same goroutine. It covers the
//     command's leader even if the guard was killed on its own.
//
// A process that leaves the group (setsid, setpgid) escapes both, as it
// escapes the group's SIGTERM and SIGKILL; so does a process started from
// a fork of the starting process that did not exec (such a fork would
// also hold the lifeline open). Elsewhere than on Linux there is no guard
// and no parent-death signal: the command leads its own group, Signal and
// Wait behave the same, and a group outlives a starting process that dies
// without calling Wait.
package procgroup

import (
	"errors"
	"fmt"
)

// ErrGuard wraps a failure to start a group's guard (the binary could not
// re-execute itself: no /proc, a process limit, …). The command was not
// started.
var ErrGuard = errors.New("procgroup: start guard")

func guardError(err error) error { return fmt.Errorf("%w: %w", ErrGuard, err) }
