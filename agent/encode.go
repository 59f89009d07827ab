package agent

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// marshalRequest is json.Marshal(req), byte for byte, without reflection
// for the common request: its strings plain ASCII and its params JSON
// without HTML characters. Anything else (a string to escape, params to
// escape or invalid, steps) is left to json.Marshal itself.
func marshalRequest(req Request) ([]byte, error) {
	b := make([]byte, 0, 128+len(req.Params)+len(req.TaskID)+len(req.CorrelationID)+len(req.Traceparent)+len(req.Tracestate))
	b = append(b, `{"task_id":`...)
	b, ok := appendPlain(b, req.TaskID)
	b = append(b, `,"agent":`...)
	b, ok2 := appendPlain(b, req.Agent)
	b = append(b, `,"action":`...)
	b, ok3 := appendPlain(b, req.Action)
	b = append(b, `,"params":`...)
	b, ok4 := appendParams(b, req.Params)
	b = append(b, `,"correlation_id":`...)
	b, ok5 := appendPlain(b, req.CorrelationID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(req.Attempt), 10)
	b = append(b, `,"restart":`...)
	b = strconv.AppendInt(b, int64(req.Restart), 10)
	ok = ok && ok2 && ok3 && ok4 && ok5
	if req.Traceparent != "" {
		b = append(b, `,"traceparent":`...)
		b, ok2 = appendPlain(b, req.Traceparent)
		ok = ok && ok2
	}
	if req.Tracestate != "" {
		b = append(b, `,"tracestate":`...)
		b, ok2 = appendPlain(b, req.Tracestate)
		ok = ok && ok2
	}
	if !ok || len(req.Steps) > 0 || req.Resume != 0 || req.Wait != nil || len(req.Signals) > 0 || len(req.Children) > 0 { // json.Marshal writes them
		return json.Marshal(req)
	}
	return append(b, '}'), nil
}

// appendPlain appends s as a JSON string when it needs no escaping
// (printable ASCII but for ", \ and json.Marshal's HTML characters < > &);
// ok is false otherwise.
func appendPlain(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// appendParams appends params compacted (null when empty), as
// json.Marshal does a json.RawMessage, when compacting leaves nothing
// json.Marshal would escape; ok is false otherwise, or when params is
// not JSON.
func appendParams(b []byte, params json.RawMessage) ([]byte, bool) {
	if params == nil {
		return append(b, "null"...), true
	}
	buf := bytes.NewBuffer(b)
	n := buf.Len()
	if err := json.Compact(buf, params); err != nil {
		return b, false
	}
	b = buf.Bytes()
	if bytes.ContainsAny(b[n:], "<>&\u2028\u2029") {
		return b[:n], false
	}
	return b, true
}
