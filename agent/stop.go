package agent

import (
	"context"
	"errors"
	"time"
)

// QuickStopGrace is how long an exec agent's process group has between
// SIGTERM and SIGKILL when its call is stopped because its task was
// canceled (see WithQuickStop), instead of ExecConfig.KillGrace: an
// operator's cancel stops the agent, children and all, within a second or
// two, whatever they do with SIGTERM.
const QuickStopGrace = 500 * time.Millisecond

type quickStopKey struct{}

// WithQuickStop returns ctx marked so that, when it is canceled
// (context.Canceled, not a deadline) and quick reports true, an exec
// agent's process group gets SIGKILL QuickStopGrace after its SIGTERM
// rather than its KillGrace after. The worker marks every call with a
// quick that is true unless the worker is shutting down: a call's context
// is then canceled only because its task was canceled on request.
func WithQuickStop(ctx context.Context, quick func() bool) context.Context {
	return context.WithValue(ctx, quickStopKey{}, quick)
}

// quickStop reports whether ctx, now done, asks for a quick stop.
func quickStop(ctx context.Context) bool {
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		return false
	}
	quick, _ := ctx.Value(quickStopKey{}).(func() bool)
	return quick != nil && quick()
}
