package delivery

import (
	"encoding/json"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// attemptKind is what became of an attempt.
type attemptKind int

const (
	// attemptNotRun: the delivery must not run (stale, already ended,
	// canceled, Redis away): answer is ProcessTask's.
	attemptNotRun attemptKind = iota
	// attemptCalled: the agent was called and answered (a result or a
	// failure, in call): settle decides what follows.
	attemptCalled
	// A suspended attempt (the agent waits for something: durable runs'
	// steps and child tasks) will be a kind of its own, settled apart.
)

// attemptResult is the outcome of one attempt: its kind, and for a called
// attempt what settle needs.
type attemptResult struct {
	kind   attemptKind
	answer error         // attemptNotRun: ProcessTask's answer
	n      int           // the attempt's number within its run
	start  *attemptStart // the attempt's start in the record
	served *Spec         // the agent that served the attempt's last call
	why    string        // why the call went to served, a fallback agent ("": the task's agent)
	call   callResult
}

// report is what the attempt's events say of its last call.
func (a *attemptResult) report(p *Executor, env *tasks.Envelope) record.Attempt {
	rep := a.call.report(env, a.served, a.n, p.workerID)
	rep.Fallback = a.why
	return rep
}

// callResult is the outcome of one call of an agent.
type callResult struct {
	data    json.RawMessage
	verdict resilience.Verdict
	errText string
	elapsed time.Duration
	// deadline: the task's deadline cut the call (class timeout).
	deadline bool
	// usage is what the call reported it used, priced (zero: nothing
	// reported), and system the provider its reply's shape names.
	usage  usage.Usage
	system string
}

// report is what the events of the call, attempt n of env's run, served
// by agent served, say of it.
func (c callResult) report(env *tasks.Envelope, served *Spec, n int, worker string) record.Attempt {
	return record.Attempt{Attempt: n, Restart: env.Restarts, Agent: served.name, Worker: worker,
		ErrorClass: string(c.verdict.Class), Error: c.errText, Duration: c.elapsed, Usage: c.usage}
}

// notRun is an attempt that must not run, answered with answer.
func notRun(answer error) *attemptResult { return &attemptResult{kind: attemptNotRun, answer: answer} }
