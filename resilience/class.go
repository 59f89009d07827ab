package resilience

import (
	"fmt"
	"net/http"
	"time"
)

// Class is the stable name of an error class. The names are part of the
// public contract (config keys, JSON output, metrics labels).
type Class string

// The error classes of DESIGN.md §2.
const (
	NetworkTransient Class = "network_transient"
	NetworkPermanent Class = "network_permanent"
	Timeout          Class = "timeout"
	RateLimited      Class = "rate_limited"
	QuotaExhausted   Class = "quota_exhausted"
	ProviderError    Class = "provider_error"
	ContextLength    Class = "context_length"
	InvalidRequest   Class = "invalid_request"
	NotSupported     Class = "not_supported"
	LogicError       Class = "logic_error"
	Canceled         Class = "canceled"
)

// Classes lists every class in a stable order.
func Classes() []Class {
	return []Class{
		NetworkTransient, NetworkPermanent, Timeout, RateLimited, QuotaExhausted,
		ProviderError, ContextLength, InvalidRequest, NotSupported, LogicError, Canceled,
	}
}

// Valid reports whether c is one of the known classes.
func (c Class) Valid() bool {
	for _, k := range Classes() {
		if k == c {
			return true
		}
	}
	return false
}

// ParseClass returns the class named s, or an error naming the valid ones.
func ParseClass(s string) (Class, error) {
	c := Class(s)
	if !c.Valid() {
		return "", fmt.Errorf("unknown error class %q (want one of %v)", s, Classes())
	}
	return c, nil
}

// Failure describes a failed agent call with everything the classifier may
// look at. Runners (exec, http) return a *Failure; Go-function agents may
// return one too, or any error (the classifier then walks the error chain).
//
// The zero value of every field means "not known".
type Failure struct {
	// Err is the Go error behind the failure (transport, context, exec), if any.
	Err error
	// Status is the HTTP status, or the ActionResponse code of an exec agent.
	Status int
	// Header holds the HTTP response headers (Retry-After, retry-after-ms,
	// x-should-retry, …).
	Header http.Header
	// Text is the error text: an ActionResponse's error, the tail of a tool's
	// stderr, or a provider's response body (capped by the runner).
	Text string
	// Class, when set, is the runner's own verdict (for example logic_error for
	// output that is not an ActionResponse) and is used as is.
	Class Class
}

// Error renders the failure for logs and history; it never includes headers
// (they may carry credentials).
func (f *Failure) Error() string {
	msg := ""
	if f.Status != 0 {
		msg = fmt.Sprintf("status %d", f.Status)
	}
	if f.Text != "" {
		if msg != "" {
			msg += ": "
		}
		msg += f.Text
	}
	if f.Err != nil {
		if msg != "" {
			msg += ": "
		}
		msg += f.Err.Error()
	}
	if msg == "" {
		msg = "agent failed"
	}
	return msg
}

// Unwrap returns the underlying Go error.
func (f *Failure) Unwrap() error { return f.Err }

// WithClass wraps err so that the classifier returns class for it. It is how
// a Go-function agent states its own verdict.
func WithClass(err error, class Class) error {
	if err == nil {
		return nil
	}
	return &Failure{Err: err, Class: class}
}

// Verdict is the classifier's answer.
type Verdict struct {
	Class Class
	// RetryAfter is the delay the backend asked for (Retry-After,
	// retry-after-ms, or a "try again in Ns" text); 0 when none.
	RetryAfter time.Duration
	// ShouldRetry is the backend's explicit x-should-retry header: +1 true,
	// -1 false, 0 absent.
	ShouldRetry int
	// By names the kind of evidence that decided Class (history and dead
	// letters' classified_by); "" for a nil error.
	By Evidence
	// Weak reports a verdict an operator should look at: nothing decided it
	// (ByDefault) or the model was unsure. Weak failures are listed by
	// `inspector classify --unmatched` and counted per agent.
	Weak bool
}

// Evidence is the kind of evidence that decided a verdict: the stable
// values of classified_by.
type Evidence string

// The kinds of evidence, strongest first.
const (
	// ByRule: an operator's rule (config classifier.rules).
	ByRule Evidence = "rule"
	// ByStructure: structure the failure carries — the runner's own verdict,
	// the Go error chain (timeouts, DNS, TLS, errnos), an exec agent's exit
	// status or signal, a JSON error body's type/code/status, an SDK
	// exception's class name, a gRPC status code, a cancellation.
	ByStructure Evidence = "structure"
	// ByStatus: the HTTP status (or an exec agent's code) alone.
	ByStatus Evidence = "status"
	// ByText: a phrase of the built-in text table.
	ByText Evidence = "text"
	// ByModel: the learned model, for text the tables leave open.
	ByModel Evidence = "model"
	// ByDefault: nothing decided; the class is the evidence-dependent
	// default.
	ByDefault Evidence = "default"
)

// Evidences lists the kinds of evidence, strongest first.
func Evidences() []Evidence {
	return []Evidence{ByRule, ByStructure, ByStatus, ByText, ByModel, ByDefault}
}
