package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/httpx"
)

// Session cookie and CSRF.
//
// A session is a random 16-byte ID with an expiry, signed with a key
// derived from the API token (HMAC-SHA256(token, "agentq console session
// v1")): the cookie value is base64url(id ‖ expiry) "." base64url(mac). It
// never contains the token, and any `enqueuer serve` sharing the token
// accepts it; changing the token ends every session. Without a token (the
// open, loopback-only mode) the key is random per process and every
// visitor gets a session at once, so forms still carry a CSRF token.
//
// The CSRF token of a session is base64url(HMAC(key, "csrf" ‖ id)): every
// state-changing form carries it in the field "csrf", checked in constant
// time. Requests authenticated by "Authorization: Bearer" need none (a
// browser cannot send that header cross-site).

// SessionCookie is the console's session cookie name.
const SessionCookie = "agentq_console"

const (
	sessionIDLen = 16
	csrfField    = "csrf"
)

// keyFor derives the signing key from the token (random when empty).
func keyFor(token string) []byte {
	if token == "" {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("agentq console session v1"))
	return m.Sum(nil)
}

func (c *Console) mac(parts ...[]byte) []byte {
	m := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// session is a verified session.
type session struct {
	id      []byte
	expires time.Time
	bearer  bool // authenticated by the Authorization header, not a cookie
}

// newSession returns a fresh session value and its cookie value.
func (c *Console) newSession() (session, string) {
	id := make([]byte, sessionIDLen)
	_, _ = rand.Read(id)
	exp := c.opts.Now().Add(c.opts.SessionTTL)
	payload := make([]byte, sessionIDLen+8)
	copy(payload, id)
	binary.BigEndian.PutUint64(payload[sessionIDLen:], uint64(exp.Unix()))
	v := base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(c.mac([]byte("session"), payload))
	return session{id: id, expires: exp}, v
}

// parseSession verifies a cookie value.
func (c *Console) parseSession(v string) (session, bool) {
	p, m, ok := strings.Cut(v, ".")
	if !ok {
		return session{}, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(m)
	if err1 != nil || err2 != nil || len(payload) != sessionIDLen+8 {
		return session{}, false
	}
	if !hmac.Equal(sig, c.mac([]byte("session"), payload)) {
		return session{}, false
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(payload[sessionIDLen:])), 0)
	if !c.opts.Now().Before(exp) {
		return session{}, false
	}
	return session{id: payload[:sessionIDLen], expires: exp}, true
}

// csrfToken is the CSRF token of s ("" for a bearer request).
func (c *Console) csrfToken(s session) string {
	if s.bearer {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(c.mac([]byte("csrf"), s.id))
}

func (c *Console) checkCSRF(s session, got string) bool {
	if s.bearer {
		return true
	}
	want := c.csrfToken(s)
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// setSessionCookie sets (or, with value "", clears) the session cookie.
func (c *Console) setSessionCookie(rw http.ResponseWriter, r *http.Request, value string, exp time.Time) {
	ck := &http.Cookie{
		Name: SessionCookie, Value: value, Path: c.base,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isTLS(r),
	}
	if value == "" {
		ck.MaxAge = -1
	} else {
		ck.Expires = exp
		ck.MaxAge = int(time.Until(exp).Seconds())
		if ck.MaxAge <= 0 {
			ck.MaxAge = 1
		}
	}
	http.SetCookie(rw, ck)
}

// isTLS: the request came over TLS (directly, or through a proxy that says so).
func isTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// checkToken compares a token typed into the login form in constant time.
func (c *Console) checkToken(got string) bool {
	if c.opts.Token == "" {
		return true
	}
	a := sha256.Sum256([]byte(got))
	b := sha256.Sum256([]byte(c.opts.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// authenticate returns the request's session: a bearer request, a valid
// cookie, or (open mode) a new session it sets the cookie for.
func (c *Console) authenticate(rw http.ResponseWriter, r *http.Request) (session, bool) {
	if c.opts.Token != "" && r.Header.Get("Authorization") != "" {
		if httpx.CheckBearer(r, c.opts.Token) {
			return session{bearer: true}, true
		}
		return session{}, false
	}
	if ck, err := r.Cookie(SessionCookie); err == nil {
		if s, ok := c.parseSession(ck.Value); ok {
			return s, true
		}
	}
	if c.opts.Token == "" {
		s, v := c.newSession()
		c.setSessionCookie(rw, r, v, s.expires)
		return s, true
	}
	return session{}, false
}

// sameOrigin reports whether a state-changing request may come from a
// page of this server: its Origin (or, when absent, its Referer) must name
// r's Host. Browsers send Origin with every form POST, so a cross-site
// form is refused here, and "Origin: null" (a sandboxed or privacy-hiding
// context) is refused too. A request with neither header comes from no
// browser (a script): it is let through, and still needs the CSRF token.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "null" {
		return false
	}
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return true
	}
	u, err := url.Parse(src)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	return strings.EqualFold(withPort(u.Host, def), withPort(r.Host, def))
}

func withPort(host, def string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), def)
}

// securityHeaders are set on every console response.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

// Failed logins are limited per client address: after maxLoginFailures
// within loginWindow the form answers 429 until the window has passed, so
// the token cannot be guessed at the speed of the network.
const (
	maxLoginFailures = 10
	loginWindow      = time.Minute
)

// loginLimiter counts recent failed logins per client address.
type loginLimiter struct {
	mu    sync.Mutex
	fails map[string][]time.Time
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// blocked reports whether addr has failed too often lately.
func (l *loginLimiter) blocked(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent(addr, now)) >= maxLoginFailures
}

// failed records a failed login of addr.
func (l *loginLimiter) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fails == nil {
		l.fails = map[string][]time.Time{}
	}
	if len(l.fails) > 10000 { // bounded memory: forget everyone
		l.fails = map[string][]time.Time{}
	}
	l.fails[addr] = append(l.recent(addr, now), now)
}

func (l *loginLimiter) recent(addr string, now time.Time) []time.Time {
	ts := l.fails[addr]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= loginWindow {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.fails, addr)
		return nil
	}
	l.fails[addr] = ts
	return ts
}
