package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/rkeys"
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

// errNoSession: the request is not authenticated (no valid, unrevoked
// session cookie, no bearer header).
var errNoSession = errors.New("console: not logged in")

// authenticate returns the request's session: a bearer request, a valid
// cookie whose session was not logged out, or (open mode) a new session it
// sets the cookie for. It fails with errNoSession, a 401 (wrong bearer
// token), a 429 (the client is locked out, Retry-After set: its token is
// not compared) or a Redis error (revocations cannot be read: the cookie
// is not trusted).
func (c *Console) authenticate(rw http.ResponseWriter, r *http.Request) (session, error) {
	if c.opts.Token != "" && r.Header.Get("Authorization") != "" {
		switch res, wait := c.opts.Limiter.Bearer(r, c.opts.Token, r.Method+" "+r.URL.Path); res {
		case httpx.AuthOK:
			return session{bearer: true}, nil
		case httpx.AuthBlocked:
			return session{}, c.lockedOut(rw, wait)
		}
		return session{}, httpError(http.StatusUnauthorized, "Wrong bearer token.")
	}
	if ck, err := r.Cookie(SessionCookie); err == nil {
		if s, ok := c.parseSession(ck.Value); ok {
			ctx, cancel := c.bounded(r, 1)
			defer cancel()
			revoked, err := c.revoked(ctx, s)
			if err != nil {
				return session{}, err
			}
			if !revoked {
				return s, nil
			}
		}
	}
	if c.opts.Token == "" {
		s, v := c.newSession()
		c.setSessionCookie(rw, r, v, s.expires)
		return s, nil
	}
	return session{}, errNoSession
}

// lockedOut is the 429 of a locked-out client, with Retry-After.
func (c *Console) lockedOut(rw http.ResponseWriter, wait time.Duration) error {
	rw.Header().Set("Retry-After", strconv.FormatInt(httpx.RetryAfterSeconds(wait), 10))
	return httpError(http.StatusTooManyRequests, "Too many wrong tokens from your address: wait a minute.")
}

// Logout revokes the session server-side: the key
// rkeys.ConsoleRevoked(hex(session ID)) lives in Redis until the session
// would have expired, and every cookie-authenticated request looks it up,
// so a copied cookie dies with the logout on every `enqueuer serve` that
// shares the Redis. While Redis cannot answer, cookies are not trusted
// (503) and logout fails visibly.

func revokedKey(s session) string { return rkeys.ConsoleRevoked(hex.EncodeToString(s.id)) }

// revoke marks s as logged out until it expires.
func (c *Console) revoke(ctx context.Context, s session) error {
	ttl := s.expires.Sub(c.opts.Now())
	if s.id == nil || ttl <= 0 {
		return nil
	}
	return c.Redis.Set(ctx, revokedKey(s), "1", ttl+time.Second).Err()
}

// revoked reports whether s was logged out.
func (c *Console) revoked(ctx context.Context, s session) (bool, error) {
	n, err := c.Redis.Exists(ctx, revokedKey(s)).Result()
	if err != nil {
		return false, fmt.Errorf("console: reading the session's revocation: %w", err)
	}
	return n > 0, nil
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
