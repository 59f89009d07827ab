package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/resilience"
)

// ErrInvalidRetryAfter is matched (errors.Is) by the error of an
// ActionResponse retry_after that is neither a number of seconds ≥ 0 nor
// a string holding one, an RFC 3339 time or an HTTP date.
var ErrInvalidRetryAfter = errors.New("agent: invalid retry_after")

// backPressure is an exec agent's reply's back-pressure as the HTTP
// headers an HTTP agent's reply would carry (see Response.RetryAfter and
// Response.Headers): its allowlisted headers and, on an "error" reply,
// its retry_after as Retry-After in seconds, which replaces the headers'
// Retry-After and retry-after-ms (ParseRetryAfter reads retry-after-ms
// first). nil when the reply carries none. err reports a retry_after
// that was ignored (ErrInvalidRetryAfter).
func backPressure(resp Response, now time.Time) (h http.Header, err error) {
	h = resilience.BackPressureHeaders(resp.Headers)
	if resp.Status != "error" || len(resp.RetryAfter) == 0 || string(resp.RetryAfter) == "null" {
		return h, nil
	}
	secs, err := retryAfterSeconds(resp.RetryAfter, now)
	if err != nil {
		return h, err
	}
	if h == nil {
		h = make(http.Header, 1)
	}
	h.Del("Retry-After-Ms")
	h.Set("Retry-After", strconv.FormatFloat(secs, 'f', -1, 64))
	return h, nil
}

// retryAfterSeconds reads an ActionResponse's retry_after at now as
// seconds (never negative: a time already past is 0): a JSON number of
// seconds ≥ 0, or a string holding one, an RFC 3339 time or an HTTP date.
func retryAfterSeconds(raw json.RawMessage, now time.Time) (float64, error) {
	invalid := func() (float64, error) {
		return 0, fmt.Errorf("%w: %s (want seconds ≥ 0 or an RFC 3339 time)", ErrInvalidRetryAfter, preview(raw, 64))
	}
	v := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if json.Unmarshal(raw, &v) != nil {
			return invalid()
		}
		v = strings.TrimSpace(v)
		if t, ok := parseTime(v); ok {
			return max(t.Sub(now).Seconds(), 0), nil
		}
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 {
		return invalid()
	}
	return secs, nil
}

// parseTime reads an RFC 3339 time or an HTTP date.
func parseTime(v string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// replyBackPressure is backPressure at the current time; an ignored
// retry_after is logged, with the agent's name, to ctx's logger
// (WithLogger; slog's default without one).
func replyBackPressure(ctx context.Context, name string, resp Response) http.Header {
	h, err := backPressure(resp, time.Now())
	if err != nil {
		log := loggerOf(ctx)
		if log == nil {
			log = slog.Default()
		}
		log.WarnContext(ctx, "exec agent's retry_after ignored for timing; the failure is classified as usual",
			"agent", name, "err", err)
	}
	return h
}
