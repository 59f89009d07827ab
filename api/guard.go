package api

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Browser protections. Without a token the API would otherwise be open to
// any web page the operator visits:
//
//   - CSRF: a cross-site form or fetch can POST a text/plain body that is
//     valid JSON and enqueue tasks (exec agents!). Writes must therefore be
//     application/json, which a page can only send cross-origin after a
//     CORS preflight this API never grants; and a request whose Origin is
//     not the API's own is refused outright.
//   - DNS rebinding: a page on evil.example whose name is rebound to
//     127.0.0.1 becomes same-origin with the API and could read dead
//     letters (params included). On a loopback address the API answers
//     only requests whose Host is a loopback name or address.

// IsLoopbackAddr reports whether addr (host:port, or a bare host) is bound
// to loopback only: "localhost" or a loopback IP (127.0.0.0/8, ::1). An
// empty host (":8080", every interface), 0.0.0.0, :: and any other name
// are not.
func IsLoopbackAddr(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	return isLoopbackHost(host)
}

func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // fe80::1%lo
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// guard wraps next with the Host check (when bound is a loopback address)
// and the Origin check.
func (s *Server) guard(next http.Handler, bound string) http.Handler {
	port := ""
	loopback := bound != "" && IsLoopbackAddr(bound)
	if loopback {
		if _, p, err := net.SplitHostPort(bound); err == nil {
			port = p
		}
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if loopback && !loopbackHostOK(r.Host, port) {
			writeError(rw, newErr(http.StatusForbidden, CodeForbidden,
				"Host %q is not this server: on a loopback address the API answers only Host localhost, 127.0.0.1 or [::1] (port %s)",
				r.Host, port))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
			writeError(rw, newErr(http.StatusForbidden, CodeForbidden,
				"cross-origin request refused: Origin %q is not this API's origin", o))
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// loopbackHostOK: host (a Host header) is a loopback name or IP, with port
// the bound port or none. An empty Host (HTTP/1.0) comes from no browser.
func loopbackHostOK(host, port string) bool {
	if host == "" {
		return true
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil { // no port
		h, p = host, ""
	}
	if p != "" && p != port {
		return false
	}
	return isLoopbackHost(h)
}

// sameOrigin reports whether the Origin header o names the origin r was
// sent to: scheme http or https and the same host and port as r's Host
// (a browser leaves the scheme's default port out of Origin). "null" and
// anything unparseable are not.
func sameOrigin(o string, r *http.Request) bool {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	def := ""
	switch strings.ToLower(u.Scheme) {
	case "http":
		def = "80"
	case "https":
		def = "443"
	default:
		return false
	}
	return strings.EqualFold(withPort(u.Host, def), withPort(r.Host, def))
}

func withPort(host, def string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), def)
}

// isWrite: methods that change state and so must carry JSON.
func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// checkJSONBody: a write's Content-Type must be application/json
// (parameters such as charset allowed). A write with neither a body nor a
// Content-Type (POST …/requeue) has nothing to interpret and is let
// through: a browser sends Origin with every POST, so a cross-site one is
// refused by the Origin check.
func checkJSONBody(r *http.Request) *apiError {
	if !isWrite(r.Method) {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return newErr(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
		"Content-Type must be application/json (got %s)", ct)
}
