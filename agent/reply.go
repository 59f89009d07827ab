package agent

import (
	"context"
	"encoding/json"
	"net/http"
)

// Reply is what a runner saw of an agent's reply besides its result: the
// worker reads a provider's rate-limit headers and the tokens a call used
// from it (provider limits).
type Reply struct {
	// Status is the HTTP status, or an exec agent's ActionResponse code.
	Status int
	// Header holds the HTTP reply's headers (nil for exec agents). Never
	// log it: it may carry credentials.
	Header http.Header
	// Usage is an exec agent's ActionResponse "usage" field, as sent.
	Usage json.RawMessage
}

type replyKey struct{}

// WithReplyObserver returns a context whose runs report each reply they
// get to f (HTTP and exec runners do; a Go function may call ObserveReply
// itself). f runs on the runner's goroutine before Run returns.
func WithReplyObserver(ctx context.Context, f func(Reply)) context.Context {
	return context.WithValue(ctx, replyKey{}, f)
}

// ObserveReply reports r to ctx's observer, if any.
func ObserveReply(ctx context.Context, r Reply) {
	if f, ok := ctx.Value(replyKey{}).(func(Reply)); ok && f != nil {
		f(r)
	}
}

// UsageTokens returns the tokens a call used: the "usage" field of an
// ActionResponse when set, else the usage object of the result data
// ({"usage": {...}}). A usage object counts total_tokens, else
// input_tokens + output_tokens (Anthropic), else prompt_tokens +
// completion_tokens; a bare number counts as is. 0 when none is found.
func UsageTokens(data, usage json.RawMessage) int64 {
	if n := usageOf(usage); n > 0 {
		return n
	}
	if len(data) == 0 || data[0] != '{' {
		return 0
	}
	var d struct {
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(data, &d) != nil {
		return 0
	}
	return usageOf(d.Usage)
}

func usageOf(raw json.RawMessage) int64 {
	if len(raw) == 0 {
		return 0
	}
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return max(int64(n), 0)
	}
	var u struct {
		Total      *float64 `json:"total_tokens"`
		Input      float64  `json:"input_tokens"`
		Output     float64  `json:"output_tokens"`
		Prompt     float64  `json:"prompt_tokens"`
		Completion float64  `json:"completion_tokens"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return 0
	}
	switch {
	case u.Total != nil:
		return max(int64(*u.Total), 0)
	case u.Input+u.Output > 0:
		return int64(u.Input + u.Output)
	default:
		return max(int64(u.Prompt+u.Completion), 0)
	}
}
