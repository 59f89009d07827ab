package agent

import (
	"context"
	"encoding/json"
)

// Request is the ActionRequest handed to an agent: on stdin for exec agents,
// as the POST body for http agents, as the argument for Go functions.
type Request struct {
	TaskID        string          `json:"task_id"`
	Agent         string          `json:"agent"`
	Action        string          `json:"action"`
	Params        json.RawMessage `json:"params"`
	CorrelationID string          `json:"correlation_id"`
	Attempt       int             `json:"attempt"`
	Restart       int             `json:"restart"`
	// Traceparent and Tracestate are the W3C trace context of the attempt
	// (the worker's attempt span; when the worker does not trace, the
	// producer's context the task carries), so that the agent's own spans
	// join the task's trace; empty when the task is not traced. HTTP
	// agents also get them as the traceparent and tracestate headers.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
	// Emit, when set, takes the call's live output events as they come
	// (typ EventProgress or EventOutput, data its JSON): the worker sets it
	// per call and records them in the task's output (DESIGN.md "Live
	// output from agents"). Exec agents write them to the descriptor named
	// by AGENTQ_EVENTS_FD, HTTP agents' streamed replies are relayed, Go
	// functions call it (or EmitJSON) themselves. It never blocks and may
	// be called from any goroutine until Run returns; not part of the
	// ActionRequest's JSON.
	Emit func(typ string, data json.RawMessage) `json:"-"`
	// Steps are the steps the task's agents recorded so far (name ->
	// data; omitted when none): the agent skips the work they stand for
	// (see Step).
	Steps map[string]json.RawMessage `json:"steps,omitempty"`
	// RecordStep, when set, records one step of the call durably and
	// returns once it is written, or with why it was not (a cap, a
	// delivery no longer current): the worker sets it per call. Exec
	// agents' step lines and Go agents' Step reach it in the order they
	// come, in order with the call's Emit events. Not part of the
	// ActionRequest's JSON.
	RecordStep func(ctx context.Context, s StepEvent) error `json:"-"`
	// Resume is how many times the task's runs suspended and resumed (0
	// on a run that follows no suspend; Attempt counts from 1 again in
	// every run: a resume uses no retry). Wait is the wait that ended
	// (every attempt of a resumed run gets it; nil otherwise) and Signals
	// the signals sent to the task so far (name -> data; omitted when
	// none). See Suspend.
	Resume  int                        `json:"resume,omitempty"`
	Wait    *WaitResult                `json:"wait,omitempty"`
	Signals map[string]json.RawMessage `json:"signals,omitempty"`
	// Children are, in a run resumed from a children wait (every attempt
	// of it), how that wait's children ended, in spawn order (a child
	// that had not ended when the wait timed out, or that a mode any
	// wait did not need, has its state then); omitted otherwise.
	Children []ChildEnd `json:"children,omitempty"`
}

// ChildEnd is how one child of a children wait ended: its ID, its name
// when its spec gave one, its state (succeeded, dead_lettered, canceled;
// another state when the wait timed out before it ended), its result
// when it succeeded, and its error class and error when it did not.
type ChildEnd struct {
	ID         string          `json:"id"`
	Name       string          `json:"name,omitempty"`
	State      string          `json:"state"`
	Result     json.RawMessage `json:"result,omitempty"`
	ErrorClass string          `json:"error_class"`
	Error      string          `json:"error"`
}

// Response is the ActionResponse an exec agent prints on stdout.
type Response struct {
	Status string          `json:"status"` // "success", "error" or "suspend"
	Code   int             `json:"code"`
	Data   json.RawMessage `json:"data,omitempty"`
	Error  string          `json:"error"`
	// Usage is what the call used, for token limits: a number of tokens or
	// an object with total_tokens (or input_tokens and output_tokens).
	// Optional.
	Usage json.RawMessage `json:"usage,omitempty"`
	// Wait is a suspend's wait (see Wait's JSON).
	Wait json.RawMessage `json:"wait,omitempty"`
	// RetryAfter is, on an "error" reply, how long the backend asked to
	// wait before the next call, honoured as an HTTP agent's Retry-After
	// is: a JSON number of seconds (≥ 0, fractional allowed) or a string
	// holding seconds, an RFC 3339 time or an HTTP date. It wins over a
	// Retry-After or retry-after-ms in Headers. An invalid one is ignored
	// (and logged); the failure is classified as usual. Optional.
	RetryAfter json.RawMessage `json:"retry_after,omitempty"`
	// Headers are the backend reply's headers, name → value, for the
	// classifier and the provider pauses: only the back-pressure headers
	// are kept (resilience.BackPressureHeader: Retry-After,
	// retry-after-ms, x-should-retry, x-ratelimit-*,
	// anthropic-ratelimit-*), the rest is dropped. Optional.
	Headers ReplyHeaders `json:"headers,omitempty"`
}

// ReplyHeaders are an ActionResponse's headers. Decoding is lenient, so
// that a malformed entry never costs the reply: a string value is kept,
// a number is kept as its JSON text, any other value is dropped, and a
// field that is not an object decodes as none.
type ReplyHeaders map[string]string

// UnmarshalJSON decodes b leniently (see ReplyHeaders); it never fails.
func (h *ReplyHeaders) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil || len(raw) == 0 {
		*h = nil
		return nil
	}
	out := make(ReplyHeaders, len(raw))
	for name, v := range raw {
		if s, ok := headerValue(v); ok {
			out[name] = s
		}
	}
	*h = out
	return nil
}

// headerValue is a header's value from its JSON: a string's, a number's
// text; ok is false for anything else (null, booleans, objects, lists).
func headerValue(v json.RawMessage) (string, bool) {
	if len(v) > 0 && v[0] == '"' {
		var s string
		return s, json.Unmarshal(v, &s) == nil
	}
	var n json.Number
	if json.Unmarshal(v, &n) != nil || n == "" {
		return "", false
	}
	return n.String(), true
}

// Runner runs one attempt of a task. It returns the result data on success.
// On failure it returns an error, usually a *resilience.Failure carrying the
// status, headers and error text the classifier needs. A Runner must return
// promptly once ctx is done and must leave no process behind.
type Runner interface {
	Run(ctx context.Context, req Request) (json.RawMessage, error)
}

// Func adapts a Go function to a Runner: the way library users register
// agents written in Go.
type Func func(ctx context.Context, req Request) (json.RawMessage, error)

// Run calls f.
func (f Func) Run(ctx context.Context, req Request) (json.RawMessage, error) { return f(ctx, req) }
