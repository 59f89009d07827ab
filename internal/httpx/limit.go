package httpx

import (
	"container/list"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/durx"
)

// Failed-token limiting, shared by the API, the console (its login form
// and its bearer requests) and the worker's ops server.
//
// Every wrong token — a wrong "Authorization: Bearer" or a wrong login —
// is counted per client: after Max failures within Window the client is
// locked out until the oldest of them leaves the window. A locked-out
// client is refused (429 with Retry-After) before its token is even
// compared, the right token included. A request without an Authorization
// header is not a guess and is not counted. Each failure is logged at warn
// with the client and the route, never the token.
//
// The client is the TCP peer (http.Request.RemoteAddr): an IPv4 address,
// or the /64 prefix of an IPv6 address (one host usually holds a whole
// /64). X-Forwarded-For is not trusted, so behind a reverse proxy every
// client shares the proxy's bucket: one guesser then locks everyone out
// for a minute. Limit failed authentication at the proxy too, or give
// each proxy its own address.
//
// Memory is bounded: at most Capacity clients are tracked (each with at
// most Max times). When a new one comes and the table is full, one client
// is forgotten, never everyone: a client whose lock has expired, else the
// not-locked-out client whose latest failure is the oldest; a locked-out
// client (kept fresh by each refused attempt) only when every tracked
// client is locked out. A flood of fresh addresses thus cannot free a
// recent offender.

// Defaults of Limiter.
const (
	DefaultMaxFailures = 10
	DefaultFailWindow  = time.Minute
	DefaultLimiterCap  = 10000
)

// CodeTooManyRequests is the error code of a locked-out client's 429.
const CodeTooManyRequests = "too_many_requests"

// Limiter counts failed tokens per client. Create it with NewLimiter; it is
// safe for concurrent use. One Limiter may serve several handlers (the API
// and the console share one in `enqueuer serve`).
type Limiter struct {
	max      int
	window   time.Duration
	capacity int
	now      func() time.Time
	log      *slog.Logger

	mu      sync.Mutex
	clients map[string]*failures
	// counting holds the clients with fewer than max recent failures, most
	// recent failure first; locked those locked out, most recent attempt
	// first. Eviction takes an expired lock, else the oldest counting
	// client, and a live lock only when every tracked client is locked.
	counting, locked *list.List
}

// failures are one client's recent failures, oldest first.
type failures struct {
	key    string
	at     []time.Time
	elem   *list.Element // in counting or locked
	isLock bool          // elem is in locked
}

// LimiterOptions configure a Limiter; zero fields take the defaults above,
// time.Now and slog.Default().
type LimiterOptions struct {
	Max      int
	Window   time.Duration
	Capacity int
	Now      func() time.Time
	Logger   *slog.Logger
}

// NewLimiter returns a Limiter.
func NewLimiter(o LimiterOptions) *Limiter {
	o.Max = defaults.Positive(o.Max, DefaultMaxFailures)
	o.Window = defaults.Positive(o.Window, DefaultFailWindow)
	o.Capacity = defaults.Positive(o.Capacity, DefaultLimiterCap)
	o.Now = defaults.Clock(o.Now)
	o.Logger = defaults.Logger(o.Logger)
	return &Limiter{max: o.Max, window: o.Window, capacity: o.Capacity, now: o.Now, log: o.Logger,
		clients: map[string]*failures{}, counting: list.New(), locked: list.New()}
}

// ClientKey is the limiter's key of r's client: its TCP peer's IPv4
// address, or the /64 of its IPv6 address.
func ClientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// Blocked reports whether r's client is locked out, and for how long.
func (l *Limiter) Blocked(r *http.Request) (time.Duration, bool) {
	return l.blocked(ClientKey(r), l.now())
}

func (l *Limiter) blocked(key string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.recent(key, now)
	if f == nil || len(f.at) < l.max {
		return 0, false
	}
	l.locked.MoveToFront(f.elem) // an attempt while locked out keeps the lock's entry fresh
	return f.at[len(f.at)-l.max].Add(l.window).Sub(now), true
}

// failedLocked records a failure of key; l.mu is held.
func (l *Limiter) failedLocked(key string, now time.Time) bool {
	f := l.recent(key, now)
	if f == nil {
		for len(l.clients) >= l.capacity {
			l.evict(now)
		}
		f = &failures{key: key}
		f.elem = l.counting.PushFront(f)
		l.clients[key] = f
	}
	f.at = append(f.at, now)
	if len(f.at) > l.max {
		f.at = f.at[len(f.at)-l.max:] // only the last max matter
	}
	l.place(f, len(f.at) >= l.max)
	return f.isLock
}

// place puts f at the front of the list it belongs on.
func (l *Limiter) place(f *failures, lock bool) {
	if f.isLock {
		l.locked.Remove(f.elem)
	} else {
		l.counting.Remove(f.elem)
	}
	f.isLock = lock
	if lock {
		f.elem = l.locked.PushFront(f)
	} else {
		f.elem = l.counting.PushFront(f)
	}
}

// evict forgets one client: the least recently locked one if its lock
// has expired, else the counting client whose latest failure is the
// oldest, else (every client locked out) the least recently seen lock.
func (l *Limiter) evict(now time.Time) {
	var e *list.Element
	if b := l.locked.Back(); b != nil {
		f := b.Value.(*failures)
		if now.Sub(f.at[len(f.at)-l.max]) >= l.window {
			e = b
		}
	}
	if e == nil {
		e = l.counting.Back()
	}
	if e == nil {
		e = l.locked.Back()
	}
	l.drop(e.Value.(*failures))
}

func (l *Limiter) drop(f *failures) {
	if f.isLock {
		l.locked.Remove(f.elem)
	} else {
		l.counting.Remove(f.elem)
	}
	delete(l.clients, f.key)
}

// recent is key's entry with only its failures within the window (nil,
// and forgotten, when none are left). l.mu is held.
func (l *Limiter) recent(key string, now time.Time) *failures {
	f, ok := l.clients[key]
	if !ok {
		return nil
	}
	i := 0
	for i < len(f.at) && now.Sub(f.at[i]) >= l.window {
		i++
	}
	f.at = f.at[i:]
	switch {
	case len(f.at) == 0:
		l.drop(f)
		return nil
	case f.isLock && len(f.at) < l.max:
		l.place(f, false)
	}
	return f
}

// Len is the number of clients tracked (for tests).
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// AuthResult is the verdict of Limiter.Bearer.
type AuthResult int

const (
	// AuthOK: the right token, or no token is required.
	AuthOK AuthResult = iota
	// AuthMissing: no Authorization header (not counted as a failure).
	AuthMissing
	// AuthWrong: a wrong token or scheme (counted and logged).
	AuthWrong
	// AuthBlocked: the client is locked out; the token was not compared.
	AuthBlocked
)

// Bearer checks r's "Authorization: Bearer" against token under the
// limiter (Verify); a request without the header is AuthMissing, not
// counted. An empty token admits every request. route names the route in
// the log.
func (l *Limiter) Bearer(r *http.Request, token, route string) (AuthResult, time.Duration) {
	if token == "" {
		return AuthOK, 0
	}
	if wait, blocked := l.Blocked(r); blocked {
		return AuthBlocked, wait
	}
	if r.Header.Get("Authorization") == "" {
		return AuthMissing, 0
	}
	return l.Verify(r, route, func() bool { return CheckBearer(r, token) })
}

// Verify runs one token comparison of r's client under the limiter: a
// locked-out client gets AuthBlocked (and how long to wait) and compare is
// not called. Otherwise compare runs, and its result is settled
// atomically with the count: a client that concurrent failures locked out
// meanwhile gets AuthBlocked whatever compare said, so parallel guesses
// learn no more than Max answers a window; a wrong token is counted and
// logged (AuthWrong).
func (l *Limiter) Verify(r *http.Request, route string, compare func() bool) (AuthResult, time.Duration) {
	key := ClientKey(r)
	if wait, blocked := l.blocked(key, l.now()); blocked {
		return AuthBlocked, wait
	}
	ok := compare()
	l.mu.Lock()
	now := l.now()
	if f := l.recent(key, now); f != nil && len(f.at) >= l.max {
		l.locked.MoveToFront(f.elem)
		wait := f.at[len(f.at)-l.max].Add(l.window).Sub(now)
		l.mu.Unlock()
		return AuthBlocked, wait
	}
	if ok {
		l.mu.Unlock()
		return AuthOK, 0
	}
	locked := l.failedLocked(key, now)
	l.mu.Unlock()
	l.log.Warn("authentication failed: wrong token", "client", key, "route", route, "locked_out", locked)
	return AuthWrong, 0
}

// CheckBearer reports whether r carries "Authorization: Bearer <token>",
// compared in constant time (of the token's length too). An empty token
// admits every request. It counts nothing: servers use Limiter.Bearer.
func CheckBearer(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	const scheme = "bearer " // the scheme is case-insensitive (RFC 9110 §11.1)
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return false
	}
	return TokenEqual(strings.TrimSpace(h[len(scheme):]), token)
}

// TokenEqual compares got with want in constant time, lengths included
// (both are hashed first).
func TokenEqual(got, want string) bool {
	a := sha256.Sum256([]byte(got))
	b := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// RetryAfterSeconds is d in whole seconds rounded up, at least 1 (the
// value of a Retry-After header).
func RetryAfterSeconds(d time.Duration) int64 {
	return max(durx.CeilSeconds(d), 1)
}
