package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/tracing"
)

// flushTimeout bounds the flush of the spans left when a command ends.
const flushTimeout = 5 * time.Second

// startTracing switches OpenTelemetry traces on for a command when the
// standard OTLP environment asks for them (tracing.Setup, with service as
// the default service.name). It returns the function that flushes the
// spans left, to defer. A tracing setup that fails is reported on app.Err
// and the command goes on untraced: traces are never worth a task.
func startTracing(ctx context.Context, app *App, service string) func() {
	shutdown, err := tracing.Setup(ctx, tracing.WithServiceName(service))
	if err != nil {
		fmt.Fprintf(app.Err, "%s: warning: tracing is off: %v\n", service, err)
		return func() {}
	}
	return func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := shutdown(c); err != nil {
			fmt.Fprintf(app.Err, "%s: warning: could not flush traces: %v\n", service, err)
		}
	}
}
