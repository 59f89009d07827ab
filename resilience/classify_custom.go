package resilience

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"syscall"
)

// CustomRule is an operator's classifier rule (config classifier.rules):
// a failure that matches every matcher the rule sets gets Class. A rule
// with no matcher never matches (config refuses one).
//
// Configured rules are checked before any other evidence but a
// cancellation: before the runner's own verdict (Failure.Class), the Go
// error chain, the status and the built-in text table. The first rule that
// matches wins.
type CustomRule struct {
	// Name is shown by Explain (and inspector classify); it may be empty.
	Name string
	// Class is the verdict when the rule matches. It must be a valid class
	// other than canceled.
	Class Class
	// Status, when not empty, requires the failure's status (Failure.Status:
	// the HTTP status, or an exec agent's ActionResponse code) to be one of
	// these.
	Status []int
	// Header, when not empty, requires each named response header (the
	// canonical name, http.CanonicalHeaderKey) to have a value the regexp
	// matches; an absent header does not match.
	Header map[string]*regexp.Regexp
	// Text, when set, must match the failure's message: err.Error(), the
	// text task history and dead letters show ("status 500: {…}", "agent
	// exited with code 137: …"), bounded as the built-in table bounds it.
	Text *regexp.Regexp
	// ExitCode, when not empty, requires the exec agent's exit status (see
	// ExitCodeOf: a death by signal N is 128+N) to be one of these.
	ExitCode []int
}

// empty reports whether the rule has no matcher.
func (r *CustomRule) empty() bool {
	return len(r.Status) == 0 && len(r.Header) == 0 && r.Text == nil && len(r.ExitCode) == 0
}

// matches reports whether every matcher of r matches (AND).
func (r *CustomRule) matches(status int, hdr http.Header, text string, exit int, exitOK bool) bool {
	if r.empty() || !r.Class.Valid() || r.Class == Canceled {
		return false
	}
	if len(r.Status) > 0 && !slices.Contains(r.Status, status) {
		return false
	}
	if len(r.ExitCode) > 0 && (!exitOK || !slices.Contains(r.ExitCode, exit)) {
		return false
	}
	for name, re := range r.Header {
		vals := hdr.Values(name)
		if len(vals) == 0 || !slices.ContainsFunc(vals, re.MatchString) {
			return false
		}
	}
	return r.Text == nil || r.Text.MatchString(text)
}

// matchCustom returns the index of the first configured rule that matches
// err, or -1. text is err's (bounded) message.
func (c Classifier) matchCustom(err error, f *Failure, text string) int {
	if len(c.Custom) == 0 {
		return -1
	}
	status := 0
	var hdr http.Header
	if f != nil {
		status, hdr = f.Status, f.Header
	}
	exit, exitOK := ExitCodeOf(err)
	for i := range c.Custom {
		if c.Custom[i].matches(status, hdr, text, exit, exitOK) {
			return i
		}
	}
	return -1
}

// ExitStatus is a process's exit status as an error, for callers that know
// an exit code but hold no *exec.ExitError (inspector classify
// --exit-code). Its message is the one *exec.ExitError prints.
type ExitStatus struct{ Code int }

func (e *ExitStatus) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode returns the code (the method *exec.ExitError has too).
func (e *ExitStatus) ExitCode() int { return e.Code }

// ExitCodeOf returns the exit status of the process whose exit is in err's
// chain (an *exec.ExitError, an *ExitStatus, or any error with an
// ExitCode() int method): its exit code, or 128+N for a death by signal N,
// as a shell reports it (SIGKILL, the OOM killer's signal, is 137). ok is
// false when the chain holds no exit: the failure is not an exec agent's
// death (an exec agent that printed a valid ActionResponse reports that
// instead, whatever its exit status).
func ExitCodeOf(err error) (code int, ok bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ProcessState != nil {
		if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS && ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return ee.ExitCode(), true
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode(), true
	}
	return 0, false
}

// MatchSource says where the evidence that decided a verdict came from.
type MatchSource string

// The sources of a Match.
const (
	// MatchConfig is an operator's rule (Classifier.Custom, config
	// classifier.rules).
	MatchConfig MatchSource = "config"
	// MatchBuiltin is anything else: the built-in text table, the status
	// table, the Go error chain, the runner's own verdict, the fallback.
	MatchBuiltin MatchSource = "builtin"
)

// Match names the evidence that decided a verdict (see Explain).
type Match struct {
	// Source is MatchConfig or MatchBuiltin; "" for a nil error.
	Source MatchSource
	// Index is the configured rule's index in Classifier.Custom (its
	// classifier.rules[i]); -1 for a built-in match.
	Index int
	// Name is the configured rule's name (may be empty) or, for a built-in
	// match, the text table rule's name (TextRule.Name, e.g. "quota") or
	// the step: "context canceled", "runner verdict", "connect timeout",
	// "deadline", "status 503", "go error chain", "no rule matched".
	Name string
	// By is the kind of evidence (Verdict.By).
	By Evidence

	weak bool // a model verdict below strongModelProb (Verdict.Weak)
}

// String renders m for people: "config classifier.rules[2] (name)",
// "builtin quota".
func (m Match) String() string {
	switch m.Source {
	case MatchConfig:
		s := fmt.Sprintf("config classifier.rules[%d]", m.Index)
		if m.Name != "" {
			s += " (" + m.Name + ")"
		}
		return s
	case MatchBuiltin:
		return "builtin " + m.Name
	}
	return ""
}

// builtin records a built-in match decided by evidence of kind by.
func (m *Match) builtin(name string, by Evidence) {
	*m = Match{Source: MatchBuiltin, Index: -1, Name: name, By: by}
}

// builtinRule records a text table rule's match (byCode: by a JSON body's
// code, which is structure), or the status table's.
func (m *Match) builtinRule(r *TextRule, byCode bool, status int) {
	switch {
	case r != nil && byCode:
		m.builtin(r.Name, ByStructure)
	case r != nil:
		m.builtin(r.Name, ByText)
	default:
		m.builtin(fmt.Sprintf("status %d", status), ByStatus)
	}
}

// Explain classifies err exactly as Classify does and says which evidence
// decided: a configured rule (with its index) or a built-in one.
func (c Classifier) Explain(err error) (Verdict, Match) {
	return c.classify(err)
}
