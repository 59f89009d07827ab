package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/record"
)

// TypeName is the asynq task type of every agentq task.
const TypeName = "agentq:run"

// DefaultQueue is the asynq queue tasks go to when none is named.
const DefaultQueue = "default"

// MaxIDLen bounds caller-chosen task IDs.
const MaxIDLen = 200

// RunSeparator joins a task ID and a run number into the asynq ID of a
// later run ("ID#N", see AsynqID). Producers refuse it in caller-chosen
// task IDs (ValidateID), so that no task ID is the run ID of another task.
const RunSeparator = "#"

// Envelope is what travels through the queue: the task and the bookkeeping
// agentq needs to run it again later (restarts, requeues).
type Envelope struct {
	ID            string          `json:"id"`
	Agent         string          `json:"agent"`
	Action        string          `json:"action,omitempty"`
	Params        json.RawMessage `json:"params,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Queue         string          `json:"queue,omitempty"`
	// Tenant is who the task is for (see CheckTenant): the key of fair
	// dispatch and of per-tenant caps (dispatch order: see Tenants in
	// docs/DESIGN.md). Empty: the default tenant.
	Tenant string `json:"tenant,omitempty"`
	// Priority orders a tenant's own tasks: PriorityHigh or PriorityLow,
	// or empty for PriorityNormal. It is stored normalised: a producer's
	// "normal" becomes empty (Client, Decode), so that a task of normal
	// priority carries no field; PriorityOf gives the name.
	Priority string `json:"priority,omitempty"`
	// Restarts is how many restarts the current budget has used.
	Restarts int `json:"restarts"`
	// Run numbers the runs of this task: 0 for the first, +1 for every
	// restart or requeue. A delivery whose Run is older than the task
	// record's is stale and is dropped.
	Run int `json:"run"`
	// Resumes is how many times the task's runs suspended (agent.Suspend):
	// a suspend's next run carries one more (a resume uses no restart).
	Resumes int `json:"resumes,omitempty"`
	// Wait is the wait that suspended the previous run (the record's
	// wait JSON, record.Wait.JSON), carried by a resumed run (Resumes > 0)
	// so that a redelivery of the suspended run whose worker died before
	// recording the suspend records it (state waiting, the wait kept: a
	// signal still resumes it early). Empty on every other run.
	Wait       json.RawMessage `json:"wait,omitempty"`
	EnqueuedAt time.Time       `json:"enqueued_at"`
	// NotBefore is when a delayed run is due (Unix ms; 0: at once). asynq
	// keeps a delayed task's due time in whole seconds and may deliver it
	// up to a second early; the worker waits for the rest.
	NotBefore int64 `json:"not_before_ms,omitempty"`
	// Deadline is when the task gives up (Unix ms; 0: never), set by its
	// producer (Task.Deadline, Within): a run still waiting then never
	// starts, a running attempt is stopped, and the task is dead-lettered
	// with reason deadline_exceeded (see package worker). Every run of the
	// task carries it (restarts copy the envelope).
	Deadline int64 `json:"deadline_ms,omitempty"`
	// Traceparent and Tracestate are the W3C trace context of the
	// enqueue (the producer's span: see package tracing); empty when the
	// producer was not traced. Every run of the task (restarts copy the
	// envelope) is traced as a child of it, and the worker passes it on
	// to the agent.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
	// Notify names the webhooks the task's events are told to (see
	// CheckNotify); its record keeps them.
	Notify []string `json:"notify,omitempty"`
	// MaxTokens and MaxCostUSD are the task's own cap (Task.MaxTokens,
	// Task.MaxCostUSD; 0: none): what all its attempts, retries and
	// restarts together may use. Every run carries them (restarts copy
	// the envelope).
	MaxTokens  int64   `json:"max_tokens,omitempty"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Parent is the task that spawned this one as a child (a suspend
	// with children: see SpawnChildren), Root the first task of its tree
	// and Depth how far below it (1: a child of the root); all empty for
	// a task a producer enqueued.
	Parent string `json:"parent,omitempty"`
	Root   string `json:"root,omitempty"`
	Depth  int    `json:"depth,omitempty"`
	// TreeMaxTokens and TreeMaxCostUSD are the root's caps (its
	// max_tokens, max_cost_usd), copied into every task of its tree: the
	// usage of the whole tree is checked against them (see "Child tasks"
	// in docs/DESIGN.md). Zero: none.
	TreeMaxTokens  int64   `json:"tree_max_tokens,omitempty"`
	TreeMaxCostUSD float64 `json:"tree_max_cost_usd,omitempty"`
}

// ErrInvalidEnvelope is the sentinel for envelopes that cannot be run.
var ErrInvalidEnvelope = errors.New("invalid task envelope")

// ValidationError says which field of an envelope is wrong.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%s: field %q %s", ErrInvalidEnvelope, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidEnvelope) true.
func (e *ValidationError) Unwrap() error { return ErrInvalidEnvelope }

// Validate checks the fields of an envelope. It accepts an ID with
// RunSeparator, which ValidateID refuses: a payload queued before producers
// refused it must still run (Decode uses Validate).
func (e *Envelope) Validate() error {
	if err := validID(e.ID); err != nil {
		return err
	}
	switch {
	case e.Agent == "":
		return &ValidationError{"agent", "is empty"}
	case !utf8.ValidString(e.Agent) || strings.ContainsAny(e.Agent, "{} ") || unsafeIndex(e.Agent) >= 0:
		return &ValidationError{"agent", "is not a valid agent name (no {, }, spaces, control or bidirectional formatting characters)"}
	case e.Restarts < 0:
		return &ValidationError{"restarts", "is negative"}
	case e.Run < 0:
		return &ValidationError{"run", "is negative"}
	case e.Resumes < 0:
		return &ValidationError{"resumes", "is negative"}
	case len(e.Wait) > 0 && (e.Resumes == 0 || !json.Valid(e.Wait)):
		return &ValidationError{"wait", "must be JSON, on a resumed run (resumes > 0)"}
	case e.Deadline < 0:
		return &ValidationError{"deadline_ms", "is negative"}
	case e.MaxTokens < 0:
		return &ValidationError{"max_tokens", "is negative"}
	case e.Depth < 0 || e.Depth > MaxDepth:
		return &ValidationError{"depth", fmt.Sprintf("must be between 0 and %d", MaxDepth)}
	case e.MaxCostUSD < 0 || e.MaxCostUSD > MaxCostUSD || e.MaxCostUSD != e.MaxCostUSD:
		return &ValidationError{"max_cost_usd", fmt.Sprintf("must be between 0 and %g", float64(MaxCostUSD))}
	}
	if err := validTenant(e.Tenant); err != nil {
		return err
	}
	if err := CheckPriority(e.Priority); err != nil {
		return err
	}
	if len(e.Params) > 0 && !json.Valid(e.Params) {
		return &ValidationError{"params", "is not valid JSON"}
	}
	return CheckNotify(e.Notify)
}

// Task priorities (Task.Priority, Envelope.Priority; the API's and the
// enqueuer's "priority"): they order a tenant's own tasks. An empty
// priority is PriorityNormal.
const (
	PriorityHigh   = "high"
	PriorityNormal = record.PriorityNormal
	PriorityLow    = "low"
)

// Priorities lists the task priorities, highest first.
var Priorities = []string{PriorityHigh, PriorityNormal, PriorityLow}

// CheckPriority returns a *ValidationError naming field "priority" when p
// is not empty (normal) or one of Priorities (case-sensitive).
func CheckPriority(p string) error {
	if p == "" || slices.Contains(Priorities, p) {
		return nil
	}
	return &ValidationError{"priority", fmt.Sprintf("is %q; expected one of %s (empty: %s)",
		p, strings.Join(Priorities, ", "), PriorityNormal)}
}

// NormPriority is p as envelopes keep it: PriorityNormal is empty.
func NormPriority(p string) string {
	if p == PriorityNormal {
		return ""
	}
	return p
}

// PriorityOf names priority p as the task JSON shows it: PriorityNormal
// for an empty p, else p.
func PriorityOf(p string) string {
	if p == "" {
		return PriorityNormal
	}
	return p
}

// MaxCostUSD bounds a task's max_cost_usd.
const MaxCostUSD = 1e9

// MaxTenantLen bounds a task's tenant (bytes).
const MaxTenantLen = 128

// CheckTenant returns a *ValidationError naming field "tenant" when t is
// a tenant no producer may name: one validTenant refuses (over
// MaxTenantLen bytes, invalid UTF-8, control and bidirectional formatting
// characters), or one holding an invisible or blank character that makes
// a look-alike of another tenant: a format character (Unicode category
// Cf: U+200B ZERO WIDTH SPACE, U+FEFF, U+00AD SOFT HYPHEN, …), a
// separator (Zs, Zl, Zp: the space U+0020 and every other space, U+2028,
// U+2029) or another default-ignorable character (U+034F, U+115F,
// U+3164, …). Any other string is a tenant, and needs no configuration;
// the empty one is the default tenant. Every producer (the Client, the
// HTTP API, enqueuer), the config's tenants and schedules and enqueuer's
// --tenant check it.
func CheckTenant(t string) error {
	if err := validTenant(t); err != nil {
		return err
	}
	for i, r := range t {
		if kind := invisibleKind(r); kind != "" {
			return &ValidationError{"tenant", fmt.Sprintf("contains %s (U+%04X at byte %d): "+
				"format characters, spaces and other separators and default-ignorable characters are not allowed in a tenant (a look-alike of another tenant)", kind, r, i)}
		}
	}
	return nil
}

// validTenant is what every tenant, old or new, must satisfy (Validate,
// and so Decode: a payload queued before CheckTenant refused invisible
// characters must still run): at most MaxTenantLen bytes, and what
// CheckText accepts.
func validTenant(t string) error {
	if len(t) > MaxTenantLen {
		return &ValidationError{"tenant", fmt.Sprintf("is %d bytes long; at most %d", len(t), MaxTenantLen)}
	}
	return CheckText("tenant", t)
}

// invisibleKind names the kind of r when CheckTenant refuses it beyond
// validTenant ("a format character", "a space or separator", "a
// default-ignorable character"), else "".
func invisibleKind(r rune) string {
	switch {
	case unicode.Is(unicode.Cf, r):
		return "a format character"
	case unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp):
		return "a space or separator"
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r):
		return "a default-ignorable character"
	}
	return ""
}

// MaxNotify is the most webhooks a task may notify.
const MaxNotify = 16

// CheckNotify checks the syntax of a task's notify list: at most
// MaxNotify names, each 1 to 64 of A-Z a-z 0-9 _ . - (a webhook name),
// none twice. Whether each names a configured webhook is the config's
// check (config.Config.CheckNotify: the HTTP API and enqueuer refuse an
// unknown one); a name no worker has configured is never called.
func CheckNotify(names []string) error {
	if len(names) > MaxNotify {
		return &ValidationError{"notify", fmt.Sprintf("names %d webhooks; at most %d", len(names), MaxNotify)}
	}
	for i, n := range names {
		if n == "" || len(n) > 64 || strings.IndexFunc(n, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
		}) >= 0 {
			return &ValidationError{"notify", fmt.Sprintf("%q is not a webhook name (1 to 64 of A-Z a-z 0-9 _ . -)", n)}
		}
		if slices.Contains(names[:i], n) {
			return &ValidationError{"notify", fmt.Sprintf("names %q twice", n)}
		}
	}
	return nil
}

// validID checks what every task ID, old or new, must satisfy: not
// empty, at most MaxIDLen bytes, valid UTF-8 without '{' or '}' (the
// Redis hash tag of its keys), and none of the characters CheckText
// refuses (control and bidirectional formatting characters, which would
// reach an operator's terminal through the inspector).
func validID(id string) error {
	switch {
	case id == "":
		return &ValidationError{"id", "is empty"}
	case len(id) > MaxIDLen:
		return &ValidationError{"id", fmt.Sprintf("is longer than %d bytes", MaxIDLen)}
	case !utf8.ValidString(id) || strings.ContainsAny(id, "{}"):
		return &ValidationError{"id", "contains a character not allowed in an ID ({, }, control characters or invalid UTF-8)"}
	}
	if i := unsafeIndex(id); i >= 0 {
		return &ValidationError{"id", unsafeReason(id, i)}
	}
	return nil
}

// ValidateID checks a caller-chosen task ID as every producer (Client,
// the HTTP API, enqueuer) accepts it: what Validate checks, no
// RunSeparator ('#' is reserved: run N of task X has the asynq ID "X#N",
// so a task named "X#1" would be run 1 of task X), and not "." or ".."
// (a path segment no URL of the API or the console can name).
func ValidateID(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	if strings.Contains(id, RunSeparator) {
		return &ValidationError{"id", fmt.Sprintf("contains %q, which is reserved: run N of task X has the ID X%sN", RunSeparator, RunSeparator)}
	}
	if id == "." || id == ".." {
		return &ValidationError{"id", fmt.Sprintf("is %q, which no URL can name (a path segment HTTP clients resolve away)", id)}
	}
	return nil
}

// CheckText returns a *ValidationError naming field when s is not valid
// UTF-8 or contains a character that could rewrite an operator's terminal
// or reorder what it shows: a C0 or C1 control character (U+0000–U+001F,
// U+007F–U+009F: ESC starts the escape sequences that set a window's
// title, clear the screen or rewrite earlier lines; newlines and tabs
// forge table rows) or a bidirectional formatting character (U+061C,
// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069). Every producer checks
// the task's id, agent, action and correlation_id with it (the id and
// agent through Validate), and Cancel its reason.
func CheckText(field, s string) error {
	if !utf8.ValidString(s) {
		return &ValidationError{field, "is not valid UTF-8"}
	}
	if i := unsafeIndex(s); i >= 0 {
		return &ValidationError{field, unsafeReason(s, i)}
	}
	return nil
}

// unsafeIndex is the byte index of the first rune of s CheckText refuses,
// or -1.
func unsafeIndex(s string) int {
	for i, r := range s {
		if unsafeRune(r) {
			return i
		}
	}
	return -1
}

// unsafeRune: a C0 or C1 control character, DEL, or a bidirectional
// formatting character (marks, embeddings, overrides, isolates).
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// unsafeReason says which rune of s, at byte i, CheckText refuses.
func unsafeReason(s string, i int) string {
	r, _ := utf8.DecodeRuneInString(s[i:])
	kind := "a control character"
	if r > 0x9f {
		kind = "a bidirectional formatting character"
	}
	return fmt.Sprintf("contains %s (U+%04X at byte %d): control characters (U+0000–U+001F, U+007F–U+009F) and bidirectional formatting characters are not allowed", kind, r, i)
}

// checkText is what every producer checks beyond Validate: the fields an
// operator's terminal shows that Validate leaves alone, and the tenant's
// invisible characters (CheckTenant) that Validate accepts (Decode must
// still run a payload queued before producers refused them).
func (e *Envelope) checkText() error {
	if err := CheckText("action", e.Action); err != nil {
		return err
	}
	if err := CheckTenant(e.Tenant); err != nil {
		return err
	}
	return CheckText("correlation_id", e.CorrelationID)
}

// Encode renders the envelope as the asynq payload.
func Encode(e *Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e.marshal()
}

// marshal is json.Marshal(e), written directly for the envelopes every
// enqueue writes: UTC times in years 0–9999, strings of printable ASCII
// that JSON does not escape, and params with nothing json.Marshal would
// escape (it compacts them, which json.Compact does here). Any other
// envelope goes through encoding/json (FuzzEnvelopeMarshal holds the two
// to the same bytes). e is valid (Validate): its params are JSON.
func (e *Envelope) marshal() ([]byte, error) {
	if !e.plain() {
		return json.Marshal(e)
	}
	b := make([]byte, 0, 160+len(e.ID)+len(e.Agent)+len(e.Action)+len(e.Params)+len(e.CorrelationID)+
		len(e.Queue)+len(e.Tenant)+len(e.Priority)+len(e.Traceparent)+len(e.Tracestate))
	b = append(b, `{"id":"`...)
	b = append(b, e.ID...)
	b = append(b, `","agent":"`...)
	b = append(b, e.Agent...)
	b = append(b, '"')
	b = appendField(b, `,"action":"`, e.Action)
	if len(e.Params) > 0 {
		b = append(b, `,"params":`...)
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, e.Params); err != nil {
			return json.Marshal(e) // its error names the field
		}
		b = buf.Bytes()
	}
	b = appendField(b, `,"correlation_id":"`, e.CorrelationID)
	b = appendField(b, `,"queue":"`, e.Queue)
	b = appendField(b, `,"tenant":"`, e.Tenant)
	b = appendField(b, `,"priority":"`, e.Priority)
	b = append(b, `,"restarts":`...)
	b = strconv.AppendInt(b, int64(e.Restarts), 10)
	b = append(b, `,"run":`...)
	b = strconv.AppendInt(b, int64(e.Run), 10)
	b = append(b, `,"enqueued_at":"`...)
	b = e.EnqueuedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if e.NotBefore != 0 {
		b = append(b, `,"not_before_ms":`...)
		b = strconv.AppendInt(b, e.NotBefore, 10)
	}
	if e.Deadline != 0 {
		b = append(b, `,"deadline_ms":`...)
		b = strconv.AppendInt(b, e.Deadline, 10)
	}
	b = appendField(b, `,"traceparent":"`, e.Traceparent)
	b = appendField(b, `,"tracestate":"`, e.Tracestate)
	return append(b, '}'), nil
}

// appendField appends an omitempty string field: key (with its opening
// quote) and s, unless s is empty.
func appendField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, key...)
	b = append(b, s...)
	return append(b, '"')
}

// plain reports whether marshal may write e itself.
func (e *Envelope) plain() bool {
	return len(e.Notify) == 0 && e.Resumes == 0 && len(e.Wait) == 0 && e.MaxTokens == 0 && e.MaxCostUSD == 0 && e.Parent == "" && e.Root == "" && e.Depth == 0 &&
		e.TreeMaxTokens == 0 && e.TreeMaxCostUSD == 0 && record.PlainTime(e.EnqueuedAt) && record.PlainText(e.ID) && record.PlainText(e.Agent) && record.PlainText(e.Action) &&
		record.PlainText(e.CorrelationID) && record.PlainText(e.Queue) && record.PlainText(e.Tenant) && record.PlainText(e.Priority) &&
		record.PlainText(e.Traceparent) && record.PlainText(e.Tracestate) &&
		plainJSON(e.Params)
}

// plainJSON: json.Marshal compacts raw JSON without escaping anything
// (no '<', '>', '&', U+2028 or U+2029 in it).
func plainJSON(raw []byte) bool {
	return bytes.IndexAny(raw, "<>&\u2028\u2029") < 0
}

// DeadlineTime is the envelope's Deadline as a time (zero: none).
func (e *Envelope) DeadlineTime() time.Time {
	if e.Deadline == 0 {
		return time.Time{}
	}
	return time.UnixMilli(e.Deadline)
}

// PastDeadline reports whether the task has a deadline and now is at or
// after it.
func (e *Envelope) PastDeadline(now time.Time) bool {
	return e.Deadline != 0 && now.UnixMilli() >= e.Deadline
}

// Decode parses an asynq payload. Unknown fields are ignored (newer
// producers may add some); a payload that is not a valid envelope returns an
// error wrapping ErrInvalidEnvelope.
func Decode(b []byte) (*Envelope, error) {
	var e Envelope
	fast := decodeFast(b, &e)
	if !fast {
		e = Envelope{}
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, decodeError(b)
		}
	}
	if err := validateDecoded(&e, fast); err != nil {
		return &e, err
	}
	if e.Queue == "" {
		e.Queue = DefaultQueue
	}
	e.Priority = NormPriority(e.Priority)
	return &e, nil
}

// decodeError says why json.Unmarshal refused payload b (the slower
// streaming decoder tells trailing data apart from a bad first value).
func decodeError(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(new(Envelope)); err != nil {
		return fmt.Errorf("%w: payload is not JSON: %v", ErrInvalidEnvelope, err)
	}
	return fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidEnvelope)
}

// AsynqID is the asynq task ID of the envelope's current run: the task ID
// for the first run, "ID#N" for run N. Distinct IDs per run let a restart be
// scheduled while the run that schedules it is still active, and make
// scheduling idempotent (a second attempt conflicts). Task IDs accepted by
// ValidateID contain no RunSeparator, so no task ID equals another task's
// run ID.
func (e *Envelope) AsynqID() string {
	if e.Run == 0 {
		return e.ID
	}
	return fmt.Sprintf("%s%s%d", e.ID, RunSeparator, e.Run)
}

// ParseAsynqID splits an asynq task ID made by AsynqID into the task ID
// and the run; ok is false when id is not one (no "#N" suffix: run 0).
func ParseAsynqID(id string) (taskID string, run int, ok bool) {
	i := strings.LastIndexByte(id, '#')
	if i <= 0 {
		return id, 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n <= 0 || strconv.Itoa(n) != id[i+1:] {
		return id, 0, false
	}
	return id[:i], n, true
}
