package limit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/resilience"
)

// MaxPause caps a pause learnt from a provider's headers, so that a
// wrong or hostile header cannot stop a key for a day.
const MaxPause = resilience.RetryAfterCap

// ExhaustedFor reads a provider's reply (its HTTP status and headers) for
// a statement that its key is exhausted, and returns how long the key
// should pause and why (for history and logs). ok is false when the reply
// says nothing of the kind. It knows:
//
//   - OpenAI: x-ratelimit-remaining-requests: 0 with
//     x-ratelimit-reset-requests (a Go-like duration: 1s, 6m0s, 20ms);
//     the same for -tokens.
//   - Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,
//     output-tokens}-remaining: 0 with the matching -reset (RFC 3339).
//   - a 429 with Retry-After (seconds or an HTTP date) or retry-after-ms.
//
// Several exhausted limits pause for the longest of their resets. The
// pause is capped at MaxPause.
//
// Every header it reads is on resilience's back-pressure allowlist
// (resilience.BackPressureHeader): an exec agent's ActionResponse
// "headers" are cut down to that list, and reach it as an HTTP reply's do.
func ExhaustedFor(status int, h http.Header, now time.Time) (d time.Duration, reason string, ok bool) {
	if h == nil && status != http.StatusTooManyRequests {
		return 0, "", false
	}
	var p pause
	for _, l := range openAILimits {
		if remainingZero(headerValue(h, l.remaining)) {
			if w, good := parseResetDuration(headerValue(h, l.reset)); good {
				p.take(w, func() string { return fmt.Sprintf("provider: x-ratelimit-remaining-%s 0, reset %s", l.name, w) })
			}
		}
	}
	for _, l := range anthropicLimits {
		if remainingZero(headerValue(h, l.remaining)) {
			v := strings.TrimSpace(headerValue(h, l.reset))
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				p.take(t.Sub(now), func() string { return fmt.Sprintf("provider: anthropic-ratelimit-%s-remaining 0, reset %s", l.name, v) })
			}
		}
	}
	if status == http.StatusTooManyRequests {
		if w, good := resilience.ParseRetryAfter(h, now); good {
			p.take(w, func() string { return fmt.Sprintf("provider: 429 with retry-after %s", w) })
		}
	}
	return p.d, p.reason, p.ok
}

// providerLimit is one limit a provider reports, with its headers'
// canonical names (built once: ExhaustedFor reads every agent reply, and a
// name built and canonicalized per reply cost allocations on every call).
type providerLimit struct{ name, remaining, reset string }

var (
	openAILimits = []providerLimit{
		openAILimit("requests"), openAILimit("tokens"),
	}
	anthropicLimits = []providerLimit{
		anthropicLimit("requests"), anthropicLimit("tokens"), anthropicLimit("input-tokens"), anthropicLimit("output-tokens"),
	}
)

func openAILimit(l string) providerLimit {
	return providerLimit{l, http.CanonicalHeaderKey("X-Ratelimit-Remaining-" + l), http.CanonicalHeaderKey("X-Ratelimit-Reset-" + l)}
}

func anthropicLimit(l string) providerLimit {
	return providerLimit{l, http.CanonicalHeaderKey("Anthropic-Ratelimit-" + l + "-Remaining"), http.CanonicalHeaderKey("Anthropic-Ratelimit-" + l + "-Reset")}
}

// headerValue is h.Get(key) for a canonical key, without canonicalizing it
// again.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// pause is the longest pause ExhaustedFor found so far, capped at
// MaxPause; its reason is formatted only for a pause that is kept.
type pause struct {
	d      time.Duration
	reason string
	ok     bool
}

func (p *pause) take(w time.Duration, why func() string) {
	if w <= 0 {
		return
	}
	if w > MaxPause {
		w = MaxPause
	}
	if w > p.d {
		p.d, p.reason, p.ok = w, why(), true
	}
}

func remainingZero(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	n, err := strconv.ParseFloat(v, 64)
	return err == nil && n <= 0
}

// parseResetDuration reads OpenAI's reset header: a Go-like duration
// ("1s", "6m0s", "20ms", "1h2m3.5s"), or plain seconds ("2", "0.5").
func parseResetDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d, d > 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 && s < 1e9 {
		return time.Duration(s * float64(time.Second)), true
	}
	return 0, false
}
