package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/agentq/agentq/resilience"
)

// Agent bytes become valid UTF-8 once, where they enter: an agent may
// write any bytes (an exec agent's stdout, stderr and events pipe, an
// HTTP agent's body and stream, a Go function's return), but what a
// runner hands back (its result, its live events, its failure's text
// and error) is valid UTF-8, each invalid sequence replaced by U+FFFD,
// so that the task's JSON, its event stream and its webhook bodies are
// too (DESIGN.md "Exec agent protocol"). Exec and HTTP do it in Run
// (results and errors: validOutcome; events: emitCapped); a Go runner
// gets it from Valid, which the worker wraps every registered Go
// runner in. Anything else that takes agent bytes into a record (steps,
// say) uses ValidJSON and ValidText.

// replacement is U+FFFD, which stands for an invalid sequence.
var replacement = []byte(string(utf8.RuneError))

// ValidJSON returns data with each run of invalid UTF-8 replaced by
// U+FFFD; data itself when it is valid (the usual case, checked without
// a copy). Bytes over 0x7F are only legal inside JSON strings, so JSON
// stays JSON: a valid JSON result whose strings held invalid bytes comes
// out as valid UTF-8 JSON whose strings hold U+FFFD. Data that is not
// JSON is made valid UTF-8 alike.
func ValidJSON(data json.RawMessage) json.RawMessage {
	if utf8.Valid(data) {
		return data
	}
	return bytes.ToValidUTF8(data, replacement)
}

// ValidText returns s with each run of invalid UTF-8 replaced by U+FFFD.
func ValidText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, string(replacement))
}

// Valid wraps a runner so that its result, its live events and its
// failure's text and error are valid UTF-8 (ValidJSON, ValidText), and
// its events capped as Exec's and HTTP's are (MaxEventData). *Exec and
// *HTTP, which do it themselves, are returned as they are.
func Valid(r Runner) Runner {
	switch r.(type) {
	case nil, *Exec, *HTTP, validRunner:
		return r
	}
	return validRunner{r: r}
}

type validRunner struct{ r Runner }

// Run runs the wrapped runner with a validating Emit and validates what
// it returns.
func (v validRunner) Run(ctx context.Context, req Request) (json.RawMessage, error) {
	if emit := req.Emit; emit != nil {
		req.Emit = func(typ string, data json.RawMessage) { emitCapped(emit, typ, data) }
	}
	return validOutcome(v.r.Run(ctx, req))
}

// validOutcome is a call's outcome made valid UTF-8: its data
// (ValidJSON) and its error (validError).
func validOutcome(data json.RawMessage, err error) (json.RawMessage, error) {
	return ValidJSON(data), validError(err)
}

// validError returns err with valid UTF-8 texts, never writing to err
// (a Go agent may return one error value from many calls at once): err
// itself when its text is valid; else err wrapped so that its text is
// made valid and errors.As finds a copy of the *resilience.Failure in its
// chain with a valid Text and Err. The wrapper keeps the chain
// (errors.Is, errors.As of any other type).
func validError(err error) error {
	if err == nil {
		return nil
	}
	var failure *resilience.Failure
	if f := (*resilience.Failure)(nil); errors.As(err, &f) && !validFailure(f) {
		g := *f
		g.Text = ValidText(f.Text)
		if g.Err != nil && !utf8.ValidString(g.Err.Error()) {
			g.Err = &validTextError{err: f.Err}
		}
		failure = &g
	}
	if failure == nil && utf8.ValidString(err.Error()) {
		return err
	}
	return &validTextError{err: err, failure: failure}
}

// validFailure reports whether f's Text and its Err's text are valid.
func validFailure(f *resilience.Failure) bool {
	return utf8.ValidString(f.Text) && (f.Err == nil || utf8.ValidString(f.Err.Error()))
}

// validTextError is an error whose text is made valid UTF-8; failure,
// when set, is the valid copy of the *resilience.Failure in its chain.
type validTextError struct {
	err     error
	failure *resilience.Failure
}

func (e *validTextError) Error() string { return ValidText(e.err.Error()) }
func (e *validTextError) Unwrap() error { return e.err }

// As hands out the valid copy of the chain's *resilience.Failure.
func (e *validTextError) As(target any) bool {
	if t, ok := target.(**resilience.Failure); ok && e.failure != nil {
		*t = e.failure
		return true
	}
	return false
}
