// Package resilience decides what a failed agent call means and what to do
// about it: the error classes and their classifier, backoff with jitter and
// the retry decision policy. It is pure Go: no Redis, no clock but the one
// passed in.
//
// # Classes and the classifier
//
// Every failure gets one of the stable classes of class.go. Classify (or a
// Classifier with its own clock and rules) looks at, in order: context
// cancellation, the operator's rules (Classifier.Custom: CustomRule, from
// config classifier.rules), a runner's own verdict (Failure.Class, WithClass), deadlines
// and network timeouts, the HTTP status together with the provider's body,
// the typed Go error chain (x509/TLS, DNS, syscall errnos, unexpected EOF)
// and finally the error text alone — an exec agent's stderr tail or a Go
// function's error string, often the only evidence there is. Unrecognised
// failures are provider_error: retryable, and counted as the backend's fault.
// Explain gives the same verdict and names the evidence that decided it (a
// configured rule's index, a text rule's name, the status, …).
//
// Text evidence is data: a table of TextRule rows (DefaultRules), first match
// wins, matched case-insensitively against the text and against the
// error.type / error.code / error.status values of a JSON body (or of a
// Python dict repr, as the OpenAI and Anthropic SDKs print them). The table
// knows real messages from OpenAI, Azure OpenAI, Anthropic, Gemini/Vertex,
// OpenRouter, LiteLLM, Python httpx/requests/urllib3/aiohttp, Node
// undici/axios and Go net/http; classify_test.go cites where each came from.
//
// Decisions the table encodes, beyond DESIGN.md's hard cases:
//
//   - 401/403 and invalid API keys are invalid_request: a configuration error
//     that retrying cannot fix and that says nothing about the backend's
//     health, so it is dead-lettered and never trips a breaker.
//   - A model or endpoint the backend does not have (OpenAI model_not_found,
//     "does not exist or you do not have access", OpenRouter "No endpoints
//     found") is not_supported; a bare 404 is invalid_request; 405, 501 and
//     505 are not_supported.
//   - An overloaded backend (Anthropic 529 overloaded_error, Gemini 503 "The
//     model is overloaded" / "high demand") is rate_limited, so Retry-After is
//     honoured; a plain 500/502/503 is provider_error.
//   - Quota that waiting will not restore is quota_exhausted: OpenAI
//     insufficient_quota (even on a 429), billing and credit messages
//     (Anthropic's "credit balance is too low" arrives as a 400), OpenRouter
//     402, Gemini RESOURCE_EXHAUSTED with a per-day violation. A per-minute
//     Gemini/Vertex quota, or a plain RESOURCE_EXHAUSTED, is rate_limited.
//   - OpenAI's "Request too large for … tokens per min" is context_length: a
//     request bigger than the whole per-minute budget never succeeds by waiting.
//   - Transport words ("timeout", "connection reset") count only when no
//     status is known or the status is 5xx, so a 400 about a "timeout"
//     parameter stays invalid_request. A DNS name that does not exist, and
//     certificate and TLS-version failures, are network_permanent; connection
//     refused/reset, EOF, GOAWAY and "fetch failed" are network_transient.
//   - In a tool's own output with no status, programming errors (Go panics,
//     Python ImportError/KeyError/TypeError, Node "Cannot find module") are
//     logic_error: the agent is broken, not the backend.
//
// The verdict also carries the backend's wishes: Retry-After (retry-after-ms,
// seconds or HTTP-date; see ParseRetryAfter), else a "try again in 20s" or
// Gemini retryDelay in the text, capped at RetryAfterCap; and x-should-retry.
//
// # Backoff and the decision policy
//
// Backoff.Delay(n) is min(Max, Initial·2^(n−1)) spread by ±Jitter, overflow
// safe. Policy is DESIGN.md's decision table as data (DefaultPolicy), every
// cell configurable per class (Policy.With). Policy.Decide turns a Verdict and
// the attempt count into an Action — succeed, retry after a delay, restart
// later, dead_letter, or requeue for a canceled task — with a Reason.
//
// A Retry-After longer than the backoff replaces it, for any class; one longer
// than DecideInput.MaxRetryAfter (60s by default) ends the run instead of
// holding a worker. x-should-retry: false stops in-run retries;
// x-should-retry: true may retry a class whose rule says no only for the
// network, timeout and provider classes, never for classes about the request
// itself (quota, context length, invalid, unsupported, logic).
//
// The Redis-backed parts live in their own packages: the shared circuit
// breaker and agent health in internal/breaker, the provider limits in
// internal/limit. This package imports no Redis client.
package resilience
