package agent

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/agentq/agentq/internal/usage"
)

// Reply is what a runner saw of an agent's reply besides its result: the
// worker reads a provider's rate-limit headers and the tokens a call used
// from it (provider limits).
type Reply struct {
	// Status is the HTTP status, or an exec agent's ActionResponse code.
	Status int
	// Header holds the HTTP reply's headers; for an exec agent, its
	// ActionResponse's back-pressure headers and retry_after (as
	// Retry-After), nil when it sent none. Never log it: it may carry
	// credentials.
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

// UsageTokens returns the tokens a call used (the TotalTokens of the
// reply's usage field, else of its result data read as a provider's
// reply); 0 when none is found.
func UsageTokens(data, used json.RawMessage) int64 {
	u, _ := usage.Of(data, used)
	return u.TotalTokens
}
