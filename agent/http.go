package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/jsonscan"
	"github.com/agentq/agentq/internal/redact"
	"github.com/agentq/agentq/resilience"
)

// Body modes of HTTPConfig.Body.
const (
	BodyRequest = "request" // the whole ActionRequest (the default)
	BodyParams  = "params"  // the request's params alone
)

// DefaultMaxResponse is the zero value of HTTPConfig.MaxResponse.
const DefaultMaxResponse int64 = 4 << 20

// maxErrorBody caps the body kept as the text of a non-2xx failure.
const maxErrorBody = 8 << 10

// MaxRedirects is the most redirects one call follows; one more fails the
// call with a *RedirectError (network_permanent).
const MaxRedirects = 5

// ErrRedirectRefused is matched (errors.Is) by every *RedirectError.
var ErrRedirectRefused = errors.New("redirect refused")

// RedirectError is the error of a call that ended on a redirect the runner
// would not follow: one to another host or scheme while the agent has
// configured headers (they would go to that host too: an API key, or a
// bearer token in clear after https→http), or one past MaxRedirects. The
// call fails with class network_permanent: the endpoint is misconfigured
// for this agent and retrying will not change it.
type RedirectError struct {
	// Location is the redirect target, redacted (no userinfo, no query).
	Location string
	// From is the URL the call was sent to, redacted likewise.
	From string
	// Reason says why the redirect was refused.
	Reason string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("redirect to %s refused: %s", e.Location, e.Reason)
}

// Is makes errors.Is(err, ErrRedirectRefused) true.
func (e *RedirectError) Is(target error) bool { return target == ErrRedirectRefused }

// HTTPConfig configures an http agent.
type HTTPConfig struct {
	// URL is the endpoint the request is POSTed to (http or https).
	URL string
	// Headers are added to every request. Values may hold ${VAR}, expanded
	// from Getenv at request time (see ExpandEnv); the expanded values are
	// never stored nor logged, and are redacted from the reply's text and
	// data when the endpoint echoes them (see Run). Content-Type defaults
	// to application/json.
	Headers map[string]string
	// Body selects what is POSTed: "request" (the zero value: the
	// ActionRequest JSON) or "params" (the params alone).
	Body string
	// MaxResponse caps the size of a 2xx body; a larger one fails the call as
	// logic_error. Zero: 4 MiB.
	MaxResponse int64
	// Client sends the requests. Zero: a shared client whose transport
	// bounds dialing and TLS handshakes (10 s each) and otherwise relies on
	// the call's context for its deadline.
	// Its CheckRedirect is replaced by the runner's redirect rules (a
	// copy of the client is used; its Transport is shared).
	Client *http.Client
	// Getenv expands ${VAR} in Headers; zero: os.Getenv.
	Getenv func(string) string
}

// HTTP runs an agent behind an HTTP endpoint (DESIGN.md "HTTP agent
// protocol"). It is safe for concurrent use.
type HTTP struct {
	cfg     HTTPConfig
	secrets secretCache
}

var _ Runner = (*HTTP)(nil)

// defaultClient is shared by every HTTP runner without a Client of its own,
// so connections are pooled across agents. Its pool keeps as many idle
// connections per host as a busy worker has calls in flight to one
// provider (hundreds): with a smaller pool, every call beyond it opened a
// new connection and closed it after, which cost 0.76× plain asynq's rate
// on 200 ms calls at concurrency 400 (BenchmarkIOBound). Idle connections
// still close after 90 s.
var defaultClient = &http.Client{
	Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	},
}

// NewHTTP validates cfg, fills in its defaults and returns the runner.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("agent: http url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent: http url %q: want an absolute http:// or https:// URL", cfg.URL)
	}
	switch cfg.Body {
	case "":
		cfg.Body = BodyRequest
	case BodyRequest, BodyParams:
	default:
		return nil, fmt.Errorf("agent: http body %q: want %q or %q", cfg.Body, BodyRequest, BodyParams)
	}
	if cfg.MaxResponse < 0 {
		return nil, fmt.Errorf("agent: http max_response %d is negative", cfg.MaxResponse)
	}
	if cfg.MaxResponse == 0 {
		cfg.MaxResponse = DefaultMaxResponse
	}
	for k := range cfg.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return nil, fmt.Errorf("agent: http header name %q is invalid", k)
		}
	}
	if cfg.Client == nil {
		cfg.Client = defaultClient
	}
	// A copy of the client that shares its Transport (and so its connection
	// pool) but follows redirects by this runner's rules.
	client := *cfg.Client
	client.CheckRedirect = checkRedirect(len(cfg.Headers) > 0)
	cfg.Client = &client
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	headers := make(map[string]string, len(cfg.Headers))
	for k, v := range cfg.Headers {
		headers[k] = v
	}
	cfg.Headers = headers
	return &HTTP{cfg: cfg}, nil
}

// checkRedirect is the CheckRedirect of an http agent's client. Go copies
// every header of the first request onto a redirected one and strips only
// Authorization and Cookie when the host changes, so a custom header such
// as x-api-key would reach any host the endpoint redirects to, and an
// https→http redirect on the same host would send Authorization in clear.
// With configured headers, a redirect must stay on the first request's
// scheme and host (port included); without, any redirect is followed. At
// most MaxRedirects redirects are followed either way.
func checkRedirect(hasHeaders bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		fail := func(format string, args ...any) error {
			return &RedirectError{Location: redact.URL(req.URL.String()), From: redact.URL(first.String()), Reason: fmt.Sprintf(format, args...)}
		}
		if len(via) > MaxRedirects {
			return fail("stopped after %d redirects", MaxRedirects)
		}
		if !hasHeaders {
			return nil
		}
		if !strings.EqualFold(req.URL.Scheme, first.Scheme) {
			return fail("it would send the agent's configured headers over %s instead of %s", req.URL.Scheme, first.Scheme)
		}
		if hostPort(req.URL) != hostPort(first) {
			return fail("it would send the agent's configured headers to another host (%s, not %s)", req.URL.Host, first.Host)
		}
		return nil
	}
}

// hostPort is u's lower-cased host with its port, the scheme's default when
// u has none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Run POSTs the request and maps the reply. The values its ${VAR}
// expansions put in the headers are redacted (redact.Marker) from
// everything it returns: error texts, errors and data (see secrets.go).
// Outcomes, all failures being
// *resilience.Failure:
//   - 2xx: success; data is the body when it is JSON, the body as a JSON
//     string otherwise, null when empty. A body over MaxResponse: logic_error.
//     A body {"status":"suspend","wait":{…}} suspends the run: a
//     *SuspendError (a wait that is not one: logic_error).
//   - other statuses: Status, Header (a copy) and Text (the body, at most
//     8 KiB); the classifier decides.
//   - transport errors: Err is the client's error, chain intact
//     (*url.Error → *net.OpError → syscall errno, x509 errors, …), with the
//     URL in its text redacted (internal/redact: no userinfo, no query).
//   - a redirect it will not follow (see checkRedirect): a *RedirectError
//     naming the Location, Class network_permanent.
//   - ctx deadline: Class timeout; ctx canceled: Class canceled.
//   - a 2xx reply of Content-Type text/event-stream: each event is
//     relayed to req.Emit (when set) as an EventOutput as it arrives,
//     its data the event's JSON when it is JSON, else the string. An
//     OpenAI chat-completions stream (data: {"choices":[{"delta":…}]} …
//     data: [DONE]) is assembled into the non-streaming chat.completion
//     object; an Anthropic messages stream (message_start …
//     message_stop) into the non-streaming message; any other stream's
//     data is the JSON list of its events' data. An error event inside
//     the stream fails the call with the status its error type stands
//     for (overloaded_error 529, rate_limit_error 429, …) and the event
//     as its Text; an OpenAI or Anthropic stream that ends before its end
//     marker fails with io.ErrUnexpectedEOF (network_transient); a stream
//     over MaxResponse is logic_error.
//
// Its result, events and failure's text are valid UTF-8: the agent's
// invalid bytes are replaced by U+FFFD (see valid.go).
func (h *HTTP) Run(ctx context.Context, req Request) (json.RawMessage, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, ctxFailure(ctx, start, err)
	}
	hreq, secrets, err := h.request(ctx, req)
	if err != nil {
		return nil, err
	}
	red := h.secrets.get(secrets)
	emit := req.Emit
	if emit != nil && red != nil {
		emit = func(typ string, data json.RawMessage) { req.Emit(typ, red.JSON(data)) }
	}
	data, err := h.do(ctx, start, hreq, emit)
	return validOutcome(scrub(red, data, err))
}

// do sends hreq and maps the reply (see Run); a streamed reply's events
// go to emit (when set).
func (h *HTTP) do(ctx context.Context, start time.Time, hreq *http.Request, emit func(string, json.RawMessage)) (json.RawMessage, error) {
	resp, err := h.cfg.Client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxFailure(ctx, start, ctx.Err())
		}
		// The *url.Error text holds the URL (a query may carry an API key).
		err = redact.Error(err)
		if errors.Is(err, ErrRedirectRefused) {
			return nil, &resilience.Failure{Err: err, Class: resilience.NetworkPermanent}
		}
		return nil, &resilience.Failure{Err: err}
	}
	defer resp.Body.Close()
	ObserveReply(ctx, Reply{Status: resp.StatusCode, Header: resp.Header})
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		text, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if err != nil && ctx.Err() != nil {
			return nil, ctxFailure(ctx, start, ctx.Err())
		}
		// A read error here still leaves a useful status; keep what we have.
		return nil, &resilience.Failure{
			Status: resp.StatusCode,
			Header: resp.Header.Clone(),
			Text:   sanitizeText(truncate(string(text), maxErrorBody)),
		}
	}
	if isEventStream(resp.Header) {
		return h.stream(ctx, start, resp, emit)
	}
	return h.result(ctx, start, resp.Body, resp.ContentLength)
}

// request builds the POST of req: its ActionRequest JSON (or its params
// alone, with body: params), the configured headers, ${VAR} expanded, and
// the W3C traceparent and tracestate headers when req has them. secrets
// are the values the expansions produced and the header values that held
// them.
func (h *HTTP) request(ctx context.Context, req Request) (hreq *http.Request, secrets []string, err error) {
	var body []byte
	if h.cfg.Body == BodyParams {
		body = req.Params
		if len(bytes.TrimSpace(body)) == 0 {
			body = []byte("null")
		}
	} else {
		var err error
		if body, err = marshalRequest(req); err != nil {
			return nil, nil, &resilience.Failure{Err: fmt.Errorf("agent: encode request: %w", err), Class: resilience.InvalidRequest}
		}
	}
	hreq, err = http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, nil, &resilience.Failure{Err: fmt.Errorf("agent: build request: %w", err), Class: resilience.InvalidRequest}
	}
	// Both headers' values in one array (Header.Set makes one per value).
	jsonType := []string{"application/json", "application/json"}
	hreq.Header["Content-Type"], hreq.Header["Accept"] = jsonType[0:1:1], jsonType[1:2:2]
	for k, v := range h.cfg.Headers {
		v, vals := expandEnv(v, h.cfg.Getenv, true)
		if len(vals) > 0 {
			secrets = append(secrets, vals...)
			secrets = append(secrets, v)
		}
		if strings.EqualFold(k, "Host") {
			hreq.Host = v
			continue
		}
		hreq.Header.Set(k, v)
	}
	if req.Traceparent != "" {
		// W3C trace context: the agent's spans join the task's trace.
		hreq.Header.Set("traceparent", req.Traceparent)
		if req.Tracestate != "" {
			hreq.Header.Set("tracestate", req.Tracestate)
		}
	}
	return hreq, secrets, nil
}

// result reads a 2xx reply's body, up to MaxResponse: its JSON as the
// result data, a body that is not JSON as a JSON string, an empty one as
// null. size is its Content-Length (-1: unknown).
func (h *HTTP) result(ctx context.Context, start time.Time, body io.Reader, size int64) (json.RawMessage, error) {
	data, err := readAll(io.LimitReader(body, h.cfg.MaxResponse+1), min(size, h.cfg.MaxResponse)+1)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxFailure(ctx, start, ctx.Err())
		}
		return nil, &resilience.Failure{Err: fmt.Errorf("agent: read response: %w", err)}
	}
	if int64(len(data)) > h.cfg.MaxResponse {
		return nil, &resilience.Failure{
			Class: resilience.LogicError,
			Text:  fmt.Sprintf("response exceeds %d bytes", h.cfg.MaxResponse),
		}
	}
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return json.RawMessage("null"), nil
	case jsonscan.Valid(data):
		if err := suspendBody(data); err != nil {
			return nil, err
		}
		return json.RawMessage(data), nil
	default:
		s, err := json.Marshal(string(data))
		if err != nil { // cannot happen for a string
			return nil, &resilience.Failure{Err: err, Class: resilience.LogicError}
		}
		return s, nil
	}
}

// suspendBody is the *SuspendError (or logic_error) of a 2xx body that is
// a suspend reply ({"status":"suspend",…}); nil for any other body.
func suspendBody(data []byte) error {
	if data[0] != '{' || !bytes.Contains(data, []byte(`"suspend"`)) {
		return nil
	}
	var r suspendReply
	if json.Unmarshal(data, &r) != nil || r.Status != "suspend" {
		return nil
	}
	return suspendOf(r.Wait, r.Usage, time.Now())
}

// readAll is io.ReadAll(r) into a buffer of capacity size at first (a
// reply's Content-Length and one byte, which sees its end): one
// allocation for a body of the length it said, where io.ReadAll's
// 512-byte start grows it several times. size < 1: io.ReadAll's own.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size < 1 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow: the body is longer than it said
		}
	}
}
