package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/redisx"
)

// Error codes of the API (stable: clients branch on them).
const (
	CodeInvalidRequest       = "invalid_request"         // 400: malformed JSON, a bad field, an unknown agent
	CodeUnauthorized         = "unauthorized"            // 401: missing or wrong bearer token
	CodeForbidden            = "forbidden"               // 403: a cross-origin request, or a foreign Host on a loopback address
	CodeNotFound             = "not_found"               // 404: no such task, dead letter or route
	CodeMethodNotAllowed     = "method_not_allowed"      // 405: the route exists with other methods
	CodeAgentUnavailable     = "agent_unavailable"       // 409: fail-fast enqueue refused, the agent's breaker is open
	CodeBudgetExhausted      = "budget_exhausted"        // 409: fail-fast enqueue refused, the task's tenant or agent budget is exhausted
	CodeTaskEnded            = "task_ended"              // 409: cancel or signal of a task that has already ended (state says how)
	CodeInvalidSignal        = "invalid_signal"          // 400: a signal's name is not 1-128 characters of [A-Za-z0-9._:-], or its body is not JSON
	CodeSignalCap            = "signal_cap"              // 409: the task has the most signals a task keeps (64)
	CodeConflict             = "conflict"                // 409: a dead letter another requeue is requeueing, or not at the run named
	CodeRequestTooLarge      = "request_too_large"       // 413: the body is over the size limit
	CodeUnsupportedMediaType = "unsupported_media_type"  // 415: a write whose Content-Type is not application/json
	CodeTooManyRequests      = httpx.CodeTooManyRequests // 429: too many wrong bearer tokens from this client address (Retry-After)
	CodeInternal             = "internal"                // 500: a bug or an unexpected Redis reply
	CodeUnavailable          = "unavailable"             // 503: Redis cannot answer
	CodeOverCapacity         = "over_capacity"           // 503: too many open waits and event streams, from the client's address or in all (Retry-After)
)

// ErrorBody is the JSON of every error reply (httpx.ErrorBody, shared with
// the worker's ops endpoints and `enqueuer --json`).
type ErrorBody = httpx.ErrorBody

// apiError is an error with its HTTP status and body.
type apiError struct {
	status     int
	body       ErrorBody
	retryAfter time.Duration // > 0: Retry-After header
}

func (e *apiError) Error() string { return e.body.Error }

func newErr(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, body: ErrorBody{Code: code, Error: fmt.Sprintf(format, args...)}}
}

func invalid(format string, args ...any) *apiError {
	return newErr(http.StatusBadRequest, CodeInvalidRequest, format, args...)
}

// unavailableErr turns an UnavailableError into a 409 at time now.
func unavailableErr(u *UnavailableError, now time.Time) *apiError {
	e := &apiError{status: http.StatusConflict, body: u.ErrorBody()}
	if !u.OpenUntil.IsZero() {
		e.retryAfter = u.OpenUntil.Sub(now)
	}
	return e
}

// budgetErr turns a BudgetExhaustedError into a 409 at time now.
func budgetErr(b *BudgetExhaustedError, now time.Time) *apiError {
	return &apiError{status: http.StatusConflict, body: b.ErrorBody(), retryAfter: b.ResetsAt.Sub(now)}
}

func writeJSON(rw http.ResponseWriter, status int, v any) { httpx.WriteJSON(rw, status, v) }

func writeError(rw http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		rw.Header().Set("Retry-After", strconv.FormatInt(httpx.RetryAfterSeconds(e.retryAfter), 10))
	}
	if e.status == http.StatusUnauthorized {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="agentq"`)
	}
	writeJSON(rw, e.status, e.body)
}

// redisDown reports whether err means Redis cannot answer (refused, reset,
// timed out, LOADING, READONLY, …: redisx.IsUnavailable), or the breaker
// could not read it, or this process closed its client (shutting down),
// rather than a reply it gave; or a write did not reach the replicas
// redis.wait_replicas asks for (a refused enqueue, never a silent success).
func redisDown(err error) bool {
	return errors.Is(err, breaker.ErrUnavailable) || errors.Is(err, redis.ErrClosed) || redisx.IsUnavailable(err) ||
		errors.Is(err, redisx.ErrNotReplicated)
}
