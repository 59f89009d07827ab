// Package tally is the in-memory batcher of the counters a worker adds to
// Redis (internal/charts' attempt counts, internal/usage's totals): counts
// are added in memory under a mutex (no Redis call), and a flush sends
// what was counted since the last one as one batch with a number of its
// own — the tally's random ID and a sequence — which the batch's script
// applies at most once (it keeps the number of the last batch applied
// under a key of the ID and answers -1 to one it has seen).
//
// A batch Redis did not answer (a transport error, a timeout: its reply
// may be lost, redisx.Unanswered) is kept as it is and sent again, with
// its number, before any later counts, so it counts once whether or not
// it had been applied. A batch Redis refused (an error reply) is dropped,
// never sent again: the error wraps the refused sentinel given to New.
// Start/Stop follow internal/startstop (GoFlush); Stop (idempotent)
// flushes what is left.
package tally

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/startstop"
)

// Send sends batch number seq of the tally id: it runs the batch's script
// (or nothing, when nothing of p is left to send) and returns its error.
type Send[P any] func(ctx context.Context, id string, seq int64, p P) error

// Tally holds the counts P (a map, built by fresh) of one worker.
type Tally[P any] struct {
	startstop.Loop
	name    string // in errors: "usage: flushing totals"
	refused error  // wrapped by the error of a refused batch
	id      string
	fresh   func() P
	send    Send[P]

	mu      sync.Mutex
	pending P

	flushMu sync.Mutex // one flush at a time, in number order
	seq     int64      // the last batch's number
	unsent  *batch[P]  // a batch Redis did not answer: sent again first
}

// batch is one flush's counts and number.
type batch[P any] struct {
	seq    int64
	counts P
}

// New returns a tally of counts built by fresh, sent by send; name
// prefixes its errors, and a batch Redis refused wraps refused.
func New[P any](name string, refused error, fresh func() P, send Send[P]) *Tally[P] {
	var id [12]byte
	_, _ = rand.Read(id[:])
	return &Tally[P]{name: name, refused: refused, id: hex.EncodeToString(id[:]),
		fresh: fresh, send: send, pending: fresh()}
}

// ID is the tally's random ID, the key of its batches' numbers in Redis.
func (t *Tally[P]) ID() string { return t.id }

// Add runs count on the pending counts, under the tally's mutex.
func (t *Tally[P]) Add(count func(P)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	count(t.pending)
}

// FlushTimeout bounds a flush, and the last one at Stop.
const FlushTimeout = 3 * time.Second

// NumberTTL is how long Redis keeps the number of a tally's last batch
// after it (the batch scripts' TTL argument): a batch whose reply was lost
// is recognised when sent again within it.
const NumberTTL = 24 * time.Hour

// Start flushes every interval (each flush bounded by FlushTimeout) until
// ctx ends or Stop is called, then flushes once more; failed receives the
// error of a flush that failed.
func (t *Tally[P]) Start(ctx context.Context, every time.Duration, failed func(error)) {
	t.GoFlush(ctx, every, FlushTimeout, t.Flush, failed)
}

// LogFailed is a failed for Start: it logs msg at level on logger with
// the flush's error and whether its batch was kept (not refused).
func (t *Tally[P]) LogFailed(logger *slog.Logger, level slog.Level, msg string) func(error) {
	return func(err error) {
		logger.Log(context.Background(), level, msg, "err", err, "kept", !errors.Is(err, t.refused))
	}
}

// Flush sends the counts now: first a batch Redis did not answer, sent
// again as it was, then what was counted since (as the next batch). Its
// error wraps the refused sentinel when Redis refused a batch (which is
// then dropped); any other error means a batch is kept for the next flush.
func (t *Tally[P]) Flush(ctx context.Context) error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	if t.unsent != nil {
		b := t.unsent
		t.unsent = nil
		if err := t.sendBatch(ctx, b); err != nil {
			return err
		}
	}
	t.mu.Lock()
	pending := t.pending
	t.pending = t.fresh()
	t.mu.Unlock()
	t.seq++
	return t.sendBatch(ctx, &batch[P]{seq: t.seq, counts: pending})
}

// sendBatch sends b; b is kept as t.unsent when Redis did not answer.
func (t *Tally[P]) sendBatch(ctx context.Context, b *batch[P]) error {
	err := t.send(ctx, t.id, b.seq, b.counts)
	switch {
	case err == nil:
		return nil
	case redisx.Unanswered(err):
		t.unsent = b
		return fmt.Errorf("%s (flush %d kept, sent again next): %w", t.name, b.seq, err)
	}
	return fmt.Errorf("%w (flush %d dropped): %w", t.refused, b.seq, err)
}
