// Package tallytest is test support for the tallies' users (charts'
// counter, usage's recorder): a Redis with its round trips counted, a
// clock the test moves by hand, and a connection that loses a flush's
// reply. Imported by tests only.
package tallytest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
)

// Clock is a clock tests move by hand.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Setup is a redis-server of the test's own, a client of it whose round
// trips are counted and whose next script reply can be lost, and a clock.
type Setup struct {
	Srv   *redistest.Server
	RDB   *redis.Client
	Trips *redistest.RoundTrips
	Lost  *LostReply
	Clock *Clock
}

// New starts a Setup whose clock reads now.
func New(t *testing.T, now time.Time) Setup {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := Setup{Srv: srv, RDB: rdb, Trips: &redistest.RoundTrips{}, Lost: &LostReply{}, Clock: &Clock{now: now}}
	rdb.AddHook(s.Trips)
	rdb.AddHook(s.Lost)
	return s
}

// LostReply is a go-redis hook that, once armed, lets the next script run
// in Redis but answers its caller with a transport error, as a connection
// that dropped after the command was sent.
type LostReply struct{ armed atomic.Bool }

// Arm loses the next script's reply.
func (l *LostReply) Arm() { l.armed.Store(true) }

// DialHook is go-redis's.
func (l *LostReply) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook loses the reply of the next script once armed.
func (l *LostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && err == nil && l.armed.CompareAndSwap(true, false) {
			return errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")
		}
		return err
	}
}

// ProcessPipelineHook is go-redis's.
func (l *LostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
