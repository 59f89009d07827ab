package tasks

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/jsonscan"
)

// decodeFast parses payload b when it is the plain JSON object Encode
// writes: the Envelope's own keys (any order, any whitespace), strings
// without escapes, integer run and restarts, params any valid JSON value.
// It reports false for anything else — an unknown or differently cased
// key, an escape, a null, a number that is not a plain integer, invalid
// JSON — and Decode then leaves the payload to encoding/json, which
// accepts and refuses exactly what it did before. On the payloads it
// takes, it gives what encoding/json gives (FuzzDecodeFast), at a tenth
// of the cost: every task's delivery starts here.
// setString sets e's string field named key (one of decodeFast's).
func (e *Envelope) setString(key, s string) {
	switch key {
	case "id":
		e.ID = s
	case "agent":
		e.Agent = s
	case "action":
		e.Action = s
	case "correlation_id":
		e.CorrelationID = s
	case "traceparent":
		e.Traceparent = s
	case "tracestate":
		e.Tracestate = s
	case "tenant":
		e.Tenant = s
	case "priority":
		e.Priority = s
	default:
		e.Queue = s
	}
}

// setInt sets e's number field named key (one of decodeFast's).
func (e *Envelope) setInt(key string, n int) {
	switch key {
	case "run":
		e.Run = n
	case "restarts":
		e.Restarts = n
	case "deadline_ms":
		e.Deadline = int64(n)
	default:
		e.NotBefore = int64(n)
	}
}

func decodeFast(b []byte, e *Envelope) bool {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return jsonscan.SkipSpace(b, i+1) == len(b)
	}
	for {
		raw, j, ok := plainBytes(b, i)
		if !ok {
			return false
		}
		i = jsonscan.SkipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(b, i+1)
		key := envelopeKey(raw)
		switch key {
		case "id", "agent", "action", "correlation_id", "queue", "traceparent", "tracestate", "tenant", "priority":
			if raw, j, ok = plainBytes(b, i); !ok {
				return false
			}
			e.setString(key, string(raw))
		case "restarts", "run", "not_before_ms", "deadline_ms":
			var n int
			if n, j, ok = plainInt(b, i); !ok {
				return false
			}
			e.setInt(key, n)
		case "enqueued_at":
			if _, j, ok = plainBytes(b, i); !ok || e.EnqueuedAt.UnmarshalJSON(b[i:j]) != nil {
				return false
			}
		case "params":
			if j, ok = jsonscan.SkipValue(b, i); !ok || b[i] == 'n' || !jsonscan.Valid(b[i:j]) {
				return false
			}
			e.Params = append(json.RawMessage(nil), b[i:j]...)
		default:
			return false
		}
		i = jsonscan.SkipSpace(b, j)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case '}':
			return jsonscan.SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// envelopeKey is key raw as one of decodeFast's key constants (no
// allocation: a switch on string(raw) does not copy), or "" for any other.
func envelopeKey(raw []byte) string {
	switch string(raw) {
	case "id":
		return "id"
	case "agent":
		return "agent"
	case "action":
		return "action"
	case "correlation_id":
		return "correlation_id"
	case "queue":
		return "queue"
	case "traceparent":
		return "traceparent"
	case "tracestate":
		return "tracestate"
	case "tenant":
		return "tenant"
	case "priority":
		return "priority"
	case "restarts":
		return "restarts"
	case "run":
		return "run"
	case "not_before_ms":
		return "not_before_ms"
	case "deadline_ms":
		return "deadline_ms"
	case "enqueued_at":
		return "enqueued_at"
	case "params":
		return "params"
	}
	return ""
}

// plainBytes reads the JSON string at b[i] when it has no escape and no
// control character and is valid UTF-8: raw is its content (a slice of
// b, not a copy); j is just past its closing quote.
func plainBytes(b []byte, i int) (raw []byte, j int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j = i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			raw = b[i+1 : j]
			if !ascii && !utf8.Valid(raw) {
				return nil, 0, false
			}
			return raw, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, 0, false
}

// plainInt reads the JSON integer at b[i] (no fraction, no exponent, at
// most 18 digits); j is just past it.
func plainInt(b []byte, i int) (n int, j int, ok bool) {
	j = i
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	digits := j - start
	if digits == 0 || digits > 18 || (digits > 1 && b[start] == '0') {
		return 0, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	n, err := strconv.Atoi(string(b[i:j]))
	return n, j, err == nil
}

// validateDecoded is e.Validate for an envelope Decode just read; when
// decodeFast read it (fast), its params have been checked with
// jsonscan.Valid (encoding/json.Valid's answer) already and are not read
// a second time.
func validateDecoded(e *Envelope, fast bool) error {
	if !fast {
		return e.Validate()
	}
	params := e.Params
	e.Params = nil
	err := e.Validate()
	e.Params = params
	return err
}
