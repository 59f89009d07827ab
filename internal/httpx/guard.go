package httpx

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Browser protections shared by the API (and the console behind it) and
// the worker's ops server:
//
//   - DNS rebinding: a page on evil.example whose name is rebound to
//     127.0.0.1 becomes same-origin with a loopback server and could read
//     it. On a loopback address a server answers only requests whose Host
//     is a loopback name or address (with its port, or none).
//   - Cross-site requests: a request whose Origin is not the server's own
//     is refused outright, reads included.

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

// Refusal is why Guard refused a request: a 403 with a message.
type Refusal struct {
	// ForeignHost: the Host check failed (else the Origin check did).
	ForeignHost bool
	Msg         string
}

// Guard wraps next with the Host check (when bound is a loopback address)
// and the Origin check; refuse writes the 403 in the server's own error
// shape.
func Guard(next http.Handler, bound string, refuse func(rw http.ResponseWriter, r *http.Request, why Refusal)) http.Handler {
	port := ""
	loopback := bound != "" && IsLoopbackAddr(bound)
	if loopback {
		if _, p, err := net.SplitHostPort(bound); err == nil {
			port = p
		}
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if loopback && !loopbackHostOK(r.Host, port) {
			refuse(rw, r, Refusal{ForeignHost: true, Msg: fmt.Sprintf(
				"Host %q is not this server: on a loopback address it answers only Host localhost, 127.0.0.1 or [::1] (port %s)",
				r.Host, port)})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !SameOrigin(o, r) {
			refuse(rw, r, Refusal{Msg: fmt.Sprintf("cross-origin request refused: Origin %q is not this server's origin", o)})
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

// SameOrigin reports whether the Origin header o names the origin r was
// sent to: scheme http or https and the same host and port as r's Host
// (a browser leaves the scheme's default port out of Origin). "null" and
// anything unparseable are not.
func SameOrigin(o string, r *http.Request) bool {
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
