package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/resilience"
)

// Suspends: an agent ends its call with a wait instead of a result — a
// sleep, a time, a signal sent to the task (tasks.Client.Signal, POST
// /api/v1/tasks/{id}/signals/{name}) — and the worker ends the run
// without using a retry or a restart: the task is waiting, and its next
// run starts when the wait ends, with Request.Resume, Request.Wait and
// Request.Signals telling it what happened (DESIGN.md "Suspend and
// signals"). The steps recorded before the suspend are kept (Step), so
// the resumed run skips what was done.
//
//   - Exec agents print {"status":"suspend","wait":{…}} as their
//     ActionResponse (usage optional, as in any reply).
//   - HTTP agents answer the same object as their 2xx body.
//   - Go agents return Suspend(w) as their error.

// MaxWait bounds a wait: a sleep, a time or a timeout further than this
// is refused (logic_error). A signal wait without a timeout waits MaxWait.
const MaxWait = 365 * 24 * time.Hour

// Wait is what a suspended run waits for: exactly one of Sleep (a
// duration), Until (a time), Signal (a signal's name; Timeout bounds the
// wait, zero: MaxWait) or Children (child tasks; Mode says when the
// wait ends: "all" of them ended, the default, or "any" succeeded;
// Timeout bounds it, zero: MaxWait). Its JSON
// is the wire shape: {"sleep":"10m"} | {"until":"2026-12-01T00:00:00Z"} |
// {"signal":"approve","timeout":"1h"} | {"children":[…],"mode":"all",
// "timeout":"1h"}; durations are Go duration strings, or a JSON number of
// seconds.
type Wait struct {
	Sleep    time.Duration
	Until    time.Time
	Signal   string
	Timeout  time.Duration
	Children []Child
	// Mode is a children wait's: "all" (the default) or "any".
	Mode string
}

// Child is one child task a children wait starts: the same shape (and
// JSON names) as an enqueue request's task (tasks.Request, the API's
// POST /api/v1/tasks body), with Name added. ID names the child; else
// Name derives it ("<parentID>.<name>"); else its 1-based position
// ("<parentID>.<k>"): stable across a repeated suspend, so a run that
// suspends again enqueues nothing twice. Tenant and Queue default to the
// parent's, CorrelationID to the parent's; Deadline (a Go duration from
// the spawn, or an RFC 3339 time) is at most the parent's. In and
// FailIfUnavailable are refused (invalid suspend): a child starts when
// its parent suspends, breaker open or not (it waits behind it).
type Child struct {
	ID                string          `json:"id,omitempty"`
	Name              string          `json:"name,omitempty"`
	Agent             string          `json:"agent"`
	Action            string          `json:"action,omitempty"`
	Params            json.RawMessage `json:"params,omitempty"`
	CorrelationID     string          `json:"correlation_id,omitempty"`
	Queue             string          `json:"queue,omitempty"`
	Tenant            string          `json:"tenant,omitempty"`
	Priority          string          `json:"priority,omitempty"`
	In                string          `json:"in,omitempty"`
	Deadline          string          `json:"deadline,omitempty"`
	FailIfUnavailable bool            `json:"fail_if_unavailable,omitempty"`
	Notify            []string        `json:"notify,omitempty"`
	// MaxTokens and MaxCostUSD cap the child's usage (0: none); the
	// tree's cap (the root's) holds as well.
	MaxTokens  int64   `json:"max_tokens,omitempty"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// The wait kinds (Wait.Kind, WaitResult.Kind).
const (
	WaitSleep    = "sleep"
	WaitUntil    = "until"
	WaitSignal   = "signal"
	WaitChildren = "children"
)

// Kind is the wait's kind ("" when it names none or more than one).
func (w Wait) Kind() string {
	kinds := w.kinds()
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

func (w Wait) kinds() []string {
	var k []string
	if w.Sleep != 0 {
		k = append(k, WaitSleep)
	}
	if !w.Until.IsZero() {
		k = append(k, WaitUntil)
	}
	if w.Signal != "" {
		k = append(k, WaitSignal)
	}
	if w.Children != nil {
		k = append(k, WaitChildren)
	}
	return k
}

// ErrInvalidSuspend is what every refused wait matches (errors.Is): its
// text starts "invalid suspend: ".
var ErrInvalidSuspend = errors.New("invalid suspend")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidSuspend}, args...)...)
}

// Validate checks w at now: exactly one kind, durations within (0,
// MaxWait], a time at most MaxWait ahead (one in the past ends at once),
// a signal's name of 1 to 128 characters of [A-Za-z0-9._:-], a timeout
// only with a signal or children wait, a mode only with children, no
// child with in or fail_if_unavailable (Child).
func (w Wait) Validate(now time.Time) error {
	kinds := w.kinds()
	switch {
	case len(kinds) == 0:
		return invalid("the wait names nothing to wait for (sleep, until, signal or children)")
	case len(kinds) > 1:
		return invalid("the wait names more than one thing to wait for (%s)", strings.Join(kinds, ", "))
	case w.Sleep < 0 || w.Sleep > MaxWait:
		return invalid("sleep %s is not between 0 and %s", w.Sleep, MaxWait)
	case w.Timeout < 0 || w.Timeout > MaxWait:
		return invalid("timeout %s is not between 0 and %s", w.Timeout, MaxWait)
	case !w.Until.IsZero() && w.Until.Sub(now) > MaxWait:
		return invalid("until %s is more than %s ahead", w.Until.Format(time.RFC3339), MaxWait)
	case w.Timeout != 0 && w.Signal == "" && w.Children == nil:
		return invalid("a timeout goes with a signal or children wait")
	case w.Mode != "" && w.Children == nil:
		return invalid("a mode goes with a children wait")
	}
	if w.Signal != "" {
		return checkSignalName(w.Signal)
	}
	return checkChildren(w.Children)
}

// checkChildren refuses what a child spec may say on the wire but a
// child cannot do (Child: in, fail_if_unavailable); the rest is checked
// where the children are made (tasks.Client.PrepareChildren).
func checkChildren(kids []Child) error {
	for i, c := range kids {
		switch {
		case c.In != "":
			return invalid("child %d: in is not supported for a child (it starts when its parent suspends)", i+1)
		case c.FailIfUnavailable:
			return invalid("child %d: fail_if_unavailable is not supported for a child", i+1)
		}
	}
	return nil
}

// checkSignalName: 1 to 128 characters of [A-Za-z0-9._:-] (the task's
// signals' names, tasks.Client.Signal).
func checkSignalName(name string) error {
	if len(name) > 128 {
		return invalid("signal name is %d characters; at most 128", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return invalid("signal name %q has a character other than A-Z a-z 0-9 . _ : -", name)
		}
	}
	return nil
}

// Delay is how long the run waits at now at the latest: the sleep, the
// time left until Until (0 when past), or the timeout of a signal or
// children wait (MaxWait when none).
func (w Wait) Delay(now time.Time) time.Duration {
	switch {
	case w.Sleep != 0:
		return w.Sleep
	case !w.Until.IsZero():
		return max(w.Until.Sub(now), 0)
	case w.Timeout != 0:
		return w.Timeout
	}
	return MaxWait
}

// wireWait is Wait's JSON.
type wireWait struct {
	Sleep    json.RawMessage `json:"sleep,omitempty"`
	Until    string          `json:"until,omitempty"`
	Signal   string          `json:"signal,omitempty"`
	Timeout  json.RawMessage `json:"timeout,omitempty"`
	Children []Child         `json:"children,omitempty"`
	Mode     string          `json:"mode,omitempty"`
}

// MarshalJSON writes the wire shape (durations as Go duration strings,
// the time in RFC 3339).
func (w Wait) MarshalJSON() ([]byte, error) {
	var ww wireWait
	if w.Sleep != 0 {
		ww.Sleep, _ = json.Marshal(w.Sleep.String())
	}
	if !w.Until.IsZero() {
		ww.Until = w.Until.UTC().Format(time.RFC3339Nano)
	}
	if w.Timeout != 0 {
		ww.Timeout, _ = json.Marshal(w.Timeout.String())
	}
	ww.Signal, ww.Children, ww.Mode = w.Signal, w.Children, w.Mode
	return json.Marshal(ww)
}

// UnmarshalJSON reads the wire shape (see Wait); it checks the shape
// only (Validate checks the rest).
func (w *Wait) UnmarshalJSON(b []byte) error {
	var ww wireWait
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ww); err != nil {
		return invalid("the wait is not a wait object: %v", err)
	}
	var out Wait
	var err error
	if out.Sleep, err = parseDuration("sleep", ww.Sleep); err != nil {
		return err
	}
	if out.Timeout, err = parseDuration("timeout", ww.Timeout); err != nil {
		return err
	}
	if ww.Until != "" {
		if out.Until, err = time.Parse(time.RFC3339Nano, ww.Until); err != nil {
			return invalid("until %q is not an RFC 3339 time", ww.Until)
		}
	}
	if len(ww.Sleep) > 0 && out.Sleep == 0 {
		return invalid("sleep is zero")
	}
	if ww.Mode != "" && ww.Mode != "all" && ww.Mode != "any" {
		return invalid("mode %q is neither all nor any", ww.Mode)
	}
	out.Signal, out.Children, out.Mode = ww.Signal, ww.Children, ww.Mode
	*w = out
	return nil
}

// parseDuration reads a wait's duration: a Go duration string or a JSON
// number of seconds (absent: 0).
func parseDuration(field string, raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, invalid("%s %q is not a duration", field, s)
		}
		return d, nil
	}
	secs, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || secs < 0 || secs > MaxWait.Seconds() {
		return 0, invalid("%s %s is neither a duration string nor a number of seconds up to %s", field, raw, MaxWait)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// ParseWait reads a suspend reply's wait (its JSON) and checks it at now
// (Validate).
func ParseWait(raw json.RawMessage, now time.Time) (Wait, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return Wait{}, invalid("the reply has no wait")
	}
	var w Wait
	if err := json.Unmarshal(raw, &w); err != nil {
		if errors.Is(err, ErrInvalidSuspend) {
			return Wait{}, err
		}
		return Wait{}, invalid("the wait is not a JSON object: %v", err)
	}
	return w, w.Validate(now)
}

// SuspendError is a call's answer that suspends the run (Suspend; an
// exec or HTTP agent's {"status":"suspend"} reply): not a failure. Usage
// is what the call used when its reply said (as a reply's usage).
type SuspendError struct {
	Wait  Wait
	Usage json.RawMessage
}

func (e *SuspendError) Error() string {
	b, _ := e.Wait.MarshalJSON()
	return "agent suspended the run: wait " + string(b)
}

// Suspend is what a Go agent returns (as its error) to suspend the run
// until w ends: a *SuspendError. The worker checks w (Wait.Validate): a
// wait it refuses fails the attempt logic_error.
func Suspend(w Wait) error { return &SuspendError{Wait: w} }

// WaitResult is, in a resumed run's Request, the wait that ended: its
// kind, the signal it waited for, and whether it timed out (a signal wait
// whose signal did not come in time). Every attempt of the resumed run
// gets it.
type WaitResult struct {
	Kind     string `json:"kind"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out"`
}

// suspendReply is the part of an ActionResponse (exec stdout, HTTP body)
// a suspend reads.
type suspendReply struct {
	Status string          `json:"status"`
	Wait   json.RawMessage `json:"wait"`
	Usage  json.RawMessage `json:"usage"`
}

// suspendOf reads a reply wait (its wait and usage) at now: a
// *SuspendError, or a logic_error failure naming what is wrong.
func suspendOf(wait, used json.RawMessage, now time.Time) error {
	w, err := ParseWait(wait, now)
	if err != nil {
		return &resilience.Failure{Err: err, Class: resilience.LogicError, Text: err.Error()}
	}
	return &SuspendError{Wait: w, Usage: used}
}
