package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/procgroup"
	"github.com/agentq/agentq/resilience"
)

// Defaults of ExecConfig's zero values.
const (
	DefaultMaxOutput  int64 = 4 << 20
	DefaultStderrTail       = 8 << 10
	DefaultKillGrace        = 2 * time.Second
)

// ErrEmptyCommand is returned by NewExec for a config without a command.
var ErrEmptyCommand = errors.New("agent: exec command is empty")

// ExecConfig configures an exec agent.
type ExecConfig struct {
	// Command is the argv of the agent. Command[0] is looked up in the
	// worker's PATH when it has no slash. No shell is ever involved.
	Command []string
	// Env lists the names of worker environment variables passed to the
	// agent; an entry NAME=value sets NAME to value instead. Nothing else is inherited: the zero value runs the agent with an
	// empty environment (not even PATH or HOME). Variables that are unset or
	// empty in the worker are left out. The values passed through are
	// redacted from failures' texts (see Run).
	Env []string
	// Dir is the agent's working directory; zero: the worker's.
	Dir string
	// MaxOutput caps the bytes read from the agent's stdout; output beyond it
	// fails the call as logic_error and kills the agent. Zero: 4 MiB.
	MaxOutput int64
	// StderrTail is how many trailing bytes of stderr are kept as the error
	// text of a non-zero exit. Zero: 8 KiB.
	StderrTail int
	// KillGrace is how long the agent's process group has between SIGTERM and
	// SIGKILL once the call's context is done. Zero: 2s.
	KillGrace time.Duration
	// Getenv reads the worker's environment for Env; zero: os.Getenv.
	Getenv func(string) string
}

// Exec runs an agent as a subprocess speaking the exec agent protocol
// (DESIGN.md "Exec agent protocol"). It is safe for concurrent use.
type Exec struct {
	cfg     ExecConfig
	secrets secretCache
}

var _ Runner = (*Exec)(nil)

// NewExec validates cfg, fills in its defaults and returns the runner. The
// command is not looked up here: a missing binary fails each call, as
// not_supported.
func NewExec(cfg ExecConfig) (*Exec, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, ErrEmptyCommand
	}
	if cfg.MaxOutput < 0 {
		return nil, fmt.Errorf("agent: exec max_output %d is negative", cfg.MaxOutput)
	}
	if cfg.StderrTail < 0 {
		return nil, fmt.Errorf("agent: exec stderr_tail %d is negative", cfg.StderrTail)
	}
	if cfg.KillGrace < 0 {
		return nil, fmt.Errorf("agent: exec kill_grace %s is negative", cfg.KillGrace)
	}
	if cfg.MaxOutput == 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.StderrTail == 0 {
		cfg.StderrTail = DefaultStderrTail
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	cfg.Command = append([]string(nil), cfg.Command...)
	cfg.Env = append([]string(nil), cfg.Env...)
	return &Exec{cfg: cfg}, nil
}

// errOutputTooLarge stops the agent once its stdout passes the cap.
var errOutputTooLarge = errors.New("agent output too large")

// Run starts the agent in its own process group, writes req as JSON to its
// stdin, closes stdin and reads one ActionResponse from its stdout.
//
// Outcomes, all failures being *resilience.Failure:
//   - "success": the response's data (JSON null when absent).
//   - "error": Status = code, Text = error, Header = the reply's
//     back-pressure (retry_after as Retry-After, and the headers on
//     resilience's back-pressure allowlist; see Response.RetryAfter,
//     Response.Headers); the classifier decides. An invalid retry_after
//     is logged (WithLogger's logger, slog's default without one) and
//     ignored.
//   - "suspend": a *SuspendError with the reply's wait (a wait that is
//     not one, or that Wait.Validate refuses: logic_error).
//   - stdout beyond MaxOutput: Class logic_error; reading stops at the cap.
//   - non-zero exit: Err wraps the *exec.ExitError, Text = stderr tail
//     (unless stdout held a valid ActionResponse, which then wins).
//   - stdout that is not an ActionResponse: Class logic_error.
//   - ctx deadline: Class timeout; ctx canceled: Class canceled.
//   - command missing, not executable, or Dir missing: Class not_supported
//     (a configuration error on this worker; retrying cannot help).
//
// When ctx is done (or the output cap is hit) the whole process group gets
// SIGTERM, then SIGKILL after KillGrace; whatever is left of the group when
// the agent exits is SIGKILLed, so no process outlives the call (except one
// that left the group with setsid). On Linux the group does not outlive the
// worker either: it is SIGKILLed within milliseconds of the worker's death,
// however the worker dies (see internal/procgroup).
//
// When req.Emit is set, the agent also gets a pipe as descriptor 3,
// named by AGENTQ_EVENTS_FD=3 in its environment, to which it may write
// its live output as JSON lines {"type":"progress"|"output","data":…}.
// The runner reads the pipe while the agent runs (a writing agent never
// waits on it) and reports each event to Emit; a line that is not such
// an event is dropped (counted, and logged once per call at debug to
// WithLogger's logger), one over MaxEventData becomes an output event
// whose data notes its size. Every event written before the agent's
// group is gone is reported before Run returns; the pipe is closed then.
//
// The values of the environment it passes through from the worker (but
// PATH, HOME and the other variables of publicEnv) are redacted
// (redact.Marker) from a failure's text and error (see secrets.go); the
// data of a success is the agent's own answer and is kept as it is (a
// passed-through AWS_REGION or model name is no secret to cut out of it).
//
// Its result, events and failure's text are valid UTF-8: the agent's
// invalid bytes are replaced by U+FFFD (see valid.go).
func (e *Exec) Run(ctx context.Context, req Request) (json.RawMessage, error) {
	data, err := e.run(ctx, req)
	if err == nil {
		return ValidJSON(data), nil
	}
	_, err = scrub(e.secrets.get(EnvSecrets(e.cfg.Env, e.cfg.Getenv)), nil, err)
	return validOutcome(data, err)
}

// run is Run before the secrets are redacted.
func (e *Exec) run(ctx context.Context, req Request) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxFailure(ctx, time.Now(), err)
	}
	in, err := marshalRequest(req)
	if err != nil {
		return nil, &resilience.Failure{Err: fmt.Errorf("agent: encode request: %w", err), Class: resilience.InvalidRequest}
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	stdout := &capWriter{max: e.cfg.MaxOutput, onOverflow: func() { stop(errOutputTooLarge) }}
	stderr := NewTailWriter(e.cfg.StderrTail)

	var (
		group procgroup.Group
		hurry atomic.Pointer[time.Timer] // a quick stop's SIGKILL (see WithQuickStop)
	)
	cmd := e.command(runCtx, in, stdout, stderr, &group, &hurry)
	var events *eventsPipe
	if req.Emit != nil {
		// The agent's live output: a pipe it finds as AGENTQ_EVENTS_FD.
		if events, err = newEventsPipe(); err != nil {
			return nil, &resilience.Failure{Err: fmt.Errorf("agent: events pipe: %w", err)}
		}
		cmd.ExtraFiles = []*os.File{events.w}
		cmd.Env = append(cmd.Env, EventsFDEnv+"="+strconv.Itoa(eventsFD))
	}
	start := time.Now()
	if err := group.Start(cmd); err != nil { // Start and Wait on this goroutine
		if events != nil {
			events.abort()
		}
		if ctx.Err() != nil {
			return nil, ctxFailure(ctx, start, ctx.Err())
		}
		return nil, startFailure(e.cfg.Command[0], err)
	}
	if events != nil {
		events.started(req.Emit, stepsOf(ctx, req))
	}
	waitErr := group.Wait() // and SIGKILLs what is left of the group
	if t := hurry.Load(); t != nil {
		t.Stop()
	}
	if events != nil {
		// Every event the agent wrote is reported before Run returns.
		events.finish(ctx, req)
	}

	return e.outcome(ctx, req.Agent, start, waitErr, stdout, stderr)
}

// stepsOf is where an exec agent's step lines go: req.RecordStep, called
// with ctx (nil when the call records no steps). Its error is the
// worker's to act on (it fails the attempt); the drain goes on.
func stepsOf(ctx context.Context, req Request) func(StepEvent) {
	if req.RecordStep == nil {
		return nil
	}
	return func(s StepEvent) { _ = req.RecordStep(ctx, s) }
}

// command is the agent's process: no shell, the allowlisted environment,
// req on stdin, to be started in group, which gets SIGTERM when runCtx is
// done (and SIGKILL QuickStopGrace later when runCtx asks for a quick
// stop: the timer is put in hurry, for Run to stop once the agent is gone).
func (e *Exec) command(runCtx context.Context, in []byte, stdout *capWriter, stderr *TailWriter, group *procgroup.Group, hurry *atomic.Pointer[time.Timer]) *exec.Cmd {
	cmd := exec.CommandContext(runCtx, e.cfg.Command[0], e.cfg.Command[1:]...)
	cmd.Env = e.env() // never nil: nil would inherit the worker's environment
	cmd.Dir = e.cfg.Dir
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.Cancel = func() error {
		err := group.Signal(syscall.SIGTERM)
		if err == nil && quickStop(runCtx) {
			hurry.Store(time.AfterFunc(QuickStopGrace, func() { _ = group.Signal(syscall.SIGKILL) }))
		}
		return err
	}
	// After SIGTERM, Wait gives the agent KillGrace, then SIGKILLs the
	// agent and closes the pipes (children holding stdout open no longer
	// block us); the group's Wait takes care of the rest of the group.
	cmd.WaitDelay = e.cfg.KillGrace
	return cmd
}

// outcome is the call's result (see Run) once the agent (named name, for
// its log lines) has exited and Wait returned waitErr, checked in this
// order: the output cap, the context, a non-zero exit without a valid
// response, an invalid response, then the response itself.
func (e *Exec) outcome(ctx context.Context, name string, start time.Time, waitErr error, stdout *capWriter, stderr *TailWriter) (json.RawMessage, error) {
	if stdout.overflowed() {
		return nil, &resilience.Failure{
			Class: resilience.LogicError,
			Text:  fmt.Sprintf("agent output exceeds %d bytes", e.cfg.MaxOutput),
		}
	}
	if waitErr != nil && ctx.Err() != nil {
		return nil, ctxFailure(ctx, start, ctx.Err())
	}

	out := stdout.bytes()
	resp, parseErr := parseResponse(out)
	var exitErr *exec.ExitError
	if errors.As(waitErr, &exitErr) && parseErr != nil {
		tail := sanitizeText(stderr.String())
		if tail != "" || len(bytes.TrimSpace(out)) == 0 {
			return nil, &resilience.Failure{Err: exitFailure(exitErr), Text: tail}
		}
	}
	if parseErr != nil {
		return nil, &resilience.Failure{
			Class: resilience.LogicError,
			Text:  "agent output is not an ActionResponse: " + preview(out, 200),
		}
	}
	header := replyBackPressure(ctx, name, resp)
	ObserveReply(ctx, Reply{Status: resp.Code, Header: header, Usage: resp.Usage})
	// waitErr may still be set here (exec.ErrWaitDelay: a child kept stdout
	// open after the agent exited); the response is complete, so it wins.
	switch resp.Status {
	case "success":
		if len(resp.Data) == 0 {
			return json.RawMessage("null"), nil
		}
		return resp.Data, nil
	case "suspend":
		return nil, suspendOf(resp.Wait, resp.Usage, time.Now())
	default: // "error"
		return nil, &resilience.Failure{Status: resp.Code, Header: header, Text: truncate(sanitizeText(resp.Error), maxErrorText)}
	}
}

// env builds the agent's environment from the allowlist.
func (e *Exec) env() []string { return AllowedEnv(e.cfg.Env, e.cfg.Getenv) }

// AllowedEnv is a subprocess's environment from an allowlist (exec
// agents, health-probe commands): "NAME" passes NAME through from getenv
// when set and non-empty, "NAME=value" sets it; nothing else is inherited.
// The result is never nil, so exec.Cmd does not fall back to the whole
// environment.
func AllowedEnv(allow []string, getenv func(string) string) []string {
	env := make([]string, 0, len(allow))
	for _, name := range allow {
		if strings.Contains(name, "=") { // NAME=value sets it (config's documented form)
			env = append(env, name)
			continue
		}
		if v := getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// maxErrorText caps error texts taken from agent replies.
const maxErrorText = 8 << 10

// parseResponse decodes stdout as exactly one ActionResponse.
func parseResponse(out []byte) (Response, error) {
	var resp Response
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return resp, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(trimmed, &resp); err != nil {
		return resp, err
	}
	if resp.Status != "success" && resp.Status != "error" && resp.Status != "suspend" {
		return resp, fmt.Errorf("invalid status %q", resp.Status)
	}
	return resp, nil
}

// startFailure maps an error from starting the command. A missing or
// non-executable command, or a missing working directory, is a configuration
// error (not_supported); other start errors (EAGAIN, ENOMEM, …) are left to
// the classifier.
func startFailure(name string, err error) error {
	f := &resilience.Failure{Err: fmt.Errorf("agent: start %q: %w", name, err)}
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, procgroup.ErrGuard):
		// The worker could not start the group's guard: not the agent's
		// configuration; the classifier decides.
	case errors.Is(err, exec.ErrNotFound),
		errors.Is(err, fs.ErrNotExist),
		errors.Is(err, fs.ErrPermission),
		errors.Is(err, syscall.ENOEXEC),
		errors.Is(err, syscall.ENOTDIR),
		errors.As(err, &pathErr) && errors.Is(pathErr.Err, syscall.EISDIR):
		f.Class = resilience.NotSupported
	}
	return f
}

// exitFailure describes a non-zero exit or a death by signal.
func exitFailure(ee *exec.ExitError) error {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Errorf("agent killed by signal %s: %w", ws.Signal(), ee)
	}
	return fmt.Errorf("agent exited with code %d: %w", ee.ExitCode(), ee)
}

// ctxFailure reports a call ended by its context: timeout or canceled. A
// timeout names the timeout the call was given when WithTimeout set its
// deadline, else how long after start the deadline came (a figure
// measured here, a little short of whatever timeout the caller had set).
func ctxFailure(ctx context.Context, start time.Time, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		var msg string
		if d, ok := timeoutOf(ctx); ok {
			msg = fmt.Sprintf("agent timed out after %s", d.Round(time.Millisecond))
		} else {
			budget := time.Since(start)
			if dl, ok := ctx.Deadline(); ok {
				budget = dl.Sub(start)
			}
			msg = fmt.Sprintf("agent timed out: its deadline came %s after the call started", max(budget, 0).Round(time.Millisecond))
		}
		return &resilience.Failure{
			Err:   fmt.Errorf("%s: %w", msg, context.DeadlineExceeded),
			Class: resilience.Timeout,
		}
	}
	return &resilience.Failure{
		Err:   fmt.Errorf("agent call canceled: %w", context.Canceled),
		Class: resilience.Canceled,
	}
}

// capWriter keeps up to max bytes; the first write past the cap calls
// onOverflow and fails, which makes os/exec stop reading and close the pipe.
type capWriter struct {
	max        int64
	onOverflow func()

	mu   sync.Mutex
	buf  bytes.Buffer
	over bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return 0, errOutputTooLarge
	}
	if int64(w.buf.Len())+int64(len(p)) > w.max {
		w.over = true
		w.onOverflow()
		return 0, errOutputTooLarge
	}
	return w.buf.Write(p)
}

func (w *capWriter) overflowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.over
}

func (w *capWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Bytes()
}

// TailWriter keeps the last bytes written to it (a tool's stderr tail);
// it is safe for concurrent writes.
type TailWriter struct {
	max int

	mu  sync.Mutex
	buf []byte
}

// NewTailWriter keeps the last max bytes written to it.
func NewTailWriter(max int) *TailWriter { return &TailWriter{max: max} }

// Write keeps the tail of p; it never fails.
func (w *TailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if len(p) >= w.max {
		w.buf = append(w.buf[:0], p[len(p)-w.max:]...)
		return n, nil
	}
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return n, nil
}

// String is the last bytes written.
func (w *TailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// sanitizeText makes agent-provided text safe for logs and history: valid
// UTF-8, no control characters other than newline and tab, trimmed.
func sanitizeText(s string) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// preview returns the first n bytes of b as sanitized text on one line.
func preview(b []byte, n int) string {
	if len(bytes.TrimSpace(b)) == 0 {
		return "(empty)"
	}
	cut := len(b) > n
	if cut {
		b = b[:n]
	}
	s := strings.ReplaceAll(sanitizeText(string(b)), "\n", `\n`)
	s = strings.ReplaceAll(s, "\t", " ")
	if cut {
		s += "…"
	}
	return s
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
