package tasks

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redisx"
)

// DefaultRetention is how long a task's record and history are kept after
// its last event when no retention is configured.
const DefaultRetention = record.DefaultRetention

// ErrNotFound is returned when a task has no record (never enqueued, or its
// history outlived the retention period).
var ErrNotFound = record.ErrNotFound

// Store reads task records: each task's state (a Redis hash) and its
// lifecycle history (a Redis list of JSON events). Both keys share a hash
// tag and expire after the retention period counted from the last event.
// Only agentq's own record package writes them.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	now       func() time.Time
	runner    redisx.Runner // nil: one round trip per write
	rec       *record.Store
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithRetention sets how long records live after their last event; zero
// keeps DefaultRetention.
func WithRetention(d time.Duration) StoreOption {
	return func(s *Store) {
		if d > 0 {
			s.retention = d
		}
	}
}

// WithClock sets the clock used to stamp events (tests).
func WithClock(now func() time.Time) StoreOption { return func(s *Store) { s.now = now } }

// NewStore returns a Store on rdb.
func NewStore(rdb redis.UniversalClient, opts ...StoreOption) *Store {
	s := &Store{rdb: rdb, retention: DefaultRetention, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	s.build()
	return s
}

// build (re)makes the record store from the options.
func (s *Store) build() {
	s.rec = record.NewStore(s.rdb, record.WithRetention(s.retention), record.WithClock(s.now), record.WithRunner(s.runner))
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Retention is how long records live after their last event.
func (s *Store) Retention() time.Duration { return s.retention }

// Exists reports whether task id has a record.
func (s *Store) Exists(ctx context.Context, id string) (bool, error) { return s.rec.Exists(ctx, id) }

// Get returns task id's record and history (ErrNotFound when it has none).
func (s *Store) Get(ctx context.Context, id string) (*View, error) { return s.rec.Get(ctx, id) }

// History returns task id's events, oldest first.
func (s *Store) History(ctx context.Context, id string) ([]Event, error) {
	return s.rec.History(ctx, id)
}

// The record behind a Store and an Envelope, for agentq's own packages
// (record.StoreOf, record.SeedOf): their types are internal, which a
// program outside agentq cannot name, so tasks' API does not show them.
func init() {
	record.SetBehind(
		func(s any) *record.Store { return s.(*Store).rec },
		func(env any) record.Seed { return env.(*Envelope).seed() })
}
