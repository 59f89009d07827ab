package resilience

import (
	"net/http"
	"testing"
	"time"
)

// FuzzClassify checks that the classifier is total and deterministic for any
// status, body and header values: it never panics, always returns a valid
// class, a RetryAfter within [0, RetryAfterCap] and a ShouldRetry in -1..1.
func FuzzClassify(f *testing.F) {
	f.Add(429, `{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`, "", "", "")
	f.Add(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "3", "", "false")
	f.Add(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, "", "", "")
	f.Add(0, "TypeError: fetch failed\n  [cause]: SocketError: other side closed { code: 'UND_ERR_SOCKET' }", "", "", "")
	f.Add(0, `Error code: 429 - {'error': {'message': 'Please try again in 1m30.5s'}}`, "Wed, 21 Oct 2015 07:28:00 GMT", "1e309", "true")
	f.Add(503, `[{"error":{"code":503,"status":"UNAVAILABLE","message":"The model is overloaded."}}]`, "-1", "NaN", "TRUE")
	f.Add(-5, "{\"error\":{\"error\":{\"error\":[[[[{\"code\":\"\\u0000\"}]]]]}}}", "99999999999999999999999", "", "")
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Classifier{Now: func() time.Time { return now }}
	f.Fuzz(func(t *testing.T, status int, text, retryAfter, retryAfterMs, shouldRetry string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		h.Set("Retry-After-Ms", retryAfterMs)
		h.Set("X-Should-Retry", shouldRetry)
		err := &Failure{Status: status, Text: text, Header: h}
		v1 := c.Classify(err)
		v2 := c.Classify(err)
		if v1 != v2 {
			t.Fatalf("not deterministic: %+v vs %+v", v1, v2)
		}
		if !v1.Class.Valid() {
			t.Fatalf("invalid class %q", v1.Class)
		}
		if v1.RetryAfter < 0 || v1.RetryAfter > RetryAfterCap {
			t.Fatalf("RetryAfter %v out of range", v1.RetryAfter)
		}
		if v1.ShouldRetry < -1 || v1.ShouldRetry > 1 {
			t.Fatalf("ShouldRetry %d", v1.ShouldRetry)
		}
		if d, ok := ParseRetryAfter(h, now); d < 0 || d > RetryAfterCap || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter = %v, %v", d, ok)
		}
	})
}
