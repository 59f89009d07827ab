package delivery

import (
	"os"
	"syscall"
)

// FailpointEnv names the environment variable that arms a failpoint.
//
// This is a TEST HOOK. When AGENTQ_FAILPOINT holds the name of a failpoint,
// the worker kills its own process with SIGKILL the moment it reaches that
// point, so crash tests can hit a precise window (for example, between
// scheduling a restart and acknowledging the run to asynq) deterministically.
// It is never set in production; unset, a failpoint costs one environment
// lookup.
//
// Failpoints:
//
//	after_restart_scheduled  in the restart branch of the pipeline, after the
//	                         restart is scheduled and the "restarting"
//	                         transition is written, before the handler
//	                         returns (asynq still holds the run's lease)
//	before_restart_recorded  after the restart is scheduled, before its
//	                         "restarting" transition is written
//	after_success_recorded   after a success is written, before asynq's ack
//	before_dead_letter_recorded
//	                         after the dead letter is stored, before the
//	                         task record is marked dead_lettered
//	after_dead_letter_recorded
//	                         after both, before asynq's ack
//	call_started             as an agent call starts, just before the
//	                         runner runs (on a first delivery, before the
//	                         attempt's start is written beginGrace into
//	                         the call)
const FailpointEnv = "AGENTQ_FAILPOINT"

// failpoint kills the process with SIGKILL when AGENTQ_FAILPOINT equals name
// (a test hook; see FailpointEnv). SIGKILL runs no deferred functions and no
// shutdown: the process dies as in a crash.
func failpoint(name string) {
	if os.Getenv(FailpointEnv) != name {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not catchable; never go on past the failpoint
}
