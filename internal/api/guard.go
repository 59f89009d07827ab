package api

import (
	"mime"
	"net/http"

	"github.com/agentq/agentq/internal/httpx"
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
// are not (httpx.IsLoopbackAddr).
func IsLoopbackAddr(addr string) bool { return httpx.IsLoopbackAddr(addr) }

// guard wraps next with the Host check (when bound is a loopback address)
// and the Origin check (httpx.Guard, shared with the worker's ops server).
func (s *Server) guard(next http.Handler, bound string) http.Handler {
	return httpx.Guard(next, bound, func(rw http.ResponseWriter, _ *http.Request, why httpx.Refusal) {
		writeError(rw, newErr(http.StatusForbidden, CodeForbidden, "%s", why.Msg))
	})
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
