package agent

import (
	"context"
	"time"
)

type timeoutKey struct{}

// callTimeout is the timeout WithTimeout gave a call and the deadline it
// set.
type callTimeout struct {
	d        time.Duration
	deadline time.Time
}

// WithTimeout is context.WithTimeout for an agent call that also records
// d, so that a runner's timeout failure names the timeout the call was
// given ("agent timed out after 30s") rather than a figure measured from
// the moment the runner started, a little short of it.
func WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, d)
	dl, _ := ctx.Deadline()
	if pdl, ok := parent.Deadline(); ok && pdl.Equal(dl) {
		return ctx, cancel // the parent's earlier deadline holds, not d
	}
	return &timeoutCtx{Context: ctx, t: callTimeout{d: d, deadline: dl}}, cancel
}

// timeoutCtx is the call's timer context carrying its callTimeout: one
// allocation where context.WithValue of a callTimeout took two. Its
// Done, Err, Deadline and cancellation are the timer context's (children
// find its cancelCtx through Value as they would the timer context's).
type timeoutCtx struct {
	context.Context
	t callTimeout
}

func (c *timeoutCtx) Value(key any) any {
	if _, ok := key.(timeoutKey); ok {
		return c.t
	}
	return c.Context.Value(key)
}

// timeoutOf is the timeout ctx's deadline came from when WithTimeout set
// that deadline (a parent's earlier deadline, or a later WithDeadline,
// does not count).
func timeoutOf(ctx context.Context) (time.Duration, bool) {
	ct, ok := ctx.Value(timeoutKey{}).(callTimeout)
	if !ok {
		return 0, false
	}
	dl, ok := ctx.Deadline()
	if !ok || !dl.Equal(ct.deadline) {
		return 0, false
	}
	return ct.d, true
}
