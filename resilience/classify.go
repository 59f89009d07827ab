package resilience

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RetryAfterCap bounds every Verdict.RetryAfter the classifier produces. A
// backend asking for more (Azure's "retry after 86400 seconds") gets this
// value; the retry policy then decides whether waiting that long in-run makes
// sense (see DecideInput.MaxRetryAfter).
const RetryAfterCap = 10 * time.Minute

// maxScan bounds how much error text the classifier looks at: the head (where
// a JSON body starts) and the tail (where a traceback's final line is).
const maxScan = 8 << 10

// TextRule is one row of the classifier's table: evidence in an error's text
// (or in the codes of a structured JSON error body) that names a class.
//
// A rule matches when (one of Codes equals one of the body's error codes, or
// one of Any occurs in the lower-cased text) and, if And is non-empty, one of
// And occurs too, and none of Not occurs. Phrases are lower case.
type TextRule struct {
	// Name identifies the rule in tests and debugging.
	Name string
	// Class is the verdict when the rule matches.
	Class Class
	// Codes are values of error.type, error.code, error.status (or the same
	// keys at top level, or in a Python dict repr), compared case-insensitively.
	Codes []string
	// Any are lower-case substrings; one must occur in the text.
	Any []string
	// And, when set, are lower-case substrings of which one must also occur.
	And []string
	// Not are lower-case substrings that veto the rule.
	Not []string
	// Scope says when the rule applies; the zero value applies always.
	Scope RuleScope
}

// RuleScope restricts when a TextRule applies.
type RuleScope int

const (
	// ScopeAlways applies the rule whatever the HTTP status.
	ScopeAlways RuleScope = iota
	// ScopeTransport applies the rule only when no HTTP status is known or the
	// status is a 5xx: transport words ("timeout", "connection reset") in a
	// 4xx body describe the request, not the network.
	ScopeTransport
	// ScopeNoStatus applies the rule only when no HTTP status is known at all
	// (a tool's stderr, a Go error string).
	ScopeNoStatus
	// ScopeText applies the rule unless the runner itself saw an HTTP status:
	// a status merely quoted in a tool's text ("Error code: 500 - …") does
	// not stop it. For evidence about the tool's own code (a JSON parse
	// failure, a Python traceback of a programming error), which a tool may
	// wrap in a provider-looking message.
	ScopeText
)

// Classifier maps failures to verdicts. The zero value is ready to use: it
// applies DefaultRules and reads the wall clock only to resolve HTTP-date
// Retry-After headers.
type Classifier struct {
	// Rules is the text rule table, first match wins; nil means DefaultRules().
	Rules []TextRule
	// Custom are the operator's rules (config classifier.rules), checked
	// before any other evidence but a cancellation; first match wins. nil:
	// none.
	Custom []CustomRule
	// Now is the clock for HTTP-date Retry-After values; nil means time.Now.
	Now func() time.Time

	// model is the learned model; nil means the built-in one
	// (classifier_model.txt). Tests set it to evaluate a model trained
	// without a family.
	model *textModel
}

var defaultClassifier = Classifier{}

// Classify returns the verdict for err using the default Classifier. See
// Classifier.Classify for the order in which evidence is weighed.
func Classify(err error) Verdict { return defaultClassifier.Classify(err) }

// Classify returns the verdict for err. It is total (never panics; an error
// whose methods panic is provider_error) and deterministic for a given clock.
//
// Evidence is weighed in this order:
//
//  1. nil → the zero Verdict (Class "": success).
//  2. context.Canceled anywhere in the chain → canceled.
//     2a. The first of Custom (the operator's rules) that matches → its class.
//  3. A *Failure whose Class is a valid class → that class.
//  4. A timeout before the connection was made (a dial *net.OpError that
//     timed out, a DNS lookup timeout, net/http's TLS handshake timeout) →
//     network_transient; otherwise context.DeadlineExceeded,
//     os.ErrDeadlineExceeded or a net.Error whose Timeout() is true → timeout
//     (the request was sent and not answered in time).
//  5. An HTTP status (Failure.Status; for exec agents the ActionResponse
//     code): first the text table (so that a 429 saying insufficient_quota is
//     quota_exhausted and a 400 saying the prompt is too long is
//     context_length), then the status itself (see statusClass).
//  6. The Go error chain: x509/TLS certificate errors, *net.DNSError, syscall
//     errnos, io.ErrUnexpectedEOF, *net.OpError; then an exec agent's exit
//     status: killed by SIGKILL/SIGSEGV/SIGABRT (or exit 137/139/134, or a
//     lone "Killed" line) → logic_error (see toolDied).
//  7. The text alone: a status quoted in it ("Error code: 429", "API Error:
//     529") is used as in step 5; otherwise the whole table, including
//     transport and programming-error rules.
//  8. Anything else → provider_error.
//
// Independently of the class, the verdict carries the backend's Retry-After
// (retry-after-ms, Retry-After seconds or HTTP-date, else "try again in 20s"
// in the text), capped at RetryAfterCap, and its x-should-retry header.
func (c Classifier) Classify(err error) Verdict {
	v, _ := c.classify(err)
	return v
}

// classify is Classify, also saying what decided.
func (c Classifier) classify(err error) (v Verdict, m Match) {
	if err == nil {
		return Verdict{}, Match{}
	}
	defer func() {
		if r := recover(); r != nil {
			v = Verdict{Class: ProviderError}
			m.builtin("panic", ByDefault)
		}
		v.By = m.By
		v.Weak = m.By == ByDefault || m.weak
	}()
	if errors.Is(err, context.Canceled) {
		m.builtin("context canceled", ByStructure)
		return Verdict{Class: Canceled}, m
	}
	var f *Failure
	if !errors.As(err, &f) {
		f = nil
	}
	var hdr http.Header
	status := 0
	if f != nil {
		hdr = f.Header
		if f.Status >= 100 && f.Status <= 599 {
			status = f.Status
		}
	}
	text := scanText(err.Error())
	v = c.backendHints(hdr, text)
	if i := c.matchCustom(err, f, text); i >= 0 {
		v.Class = c.Custom[i].Class
		m = Match{Source: MatchConfig, Index: i, Name: c.Custom[i].Name, By: ByRule}
		return v, m
	}
	v.Class = c.builtinClass(err, f, status, text, &m)
	return v, m
}

// backendHints is what a failure's headers and text say of when to retry:
// its Retry-After (headers first, then the text) and x-should-retry.
func (c Classifier) backendHints(hdr http.Header, text string) (v Verdict) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if d, ok := ParseRetryAfter(hdr, now()); ok {
		v.RetryAfter = d
	} else if d, ok := retryAfterFromText(text); ok {
		v.RetryAfter = d
	}
	v.ShouldRetry = shouldRetryHeader(hdr)
	return v
}

// builtinClass is the built-in rules' class of err (f its *Failure or nil,
// status its HTTP status or 0, text its scanned text), steps 3 to 8 of
// Classify's order; m records which decided.
func (c Classifier) builtinClass(err error, f *Failure, status int, text string, m *Match) Class {
	switch {
	case f != nil && f.Class != "" && f.Class.Valid():
		m.builtin("runner verdict", ByStructure)
		return f.Class
	case connectFailed(err):
		m.builtin("connect timeout", ByStructure)
		return NetworkTransient
	case isTimeout(err):
		m.builtin("deadline", ByStructure)
		return Timeout
	}
	rules := c.Rules
	if rules == nil {
		rules = defaultRules
	}
	ev := analyze(text)
	if status != 0 {
		return c.classifyWithStatus(rules, ev, status, false, m)
	}
	if cl := classifyChain(err); cl != "" {
		m.builtin("go error chain", ByStructure)
		return cl
	}
	if toolDied(err, text) {
		m.builtin("tool died", ByStructure)
		return LogicError
	}
	if s := ev.status(); s != 0 {
		return c.classifyWithStatus(rules, ev, s, true, m)
	}
	if r, byCode := matchRule(rules, ev, 0, true); r != nil {
		m.builtinRule(r, byCode, 0)
		return r.Class
	}
	if cl, why := structureClass(ev); cl != "" {
		m.builtin(why, ByStructure)
		return cl
	}
	return c.undecided(ev, m)
}

// undecided decides a failure that neither structure nor the tables did:
// the learned model when it is sure enough, else the default the evidence
// points to (see defaultClass).
func (c Classifier) undecided(ev evidence, m *Match) Class {
	cl, why := defaultClass(ev)
	if cl != LogicError { // a crash without backend evidence is the default's
		p := c.textModel().predict(ev.text)
		if p.Class != "" && p.Class != Canceled && (p.Rule.Retry || p.DecisionProb >= sureNoRetry) {
			m.builtin(fmt.Sprintf("model %.2f", p.Prob), ByModel)
			m.weak = p.Prob < strongModelProb
			return p.Class
		}
	}
	m.builtin(why, ByDefault)
	return cl
}

// sureNoRetry is the probability of a no-retry decision (dead-letter at
// once) the model must reach to make it: below it, the default retries —
// when unsure, the decision that loses nothing ("boom", "the flux
// capacitor hiccuped" are retried as provider_error, not dead-lettered).
const sureNoRetry = 0.5

// strongModelProb is the probability from which a model's verdict is not
// weak (Verdict.Weak): below it, the verdict stands but an operator should
// look at it.
const strongModelProb = 0.8

// defaultClass is the class of a failure nothing decided, and why: a
// program's own crash — a stack trace (Python, Go, Node, Java, Rust) with
// no word of a network, a backend or a reply — is logic_error (retrying
// the same input fails the same way); anything else is provider_error,
// retryable as a backend's failure.
func defaultClass(ev evidence) (Class, string) {
	if ev.contains(crashMarkers...) && !ev.contains(backendWords...) {
		return LogicError, "no rule matched: a crash without backend evidence"
	}
	return ProviderError, "no rule matched"
}

var (
	// crashMarkers are the shapes of a program's own stack trace.
	crashMarkers = []string{
		"traceback (most recent call last)", "panic:", "goroutine ", "\n    at ",
		"exception in thread", "caused by:", "stack backtrace", "unhandled exception",
		"uncaught exception", "unhandledpromiserejection", "segmentation fault",
		"core dumped", "fatal error:",
	}
	// backendWords speak of a network, a backend or its reply.
	backendWords = []string{
		"http", "api", "connect", "socket", "request", "response", "status",
		"server", "timeout", "timed out", "network", "host", "dns", "tls", "ssl",
		"rate", "quota", "token", "model", "provider", "upstream", "gateway",
		"unavailable", "overload",
	}
)

// classifyWithStatus applies the text table, then the status table; a
// status that says only "the request was wrong" or "the server failed"
// (see modelRefines) defers to the learned model when it is sure of a
// class that status allows. quoted reports that the status was only
// quoted in the text. m records which decided.
func (c Classifier) classifyWithStatus(rules []TextRule, ev evidence, status int, quoted bool, m *Match) Class {
	r, byCode := matchRule(rules, ev, status, quoted)
	if r != nil {
		m.builtinRule(r, byCode, status)
		return r.Class
	}
	if allowed := modelRefines[status]; allowed != nil {
		if p := c.textModel().predict(ev.text); p.Prob >= strongModelProb && allowed[p.Class] {
			m.builtin(fmt.Sprintf("model %.2f under status %d", p.Prob, status), ByModel)
			return p.Class
		}
	}
	m.builtinRule(nil, false, status)
	return statusClass(status, ev)
}

// modelRefines lists the statuses whose class the text may refine, and the
// classes the model may then give: a 400 or 422 whose body says the prompt
// is too long, a 403 or 400 that is a spent balance, a 404 for a model
// that does not exist, a 500 or 503 that is an overload.
var modelRefines = func() map[int]map[Class]bool {
	client := map[Class]bool{ContextLength: true, NotSupported: true, QuotaExhausted: true, RateLimited: true}
	server := map[Class]bool{RateLimited: true, ContextLength: true, Timeout: true, NetworkTransient: true}
	return map[int]map[Class]bool{400: client, 403: client, 404: client, 422: client, 500: server, 502: server, 503: server}
}()

// textModel is c's learned model.
func (c Classifier) textModel() *textModel {
	if c.model != nil {
		return c.model
	}
	return builtinModel()
}

// statusClass is the class of an HTTP status (or ActionResponse code) when
// the text names none:
//
//   - 401, 403 (credentials, permissions) and other 4xx: invalid_request —
//     a caller or configuration error that retrying cannot fix and that says
//     nothing about the backend's health, so it never trips a breaker.
//   - 402 Payment Required: quota_exhausted.
//   - 404: invalid_request; a 404 whose text names an unknown model or
//     endpoint is not_supported (text table).
//   - 405, 501, 505: not_supported.
//   - 408, 499 (client gave up), 504, 522, 524: timeout.
//   - 413: context_length when the text speaks of tokens, size or length,
//     else invalid_request.
//   - 429 and Anthropic's 529: rate_limited.
//   - 424 Failed Dependency (a gateway whose upstream failed) and 5xx (500,
//     502, 503, …): provider_error. A 503 whose text says the model is
//     overloaded is rate_limited (text table).
//   - anything else: provider_error.
func statusClass(status int, ev evidence) Class {
	switch status {
	case 402:
		return QuotaExhausted
	case 405, 501, 505:
		return NotSupported
	case 408, 499, 504, 522, 524:
		return Timeout
	case 413:
		if ev.contains("token", "too large", "too long", "context", "length", "size") {
			return ContextLength
		}
		return InvalidRequest
	case 429, 529:
		return RateLimited
	case 424:
		return ProviderError
	}
	switch {
	case status >= 400 && status < 500:
		return InvalidRequest
	default:
		return ProviderError
	}
}

// connectFailed reports a timeout before the connection was made: a dial
// (*net.OpError Op "dial") that timed out or hit ETIMEDOUT, a DNS lookup that
// timed out, or net/http's TLS handshake timeout. The request was never sent,
// so this is network_transient, not timeout.
func connectFailed(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsTimeout {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		if opErr.Timeout() || errors.Is(opErr, syscall.ETIMEDOUT) ||
			errors.Is(opErr, context.DeadlineExceeded) || errors.Is(opErr, os.ErrDeadlineExceeded) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && containsFold(ne.Error(), "tls handshake timeout")
}

// isTimeout reports a deadline or network timeout anywhere in the chain.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// classifyChain looks at typed Go errors; "" when none is telling.
func classifyChain(err error) Class {
	var (
		unknownAuth x509.UnknownAuthorityError
		certInvalid x509.CertificateInvalidError
		hostname    x509.HostnameError
		verifyErr   *tls.CertificateVerificationError
		recordHdr   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknownAuth), errors.As(err, &certInvalid),
		errors.As(err, &hostname), errors.As(err, &verifyErr),
		errors.As(err, &recordHdr):
		return NetworkPermanent
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		// A name that does not exist is permanent; a resolver that failed or
		// timed out (EAI_AGAIN, "server misbehaving") may answer next time.
		if dnsErr.IsNotFound {
			return NetworkPermanent
		}
		return NetworkTransient
	}
	if errors.Is(err, syscall.ETIMEDOUT) {
		return Timeout
	}
	for _, errno := range transientErrnos {
		if errors.Is(err, errno) {
			return NetworkTransient
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return NetworkTransient
	}
	var (
		urlErr *url.Error
		opErr  *net.OpError
	)
	onTransport := errors.As(err, &urlErr) || errors.As(err, &opErr)
	if onTransport && errors.Is(err, io.EOF) {
		return NetworkTransient
	}
	if opErr != nil {
		return NetworkTransient
	}
	return ""
}

// toolDied reports an exec agent whose process died of its own death, not
// of the backend: the exit status of the process (an *exec.ExitError in the
// chain) says it was killed by SIGKILL (the OOM killer; a timeout is
// classified before this), SIGSEGV, SIGABRT, SIGBUS, SIGILL or SIGFPE, or a
// shell reported such a death as exit code 128+N (137, 139, 134); or the
// text has a line that is just the shell's "Killed" (or macOS "Killed: 9").
func toolDied(err error, text string) bool {
	// ExitCodeOf folds a death by signal N into 128+N, as a shell does.
	if code, ok := ExitCodeOf(err); ok {
		switch code {
		case 128 + int(syscall.SIGKILL), 128 + int(syscall.SIGSEGV), 128 + int(syscall.SIGABRT),
			128 + int(syscall.SIGBUS), 128 + int(syscall.SIGILL), 128 + int(syscall.SIGFPE):
			return true
		}
	}
	for line := range strings.Lines(text) {
		switch strings.TrimSpace(line) {
		case "Killed", "Killed: 9":
			return true
		}
	}
	return false
}

var transientErrnos = []syscall.Errno{
	syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.EPIPE, syscall.ECONNABORTED,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN, syscall.ENETRESET,
}

// matchRule returns the first matching rule, or nil, and whether it matched
// by a JSON body's code. quoted reports that status (if any) was only quoted
// in the text, not seen by the runner.
func matchRule(rules []TextRule, ev evidence, status int, quoted bool) (*TextRule, bool) {
	for i := range rules {
		r := &rules[i]
		switch r.Scope {
		case ScopeText:
			if status != 0 && !quoted {
				continue
			}
		case ScopeTransport:
			if status != 0 && status < 500 {
				continue
			}
		case ScopeNoStatus:
			if status != 0 {
				continue
			}
		}
		if ok, byCode := r.matches(ev); ok {
			return r, byCode
		}
	}
	return nil, false
}

// matches reports whether r matches ev, and whether by a JSON body's code.
func (r *TextRule) matches(ev evidence) (ok, byCode bool) {
	for _, code := range r.Codes {
		if _, ok := ev.codes[strings.ToLower(code)]; ok {
			byCode = true
			break
		}
	}
	if !byCode && !ev.contains(r.Any...) {
		return false, false
	}
	if len(r.And) > 0 && !ev.contains(r.And...) {
		return false, false
	}
	return len(r.Not) == 0 || !ev.contains(r.Not...), byCode
}

// evidence is the pre-digested error text.
type evidence struct {
	lower    string
	codes    map[string]struct{}
	jsonCode int    // numeric error.code of a JSON body (Gemini: 429), 0 if none
	text     string // the original text, for the quoted-status search
}

func (e evidence) contains(subs ...string) bool {
	for _, s := range subs {
		if s != "" && strings.Contains(e.lower, s) {
			return true
		}
	}
	return false
}

// status is the HTTP status the text itself reveals, 0 if none: a JSON
// body's numeric code, else a status quoted in prose.
func (e evidence) status() int {
	if e.jsonCode != 0 {
		return e.jsonCode
	}
	if m := quotedStatusRe.FindStringSubmatch(e.text); m != nil {
		if n, err := strconv.Atoi(m[1] + m[2] + m[3]); err == nil && n >= 400 && n <= 599 {
			return n
		}
	}
	if n := quotedStatusMore(e.lower); n != 0 {
		return n
	}
	return reasonStatus(e.text)
}

// statusMarkers precede a status and a colon in tools' messages: a bare
// "code:" ("OpenAI: error code: 1020 (code: 403)", "code=429") and
// google.api_core's exception names ("ServiceUnavailable: 503 …",
// "InvalidArgument: 400 …", "DeadlineExceeded: 504 …").
var statusMarkers = []string{
	"code", "unavailable", "exceeded", "exhausted", "argument", "notfound", "denied",
	"unauthenticated", "forbidden", "badrequest", "toomanyrequests", "gatewaytimeout",
	"precondition", "unimplemented",
}

// reasonPhrases follow a status: "github request failed: 403 Forbidden",
// requests' "503 Server Error: Service Unavailable for url".
var reasonPhrases = []string{
	" forbidden", " unauthorized", " not found", " bad request", " too many requests",
	" internal server error", " bad gateway", " service unavailable", " gateway timeout",
	" gateway time-out", " request timeout", " payload too large", " request entity too large",
	" unprocessable entity", " client error", " server error",
}

// quotedStatusMore finds, in lower-case text, the leftmost 4xx or 5xx status
// in the shapes quotedStatusRe leaves out: after a statusMarker and a colon
// (or "=" after "code"), or before a reasonPhrase. 0 if none. It is a plain
// scan, not a regular expression: it runs on most texts that carry no
// status, and an alternation this wide would triple the cost of a verdict.
func quotedStatusMore(lower string) int {
	best, bestAt := 0, len(lower)
	for _, mk := range statusMarkers {
		if n, at := firstStatus(lower, mk, bestAt, afterMarker); n != 0 {
			best, bestAt = n, at
		}
	}
	for _, ph := range reasonPhrases {
		if n, at := firstStatus(lower, ph, bestAt, beforePhrase); n != 0 {
			best, bestAt = n, at
		}
	}
	return best
}

// firstStatus returns the status found by status(lower, needle, i) at the
// leftmost occurrence i of needle that starts before limit and has one,
// and where that status starts; 0 if none.
func firstStatus(lower, needle string, limit int, status func(lower, needle string, i int) (n, at int)) (int, int) {
	for from := 0; from < limit; {
		i := strings.Index(lower[from:limit], needle)
		if i < 0 {
			break
		}
		i += from
		from = i + len(needle)
		if n, at := status(lower, needle, i); n != 0 {
			return n, at
		}
	}
	return 0, 0
}

// afterMarker reads the status after statusMarker mk at i and a colon (or
// "=" after "code").
func afterMarker(lower, mk string, i int) (int, int) {
	if mk == "code" && i > 0 && isWordByte(lower[i-1]) {
		return 0, 0 // "errcode", "statuscode": quotedStatusRe's
	}
	j := skipSpaces(lower, i+len(mk))
	if j >= len(lower) || (lower[j] != ':' && (mk != "code" || lower[j] != '=')) {
		return 0, 0
	}
	return statusAt(lower, skipSpaces(lower, j+1)), i
}

// beforePhrase reads the status before reasonPhrase ph at i ("403
// forbidden"): a whole word of three digits, the phrase a whole word too.
func beforePhrase(lower, ph string, i int) (int, int) {
	if end := i + len(ph); end < len(lower) && isWordByte(lower[end]) {
		return 0, 0
	}
	if i < 3 || (i > 3 && isWordByte(lower[i-4])) {
		return 0, 0
	}
	return statusAt(lower, i-3), i - 3
}

// statusAt reads a 4xx or 5xx status of exactly three digits at s[i:]; 0 if
// there is none.
func statusAt(s string, i int) int {
	if i+3 > len(s) || (s[i] != '4' && s[i] != '5') || !isDigit(s[i+1]) || !isDigit(s[i+2]) ||
		(i+3 < len(s) && isWordByte(s[i+3])) {
		return 0
	}
	return int(s[i]-'0')*100 + int(s[i+1]-'0')*10 + int(s[i+2]-'0')
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isWordByte(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// scanText bounds the text: the head and the tail of very long texts.
func scanText(s string) string {
	if len(s) <= 2*maxScan {
		return s
	}
	return s[:maxScan] + "\n…\n" + s[len(s)-maxScan:]
}

var (
	// codeRe picks "type"/"code"/"status"/"reason" string values out of JSON,
	// escaped JSON inside a string, or a Python dict repr.
	codeRe = regexp.MustCompile(`(?i)\\?["'](?:type|code|status|reason|error_type|error_code)\\?["']\s*:\s*\\?["']([a-z0-9_.\-]{2,64})\\?["']`)
	// quotedStatusRe finds a status that SDKs and CLIs quote in their messages:
	// "Error code: 429 - {...}" (Python SDKs), "API Error: 529 {...}" and
	// "Error: 400 {...}" (Node SDKs), "status code: 503", Cohere's
	// "status_code: 429", Node's "statusCode=407", "HTTP 502",
	// openai-node's "401 status code (no body)", and an exception named
	// before "<status> - " (Spring AI's "NonTransientAiException: 400 - Bad
	// Request"). Other shapes: quotedStatusMore.
	quotedStatusRe = regexp.MustCompile(`(?i)(?:(?:error code|status[ _]?code|status|http(?:/[0-9.]+)?|api error|error)\s*[:=(]?\s*([1-5][0-9]{2})\b|\b([1-5][0-9]{2}) status code\b|exception:\s*(?:http\s+)?([1-5][0-9]{2}) - )`)
)

func analyze(text string) evidence {
	ev := evidence{lower: strings.ToLower(text), codes: map[string]struct{}{}}
	for _, m := range codeRe.FindAllStringSubmatch(text, 64) {
		ev.codes[strings.ToLower(m[1])] = struct{}{}
	}
	ev.jsonCode = parseJSONBody(text, ev.codes)
	ev.text = text
	return ev
}

// parseJSONBody decodes the first JSON value in text (a provider's error
// body, possibly after a prefix such as "API Error: 529 "), adds its
// error.type/code/status values to codes and returns a numeric error.code
// that looks like an HTTP status (Gemini's {"error":{"code":429,...}}).
func parseJSONBody(text string, codes map[string]struct{}) int {
	i := strings.IndexAny(text, "{[")
	if i < 0 {
		return 0
	}
	var body any
	dec := json.NewDecoder(strings.NewReader(text[i:]))
	dec.UseNumber()
	if dec.Decode(&body) != nil {
		return 0
	}
	status := 0
	var visit func(v any, depth int)
	visit = func(v any, depth int) {
		if depth > 4 {
			return
		}
		switch t := v.(type) {
		case []any:
			for j, e := range t {
				if j >= 4 {
					break
				}
				visit(e, depth+1)
			}
		case map[string]any:
			for _, k := range []string{"type", "code", "status"} {
				switch val := t[k].(type) {
				case string:
					codes[strings.ToLower(val)] = struct{}{}
				case json.Number:
					if n, err := val.Int64(); err == nil && n >= 400 && n <= 599 && status == 0 {
						status = int(n)
					}
				}
			}
			if e, ok := t["error"]; ok {
				visit(e, depth+1)
			}
		}
	}
	visit(body, 0)
	return status
}

// ParseRetryAfter reads how long the backend asks the client to wait:
// retry-after-ms (milliseconds, as OpenAI and Anthropic send it) first, then
// Retry-After as delay-seconds or as an HTTP-date relative to now. ok is false
// when no header is present or none parses. The result is never negative (a
// date in the past is 0, true) and never above RetryAfterCap.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(ms) && !math.IsInf(ms, 0) {
			return capDuration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, false
		}
		return capDuration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return capDuration(float64(t.Sub(now))), true
	}
	return 0, false
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring ASCII case, without allocating.
func containsFold(s, sub string) bool {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for ; j < n; j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

// capDuration converts nanoseconds to a Duration within [0, RetryAfterCap].
func capDuration(ns float64) time.Duration {
	switch {
	case math.IsNaN(ns) || ns <= 0:
		return 0
	case ns >= float64(RetryAfterCap):
		return RetryAfterCap
	default:
		return time.Duration(ns)
	}
}

func shouldRetryHeader(h http.Header) int {
	if h == nil {
		return 0
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("X-Should-Retry"))) {
	case "true":
		return 1
	case "false":
		return -1
	}
	return 0
}

var (
	// "Please try again in 20s", "try again in 644ms", "Please retry in
	// 58.821668433s", "try again in 1m30s".
	retryGoDurRe = regexp.MustCompile(`(?i)(?:try again|retry|retrying)\s+(?:in|after)\s+((?:[0-9]+(?:\.[0-9]+)?(?:ms|h|m|s))+)\b`)
	// "retry after 7 seconds", "Try again in 30 seconds", "in 2 minutes".
	retryWordRe = regexp.MustCompile(`(?i)(?:try again|retry|retrying)\s+(?:in|after)\s+([0-9]+(?:\.[0-9]+)?)\s*(milliseconds?|seconds?|secs?|minutes?|mins?|hours?)\b`)
	// Gemini's google.rpc.RetryInfo: "retryDelay": "58s".
	retryDelayRe = regexp.MustCompile(`(?i)\\?["']retryDelay\\?["']\s*:\s*\\?["']([0-9]+(?:\.[0-9]+)?s)\\?["']`)
)

// retryAfterFromText finds a delay the backend asked for in prose.
func retryAfterFromText(text string) (time.Duration, bool) {
	if !containsFold(text, "retry") && !containsFold(text, "try again") {
		return 0, false
	}
	for _, re := range []*regexp.Regexp{retryGoDurRe, retryDelayRe} {
		if m := re.FindStringSubmatch(text); m != nil {
			if d, err := time.ParseDuration(strings.ToLower(m[1])); err == nil {
				return capDuration(float64(d)), true
			}
		}
	}
	if m := retryWordRe.FindStringSubmatch(text); m != nil {
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, false
		}
		unit := time.Second
		switch u := strings.ToLower(m[2]); {
		case strings.HasPrefix(u, "milli"):
			unit = time.Millisecond
		case strings.HasPrefix(u, "min"):
			unit = time.Minute
		case strings.HasPrefix(u, "hour"):
			unit = time.Hour
		}
		return capDuration(n * float64(unit)), true
	}
	return 0, false
}
