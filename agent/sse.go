package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/agentq/agentq/resilience"
)

// isEventStream reports whether a reply is a Server-Sent Events stream.
// A media type that is not text/event-stream in any case (the usual
// application/json) is told without parsing the header (ParseMediaType
// allocates its parameters' map).
func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	if base, _, _ := strings.Cut(ct, ";"); !strings.EqualFold(strings.TrimSpace(base), "text/event-stream") {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && strings.EqualFold(mt, "text/event-stream")
}

// sseEvent is one Server-Sent Event: its name ("" when the stream gave
// none: "message") and its data lines joined by newlines.
type sseEvent struct {
	name, data string
}

// errStreamTooLarge ends the reading of a stream past MaxResponse.
var errStreamTooLarge = errors.New("stream too large")

// readSSE parses the event stream r (the WHATWG rules: "event:" and
// "data:" fields, comments and other fields ignored, an event dispatched
// at a blank line, not when its data is empty) and calls f for each
// event until f asks to stop (stop) or fails. It reads at most max bytes
// (errStreamTooLarge past them). It returns io.EOF when the stream ended
// without f asking to stop (a last event without its blank line is
// dispatched first).
func readSSE(r io.Reader, max int64, f func(sseEvent) (stop bool, err error)) error {
	lr := &io.LimitedReader{R: r, N: max + 1}
	br := bufio.NewReaderSize(lr, 64<<10)
	var (
		name string
		data strings.Builder
		has  bool
	)
	dispatch := func() (bool, error) {
		defer func() { name, has = "", false; data.Reset() }()
		if !has {
			return false, nil
		}
		return f(sseEvent{name: name, data: strings.TrimSuffix(data.String(), "\n")})
	}
	for {
		line, err := br.ReadString('\n')
		if lr.N <= 0 {
			return errStreamTooLarge
		}
		if err != nil && err != io.EOF {
			return err
		}
		if err == io.EOF && line == "" {
			if stop, ferr := dispatch(); ferr != nil || stop {
				return ferr
			}
			return io.EOF
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if stop, ferr := dispatch(); ferr != nil || stop {
				return ferr
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			has = true
		}
		if err == io.EOF {
			if stop, ferr := dispatch(); ferr != nil || stop {
				return ferr
			}
			return io.EOF
		}
	}
}

// sseData is an event's data as an event's JSON: its JSON when it is
// JSON, else a JSON string.
func sseData(s string) json.RawMessage {
	b := []byte(strings.TrimSpace(s))
	if len(b) > 0 && json.Valid(b) {
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return buf.Bytes()
		}
	}
	q, _ := json.Marshal(s)
	return q
}

// Kinds of streams the runner assembles.
const (
	streamUnknown   = iota // no event yet
	streamOpenAI           // chat completions: data: {"choices":[{"delta":…}]} … [DONE]
	streamAnthropic        // messages: message_start … message_stop
	streamOther            // relayed; the result is the list of events' data
)

// stream reads a 2xx event-stream reply: it relays each event as an
// output event to emit (when set) as it arrives and returns the result
// (see Run). A stream is OpenAI's when its first event has "choices",
// Anthropic's when it is message_start.
func (h *HTTP) stream(ctx context.Context, start time.Time, resp *http.Response, emit func(string, json.RawMessage)) (json.RawMessage, error) {
	a := &assembler{}
	err := readSSE(resp.Body, h.cfg.MaxResponse, func(ev sseEvent) (bool, error) {
		data := sseData(ev.data)
		if emit != nil {
			emitCapped(emit, EventOutput, data)
		}
		return a.add(ev, data)
	})
	switch {
	case errors.Is(err, errStreamTooLarge):
		return nil, &resilience.Failure{Class: resilience.LogicError, Text: fmt.Sprintf("response exceeds %d bytes", h.cfg.MaxResponse)}
	case err == nil || (err == io.EOF && a.kind != streamOpenAI && a.kind != streamAnthropic):
		// Ended by its end marker, or a stream with none that ended.
	case err == io.EOF:
		return nil, &resilience.Failure{Err: fmt.Errorf("agent: the stream ended before its end marker: %w", io.ErrUnexpectedEOF)}
	default:
		var sf *streamFailure
		if errors.As(err, &sf) {
			return nil, &resilience.Failure{Status: sf.status, Header: resp.Header.Clone(), Text: sanitizeText(truncate(sf.text, maxErrorBody))}
		}
		if ctx.Err() != nil {
			return nil, ctxFailure(ctx, start, ctx.Err())
		}
		return nil, &resilience.Failure{Err: fmt.Errorf("agent: read stream: %w", err)}
	}
	return a.result()
}

// streamFailure is an error event inside a stream, with the HTTP status
// its error type stands for.
type streamFailure struct {
	status int
	text   string
}

func (f *streamFailure) Error() string { return f.text }

// errorStatus is the HTTP status an error type inside a stream stands
// for (Anthropic's error types, OpenAI's error types and codes), so that
// the classifier reads it like the same error answered as a status;
// 500 when unknown.
func errorStatus(typ, code string) int {
	for _, s := range []string{code, typ} {
		switch s {
		case "overloaded_error":
			return 529
		case "rate_limit_error", "rate_limit_exceeded", "insufficient_quota":
			return 429
		case "invalid_request_error", "context_length_exceeded", "invalid_request":
			return 400
		case "authentication_error", "invalid_api_key":
			return 401
		case "permission_error":
			return 403
		case "not_found_error", "model_not_found":
			return 404
		case "request_too_large":
			return 413
		case "billing_error":
			return 402
		case "timeout_error":
			return 504
		}
	}
	return 500
}

// assembler builds a stream's result from its events.
type assembler struct {
	kind   int
	others []json.RawMessage // every event's data (streamOther)
	oa     openAIMessage
	an     anthropicMessage
}

// add takes one event; stop once the stream's end marker came.
func (a *assembler) add(ev sseEvent, data json.RawMessage) (bool, error) {
	var obj map[string]json.RawMessage
	if len(data) > 0 && data[0] == '{' {
		_ = json.Unmarshal(data, &obj)
	}
	if err := streamError(ev, obj, a.kind, data); err != nil {
		return false, err
	}
	if a.kind == streamUnknown {
		switch {
		case ev.name == "message_start" || jsonString(obj["type"]) == "message_start":
			a.kind = streamAnthropic
		case obj["choices"] != nil:
			a.kind = streamOpenAI
		default:
			a.kind = streamOther
		}
	}
	switch a.kind {
	case streamOpenAI:
		if strings.TrimSpace(ev.data) == "[DONE]" {
			return true, nil
		}
		return false, a.oa.add(data)
	case streamAnthropic:
		return a.an.add(ev.name, obj)
	}
	a.others = append(a.others, data)
	return false, nil
}

// streamError is the error an event reports: an "error" event, an
// object of type "error" (Anthropic), or an object with an "error"
// member in an OpenAI stream or before the stream's kind is known.
func streamError(ev sseEvent, obj map[string]json.RawMessage, kind int, data json.RawMessage) error {
	isErr := ev.name == "error" || jsonString(obj["type"]) == "error" ||
		((kind == streamOpenAI || kind == streamUnknown) && obj["error"] != nil && string(obj["error"]) != "null")
	if !isErr {
		return nil
	}
	var e struct {
		Error struct {
			Type string          `json:"type"`
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &e)
	return &streamFailure{status: errorStatus(e.Error.Type, jsonString(e.Error.Code)), text: "error in the stream: " + string(data)}
}

// jsonString is raw as a string ("" when it is not one).
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// result is the assembled result.
func (a *assembler) result() (json.RawMessage, error) {
	var (
		v   any
		err error
	)
	switch a.kind {
	case streamOpenAI:
		v = a.oa.message()
	case streamAnthropic:
		v, err = a.an.message()
	default:
		if a.others == nil {
			a.others = []json.RawMessage{}
		}
		v = a.others
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &resilience.Failure{Class: resilience.LogicError, Text: "agent: assemble the stream's result: " + err.Error()}
	}
	return b, nil
}

// openAIMessage assembles an OpenAI chat-completions stream.
type openAIMessage struct {
	id, model, fingerprint string
	created                json.RawMessage
	usage                  json.RawMessage
	choices                map[int]*openAIChoice
}

type openAIChoice struct {
	role, content, refusal string
	hasContent, hasRefusal bool
	finish                 json.RawMessage
	tools                  map[int]*openAITool
}

type openAITool struct {
	id, typ, name, args string
}

// openAIChunk is one chunk of a chat-completions stream.
type openAIChunk struct {
	ID          string          `json:"id"`
	Model       string          `json:"model"`
	Created     json.RawMessage `json:"created"`
	Fingerprint string          `json:"system_fingerprint"`
	Usage       json.RawMessage `json:"usage"`
	Choices     []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason json.RawMessage `json:"finish_reason"`
	} `json:"choices"`
}

func (m *openAIMessage) add(data json.RawMessage) error {
	var c openAIChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return &resilience.Failure{Class: resilience.LogicError, Text: "agent: a chat-completions chunk is not JSON: " + preview(data, 200)}
	}
	if m.choices == nil {
		m.choices = map[int]*openAIChoice{}
	}
	if c.ID != "" {
		m.id = c.ID
	}
	if c.Model != "" {
		m.model = c.Model
	}
	if len(c.Created) > 0 && string(c.Created) != "null" {
		m.created = c.Created
	}
	if c.Fingerprint != "" {
		m.fingerprint = c.Fingerprint
	}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		m.usage = c.Usage
	}
	for _, ch := range c.Choices {
		cur := m.choices[ch.Index]
		if cur == nil {
			cur = &openAIChoice{tools: map[int]*openAITool{}}
			m.choices[ch.Index] = cur
		}
		d := ch.Delta
		if d.Role != "" {
			cur.role = d.Role
		}
		if d.Content != nil {
			cur.content += *d.Content
			cur.hasContent = true
		}
		if d.Refusal != nil {
			cur.refusal += *d.Refusal
			cur.hasRefusal = true
		}
		for _, tc := range d.ToolCalls {
			t := cur.tools[tc.Index]
			if t == nil {
				t = &openAITool{}
				cur.tools[tc.Index] = t
			}
			if tc.ID != "" {
				t.id = tc.ID
			}
			if tc.Type != "" {
				t.typ = tc.Type
			}
			t.name += tc.Function.Name
			t.args += tc.Function.Arguments
		}
		if len(ch.FinishReason) > 0 && string(ch.FinishReason) != "null" {
			cur.finish = ch.FinishReason
		}
	}
	return nil
}

// message is the non-streaming chat completion the stream stands for.
func (m *openAIMessage) message() any {
	type function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type toolCall struct {
		ID       string   `json:"id"`
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	type message struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"`
		Refusal   *string    `json:"refusal,omitempty"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int             `json:"index"`
		Message      message         `json:"message"`
		FinishReason json.RawMessage `json:"finish_reason"`
	}
	out := struct {
		ID          string          `json:"id"`
		Object      string          `json:"object"`
		Created     json.RawMessage `json:"created,omitempty"`
		Model       string          `json:"model"`
		Fingerprint string          `json:"system_fingerprint,omitempty"`
		Choices     []choice        `json:"choices"`
		Usage       json.RawMessage `json:"usage,omitempty"`
	}{ID: m.id, Object: "chat.completion", Created: m.created, Model: m.model, Fingerprint: m.fingerprint, Usage: m.usage, Choices: []choice{}}
	for _, i := range sortedKeys(m.choices) {
		c := m.choices[i]
		msg := message{Role: c.role}
		if msg.Role == "" {
			msg.Role = "assistant"
		}
		if c.hasContent {
			msg.Content = &c.content
		}
		if c.hasRefusal {
			msg.Refusal = &c.refusal
		}
		for _, j := range sortedKeys(c.tools) {
			t := c.tools[j]
			typ := t.typ
			if typ == "" {
				typ = "function"
			}
			msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: t.id, Type: typ, Function: function{Name: t.name, Arguments: t.args}})
		}
		finish := c.finish
		if len(finish) == 0 {
			finish = json.RawMessage("null")
		}
		out.Choices = append(out.Choices, choice{Index: i, Message: msg, FinishReason: finish})
	}
	return out
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// anthropicMessage assembles an Anthropic messages stream.
type anthropicMessage struct {
	msg    map[string]json.RawMessage // message_start's message
	usage  map[string]json.RawMessage
	delta  map[string]json.RawMessage // message_delta's delta (stop_reason, stop_sequence)
	blocks map[int]*anthropicBlock
}

type anthropicBlock struct {
	block                        map[string]json.RawMessage // content_block_start's block
	text, json, thinking, signed streamedField
}

// streamedField is one field of a content block as its deltas arrive; seen
// tells a field never streamed from one streamed empty.
type streamedField struct {
	strings.Builder
	seen bool
}

func (f *streamedField) add(s string) {
	f.WriteString(s)
	f.seen = true
}

func (m *anthropicMessage) add(name string, obj map[string]json.RawMessage) (bool, error) {
	typ := jsonString(obj["type"])
	if typ == "" {
		typ = name
	}
	bad := func(what string) (bool, error) {
		return false, &resilience.Failure{Class: resilience.LogicError, Text: "agent: a messages stream's " + typ + " event has no valid " + what}
	}
	switch typ {
	case "message_start":
		if json.Unmarshal(obj["message"], &m.msg) != nil {
			return bad("message")
		}
		m.usage = map[string]json.RawMessage{}
		_ = json.Unmarshal(m.msg["usage"], &m.usage)
		m.blocks = map[int]*anthropicBlock{}
	case "content_block_start":
		var i int
		b := &anthropicBlock{}
		if json.Unmarshal(obj["index"], &i) != nil || json.Unmarshal(obj["content_block"], &b.block) != nil {
			return bad("content_block")
		}
		if m.blocks == nil {
			m.blocks = map[int]*anthropicBlock{}
		}
		m.blocks[i] = b
	case "content_block_delta":
		var i int
		var d struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
		}
		if json.Unmarshal(obj["index"], &i) != nil || json.Unmarshal(obj["delta"], &d) != nil {
			return bad("delta")
		}
		b := m.blocks[i]
		if b == nil {
			return bad("index")
		}
		switch d.Type {
		case "text_delta":
			b.text.add(d.Text)
		case "input_json_delta":
			b.json.add(d.PartialJSON)
		case "thinking_delta":
			b.thinking.add(d.Thinking)
		case "signature_delta":
			b.signed.add(d.Signature)
		}
	case "message_delta":
		var d map[string]json.RawMessage
		if json.Unmarshal(obj["delta"], &d) == nil {
			m.delta = d
		}
		var u map[string]json.RawMessage
		if json.Unmarshal(obj["usage"], &u) == nil {
			if m.usage == nil {
				m.usage = map[string]json.RawMessage{}
			}
			for k, v := range u {
				if string(v) != "null" {
					m.usage[k] = v
				}
			}
		}
	case "message_stop":
		return true, nil
	}
	return false, nil // content_block_stop, ping and unknown events change nothing
}

// message is the non-streaming message the stream stands for.
func (m *anthropicMessage) message() (any, error) {
	out := map[string]json.RawMessage{}
	for k, v := range m.msg {
		out[k] = v
	}
	out["type"] = json.RawMessage(`"message"`)
	for _, k := range []string{"stop_reason", "stop_sequence"} {
		if v, ok := m.delta[k]; ok {
			out[k] = v
		} else if _, ok := out[k]; !ok {
			out[k] = json.RawMessage("null")
		}
	}
	if m.usage != nil {
		u, _ := json.Marshal(m.usage)
		out["usage"] = u
	}
	content := make([]map[string]json.RawMessage, 0, len(m.blocks))
	for _, i := range sortedKeys(m.blocks) {
		b := m.blocks[i]
		blk := b.block
		if blk == nil {
			blk = map[string]json.RawMessage{}
		}
		add := func(key string, f *streamedField) {
			if !f.seen {
				return
			}
			s := jsonString(blk[key]) + f.String()
			blk[key], _ = json.Marshal(s)
		}
		add("text", &b.text)
		add("thinking", &b.thinking)
		add("signature", &b.signed)
		if b.json.seen {
			in := strings.TrimSpace(b.json.String())
			if in == "" {
				in = "{}"
			}
			if !json.Valid([]byte(in)) {
				return nil, &resilience.Failure{Class: resilience.LogicError, Text: "agent: a tool_use block's streamed input is not JSON: " + preview([]byte(in), 200)}
			}
			blk["input"] = json.RawMessage(in)
		}
		content = append(content, blk)
	}
	c, _ := json.Marshal(content)
	out["content"] = c
	return out, nil
}
