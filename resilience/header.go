package resilience

import (
	"net/http"
	"strings"
)

// The back-pressure headers: the reply headers agentq reads to know when
// and whether to call a backend again. ParseRetryAfter reads Retry-After
// and retry-after-ms, the classifier x-should-retry, and the worker's
// provider pauses (internal/limit's ExhaustedFor) OpenAI's
// x-ratelimit-{remaining,reset}-{requests,tokens} and Anthropic's
// anthropic-ratelimit-*-{remaining,reset}.
//
// An HTTP agent's failure carries every header of its reply; an exec
// agent's ActionResponse "headers" are cut down to these
// (BackPressureHeaders), and so are the headers the agent helpers in
// clients/ pass on (each writes this list once, in its own language).
var (
	backPressureNames    = []string{"Retry-After", "Retry-After-Ms", "X-Should-Retry"}
	backPressurePrefixes = []string{"x-ratelimit-", "anthropic-ratelimit-"}
)

// BackPressureHeader reports whether a reply header named name (any
// case) is a back-pressure header: Retry-After, retry-after-ms,
// x-should-retry, x-ratelimit-* or anthropic-ratelimit-*.
func BackPressureHeader(name string) bool {
	for _, n := range backPressureNames {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	for _, p := range backPressurePrefixes {
		if len(name) > len(p) && strings.EqualFold(name[:len(p)], p) {
			return true
		}
	}
	return false
}

// BackPressureHeaders keeps the back-pressure headers of h (name →
// value, as an exec agent's ActionResponse sends them), under their
// canonical names; nil when none is kept.
func BackPressureHeaders(h map[string]string) http.Header {
	var out http.Header
	for name, v := range h {
		if !BackPressureHeader(name) {
			continue
		}
		if out == nil {
			out = make(http.Header, len(h))
		}
		out.Set(name, v)
	}
	return out
}
