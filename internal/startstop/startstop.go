// Package startstop is the one lifecycle of agentq's background components
// (the breaker client's flush loop and event subscription, the worker's
// wake-up and repair loops, health probers, the alert sender, the ops
// server), after river's startstop: Start(ctx) begins the work and returns
// at once; the work ends when ctx ends or Stop is called; Stop waits for it
// to end and is idempotent, and a component stopped before it started never
// starts. The worker starts its components in one list and stops them in
// reverse order.
package startstop

import (
	"context"
	"sync"
	"time"
)

// Service is a background component.
type Service interface {
	// Start begins the work; it returns at once. It is a no-op on a
	// started or stopped service.
	Start(ctx context.Context)
	// Stop ends the work and waits for it. It is idempotent and safe on a
	// service never started.
	Stop()
}

// Loop runs one goroutine per lifetime: Go starts it, Stop cancels its
// context and waits for it. Embed it (or hold one) to implement Service.
// The zero value is ready to use.
type Loop struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// Go runs run in a goroutine with a context that ends with ctx or Stop,
// unless the loop has started or stopped already; it reports whether it
// started run.
func (l *Loop) Go(ctx context.Context, run func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.stopped {
		return false
	}
	l.started = true
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(ctx)
	}()
	return true
}

// Stop cancels the loop and waits for its goroutine to return. It reports
// whether this was the first Stop, whether or not the loop had started.
func (l *Loop) Stop() (first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.stopped = true
	if l.started {
		l.cancel()
		<-l.done
	}
	return true
}

// Started reports whether Go started the loop (at any time).
func (l *Loop) Started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// Func is a Service that runs run (which must return when its ctx ends).
func Func(run func(ctx context.Context)) Service { return &funcService{run: run} }

type funcService struct {
	Loop
	run func(ctx context.Context)
}

func (f *funcService) Start(ctx context.Context) { f.Go(ctx, f.run) }
func (f *funcService) Stop()                     { f.Loop.Stop() }

// StartAll starts services in order.
func StartAll(ctx context.Context, services ...Service) {
	for _, s := range services {
		s.Start(ctx)
	}
}

// StopAll stops services in reverse order, each after the ones started
// after it.
func StopAll(services ...Service) {
	for i := len(services) - 1; i >= 0; i-- {
		services[i].Stop()
	}
}

// Sleep waits d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// GoFlush starts, on l, a loop that calls flush every interval until ctx
// ends or l is stopped, then once more (what is left); each flush's error,
// if any, goes to failed. Every flush, the ticks' as well as the last,
// runs on a context of its own bounded by timeout and not canceled with
// the loop's: Stop (or ctx's end) never cuts a flush in flight, which
// would lose its batch or, when Redis applied it and only the reply was
// lost, have the last flush count it twice. Once the loop has ended no
// tick flushes: Stop waits for at most two flushes (the one in flight and
// the last), each within timeout. It is the loop of the in-memory batchers
// that add their counts to Redis (charts.Counter, usage.Recorder); it
// reports whether the loop started (as Go).
func (l *Loop) GoFlush(ctx context.Context, interval, timeout time.Duration, flush func(context.Context) error, failed func(error)) bool {
	return l.Go(ctx, func(ctx context.Context) {
		once := func() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			if err := flush(fctx); err != nil {
				failed(err)
			}
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-t.C:
				if ctx.Err() == nil { // a tick due as the loop ends: the last flush takes it
					once()
				}
			}
		}
		once()
	})
}
