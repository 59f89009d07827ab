package httpx_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/httpx"
)

// from is a request from the client at addr ("ip:port") with an
// Authorization header (none when empty).
func from(addr, auth string) *http.Request {
	r := httptest.NewRequest("GET", "/api/v1/agents", nil)
	r.RemoteAddr = addr
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return r
}

// limiterSetup is a limiter (3 failures a minute) on a settable clock,
// logging into a buffer (tests using it run serially).
type limiterSetup struct {
	now  time.Time
	logs *bytes.Buffer
	lim  *httpx.Limiter
}

func setup(t *testing.T, capacity int) *limiterSetup {
	t.Helper()
	s := &limiterSetup{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), logs: &bytes.Buffer{}}
	s.lim = httpx.NewLimiter(httpx.LimiterOptions{Max: 3, Window: time.Minute, Capacity: capacity,
		Now: func() time.Time { return s.now }, Logger: slog.New(slog.NewTextHandler(s.logs, nil))})
	return s
}

const token = "s3cret-token"

// TestLimiterLocksOutGuessers: after Max wrong bearer tokens within the
// window a client is refused before its token is compared (the right one
// too), with how long to wait; another client is unaffected; a missing
// header is no guess; the lock ends with the window.
func TestLimiterLocksOutGuessers(t *testing.T) {
	t.Parallel()
	s := setup(t, 100)
	for i := range 3 {
		res, _ := s.lim.Bearer(from("10.0.0.1:4000", fmt.Sprintf("Bearer guess-%d", i)), token, "GET /x")
		require.Equal(t, httpx.AuthWrong, res, i)
		s.now = s.now.Add(time.Second)
	}
	res, wait := s.lim.Bearer(from("10.0.0.1:4001", "Bearer "+token), token, "GET /x")
	require.Equal(t, httpx.AuthBlocked, res, "the right token too, while locked out")
	require.Positive(t, wait)
	require.LessOrEqual(t, wait, time.Minute)

	res, _ = s.lim.Bearer(from("10.0.0.2:4000", "Bearer "+token), token, "GET /x")
	require.Equal(t, httpx.AuthOK, res, "another address is unaffected")
	for range 5 {
		res, _ = s.lim.Bearer(from("10.0.0.3:4000", ""), token, "GET /x")
		require.Equal(t, httpx.AuthMissing, res, "no header is no guess")
	}
	res, _ = s.lim.Bearer(from("10.0.0.3:4000", "Bearer "+token), token, "GET /x")
	require.Equal(t, httpx.AuthOK, res)

	s.now = s.now.Add(wait)
	res, _ = s.lim.Bearer(from("10.0.0.1:4001", "Bearer "+token), token, "GET /x")
	require.Equal(t, httpx.AuthOK, res, "the window passed")

	res, _ = s.lim.Bearer(from("10.0.0.1:4001", ""), "", "GET /x")
	require.Equal(t, httpx.AuthOK, res, "no token: open")
}

// TestLimiterParallelGuesses: guesses that race past the lock check are
// settled atomically with the count: of 60 wrong guesses compared at once
// from one address, only Max get an answer (401); the rest get 429, and so
// would a right token among them.
func TestLimiterParallelGuesses(t *testing.T) {
	t.Parallel()
	s := setup(t, 100)
	const n = 60
	inside := make(chan struct{}, n)
	release := make(chan struct{})
	results := make(chan httpx.AuthResult, n)
	for i := range n {
		go func() {
			res, _ := s.lim.Verify(from("10.0.0.1:1", ""), "GET /x", func() bool {
				inside <- struct{}{}
				<-release
				return i == n-1 // the last one holds the right token
			})
			results <- res
		}()
	}
	for range n { // every guess is past the lock check, in its comparison
		<-inside
	}
	close(release)
	count := map[httpx.AuthResult]int{}
	for range n {
		count[<-results]++
	}
	require.LessOrEqual(t, count[httpx.AuthWrong], 3, "at most Max answered wrong: %v", count)
	require.Equal(t, n, count[httpx.AuthWrong]+count[httpx.AuthBlocked]+count[httpx.AuthOK], "%v", count)
	require.GreaterOrEqual(t, count[httpx.AuthBlocked], n-4, "the rest locked out: %v", count)
}

// TestLimiterEvictsOldest: a full table forgets one client, never
// everyone: the not-locked-out client whose latest failure is the oldest;
// a flood of fresh addresses does not free a recent offender. A lock goes
// first once expired, and last (the least recently seen) otherwise.
func TestLimiterEvictsOldest(t *testing.T) {
	t.Parallel()
	s := setup(t, 4)
	fail := func(addr string) {
		t.Helper()
		res, _ := s.lim.Bearer(from(addr+":1", "Bearer nope"), token, "GET /x")
		require.NotEqual(t, httpx.AuthOK, res)
	}
	blocked := func(addr string) bool {
		_, b := s.lim.Blocked(from(addr+":1", ""))
		return b
	}
	for range 3 {
		fail("10.0.0.9") // the offender, the oldest of all
	}
	fail("10.0.0.1")
	fail("10.0.0.1")
	for i := range 50 { // a flood of fresh addresses, each newer than the offender
		s.now = s.now.Add(100 * time.Millisecond)
		fail(fmt.Sprintf("10.1.0.%d", i))
		require.LessOrEqual(t, s.lim.Len(), 4, "bounded")
		require.True(t, blocked("10.0.0.9"), "a recent offender is kept when the table is full (flood %d)", i)
	}
	require.Equal(t, 4, s.lim.Len())
	fail("10.0.0.1")
	require.False(t, blocked("10.0.0.1"), "10.0.0.1's two failures were forgotten (evicted, oldest first), not the offender's")

	// Every client locked out: the least recently seen lock goes.
	s = setup(t, 2)
	for range 3 {
		fail("10.0.0.1")
	}
	s.now = s.now.Add(time.Second)
	for range 3 {
		fail("10.0.0.2")
	}
	s.now = s.now.Add(time.Second)
	require.True(t, blocked("10.0.0.1"), "a refused attempt keeps 10.0.0.1 fresh")
	fail("10.0.0.3")
	require.True(t, blocked("10.0.0.1"))
	require.False(t, blocked("10.0.0.2"), "the least recently seen lock was evicted")
	require.Equal(t, 2, s.lim.Len())

	// An expired lock goes before anyone.
	s = setup(t, 2)
	for range 3 {
		fail("10.0.0.1")
	}
	s.now = s.now.Add(50 * time.Second)
	fail("10.0.0.2")
	s.now = s.now.Add(11 * time.Second) // 10.0.0.1's lock expired, 10.0.0.2's failure is recent
	fail("10.0.0.3")
	for range 2 {
		fail("10.0.0.2")
	}
	require.True(t, blocked("10.0.0.2"), "10.0.0.2 kept its failure: the expired lock was evicted")
}

// TestLimiterLogsNoToken: each wrong token is logged at warn with the
// client and the route, never the token or a piece of it.
func TestLimiterLogsNoToken(t *testing.T) {
	t.Parallel()
	s := setup(t, 10)
	guess := "Zq8vLm3pXw7tKc2N"
	res, _ := s.lim.Bearer(from("192.0.2.7:5555", "Bearer "+guess), token, "GET /api/v1/agents")
	require.Equal(t, httpx.AuthWrong, res)
	out := s.logs.String()
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "client=192.0.2.7")
	require.Contains(t, out, `route="GET /api/v1/agents"`)
	for i := 0; i+4 <= len(guess); i++ {
		require.NotContains(t, out, guess[i:i+4], "no piece of the guessed token")
	}
	require.NotContains(t, out, token)
}

// TestClientKey: the TCP peer; an IPv6 client by its /64.
func TestClientKey(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"192.0.2.7:5555":             "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:1":       "192.0.2.7",
		"pipe":                       "pipe",
	} {
		r := from(addr, "")
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		require.Equal(t, want, httpx.ClientKey(r), addr)
	}
}
