package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// DefaultMaxHolds is Holds' process-wide cap when HoldsOptions leaves it
// zero: the capacity `enqueuer serve` states (10,000 waits and event
// streams), which its memory limit is sized for.
const DefaultMaxHolds = 10000

// ErrHoldsFull is the kind of a request refused by Holds.
var ErrHoldsFull = errors.New("too many open waits and event streams")

// HoldsFullError is a request refused by Holds: the cap it met.
type HoldsFullError struct {
	PerClient bool // the client address's cap (else the process's)
	Cap       int
}

func (e *HoldsFullError) Error() string {
	if e.PerClient {
		return fmt.Sprintf("%v from your address (at most %d at once): retry after Retry-After", ErrHoldsFull, e.Cap)
	}
	return fmt.Sprintf("%v on this server (at most %d at once): retry after Retry-After", ErrHoldsFull, e.Cap)
}

func (e *HoldsFullError) Unwrap() error { return ErrHoldsFull }

// HoldsOptions configure Holds. Zero values mean the defaults.
type HoldsOptions struct {
	// Max caps the holds of the process. Zero: DefaultMaxHolds.
	Max int
	// PerClient caps the holds of one client address (ClientKey: the TCP
	// peer, X-Forwarded-For is not trusted). Zero: Max (behind a proxy,
	// a port mapping or a load balancer every client may share one
	// address).
	PerClient int
}

// Holds caps the long requests — waits and event streams, each holding a
// connection, a goroutine and a notifier subscription for up to minutes —
// that one client address and the whole process hold open at once, so
// that one token holder cannot take the process past the memory it is
// sized for. Safe for concurrent use; the API and the console share one.
type Holds struct {
	max, perClient int

	mu sync.Mutex
	n  int
	by map[string]int
}

// NewHolds returns Holds with o's caps.
func NewHolds(o HoldsOptions) *Holds {
	if o.Max <= 0 {
		o.Max = DefaultMaxHolds
	}
	if o.PerClient <= 0 {
		o.PerClient = o.Max
	}
	return &Holds{max: o.Max, perClient: o.PerClient, by: map[string]int{}}
}

// Acquire takes a hold for r: release gives it back (once; later calls do
// nothing). Past a cap it is a *HoldsFullError (ErrHoldsFull).
func (h *Holds) Acquire(r *http.Request) (release func(), err error) {
	key := ClientKey(r)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.by[key] >= h.perClient:
		return nil, &HoldsFullError{PerClient: true, Cap: h.perClient}
	case h.n >= h.max:
		return nil, &HoldsFullError{Cap: h.max}
	}
	h.n++
	h.by[key]++
	var once sync.Once
	return func() { once.Do(func() { h.release(key) }) }, nil
}

func (h *Holds) release(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	if h.by[key]--; h.by[key] <= 0 {
		delete(h.by, key)
	}
}

// Open is how many holds are taken now.
func (h *Holds) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}
