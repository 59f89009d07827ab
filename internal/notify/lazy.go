package notify

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// Lazy is a Hub given by the caller, or else one of its own made and
// started on first use (the API's and the console's, when serve did not
// share one). Close stops the own Hub, if one was made; none is made
// after Close.
type Lazy struct {
	given *Hub
	make  func() *Hub
	once  sync.Once
	own   *Hub
}

// NewLazy returns a Lazy over given, or over a Hub on rdb and rec with
// opts made when first asked for (given nil).
func NewLazy(given *Hub, rdb redis.UniversalClient, rec *record.Store, opts Options) *Lazy {
	return &Lazy{given: given, make: func() *Hub { return New(rdb, rec, opts) }}
}

// Hub is the given Hub, or the own one, started.
func (l *Lazy) Hub() *Hub {
	if l.given != nil {
		return l.given
	}
	l.once.Do(func() {
		l.own = l.make()
		l.own.Start(context.Background())
	})
	return l.own
}

// Close stops the own Hub, when one was made.
func (l *Lazy) Close() {
	l.once.Do(func() {})
	if l.own != nil {
		l.own.Stop()
	}
}
