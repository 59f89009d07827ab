package breaker

import (
	"context"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
)

// The breaker's background work: Start's loop flushes the successes that
// Record's happy path counts in memory, and keeps the local CLOSED view
// live (view.go).

// Flush writes the successes counted in memory by Record's happy path
// (success_count += n, last_success_at = now) in one pipelined round trip.
// Counts whose write failed are kept for the next Flush.
func (b *Breakers) Flush(ctx context.Context) error {
	b.mu.Lock()
	batch := b.pending
	b.pending = map[string]pendingSuccesses{}
	b.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	keys := make([]string, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	calls := make([]redisx.Call, 0, 2*len(keys))
	for _, k := range keys {
		calls = append(calls,
			redisx.Call{Script: flushScript, Keys: []string{rkeys.Breaker(k), rkeys.BreakerWindow(k)},
				Args: []any{b.nowArg(), batch[k].n, batch[k].windowMS}},
			indexCall(k))
	}
	rs := redisx.Pipelined(ctx, b.rdb, calls)
	var failed []string
	var err error
	for i, k := range keys {
		if e := rs[2*i].Err; e != nil {
			failed, err = append(failed, k), e
		} else if rs[2*i+1].Err == nil {
			b.seen.Store(k, struct{}{})
		}
	}
	if len(failed) > 0 {
		b.mu.Lock()
		for _, k := range failed {
			ps := b.pending[k]
			ps.n += batch[k].n
			ps.windowMS = batch[k].windowMS
			b.pending[k] = ps
		}
		b.mu.Unlock()
	}
	if err != nil {
		return b.wrap(strings.Join(failed, ","), "flush", err)
	}
	return nil
}

// Start runs Flush every flush interval until ctx is done or Stop is called,
// then flushes one last time, and keeps the local CLOSED view live through a
// subscription to the breaker event channel meanwhile. Calling it again is a
// no-op.
func (b *Breakers) Start(ctx context.Context) {
	b.lifecycle.Go(ctx, func(ctx context.Context) {
		watched := make(chan struct{})
		go func() { defer close(watched); b.watch(ctx) }()
		b.loop(ctx)
		<-watched
	})
}

func (b *Breakers) loop(ctx context.Context) {
	t := time.NewTicker(b.flushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := b.Flush(context.WithoutCancel(ctx)); err != nil {
				b.log.Warn("breaker: final flush failed", "err", err)
			}
			return
		case <-t.C:
			if err := b.Flush(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("breaker: flush failed", "err", err)
			}
		}
	}
}

// Stop ends Start's loop, waits for its final flush and returns; without
// Start it flushes once. It is idempotent.
func (b *Breakers) Stop() {
	if b.lifecycle.Stop() && !b.lifecycle.Started() {
		if err := b.Flush(context.Background()); err != nil {
			b.log.Warn("breaker: final flush failed", "err", err)
		}
	}
}
