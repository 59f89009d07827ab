package api

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Route is one operation of the API. The mux is built from Routes, and a
// test checks that api/openapi.yaml documents exactly these operations.
type Route struct {
	// Method is the HTTP method (GET, POST).
	Method string
	// Path is both the net/http ServeMux pattern and the OpenAPI path
	// ("/api/v1/tasks/{id}").
	Path string
	// Auth is true when the route requires the bearer token (when one is set).
	Auth bool
	// Summary is the operation's summary in api/openapi.yaml (Routes fills
	// it in; `enqueuer serve --help` lists it).
	Summary string

	handle handlerFunc
}

// handlerFunc serves one operation; a returned error is written as the
// JSON error reply (an *apiError as is, anything else classified).
type handlerFunc func(s *Server, rw http.ResponseWriter, r *http.Request) error

// routes is the route table: the one list the mux and the OpenAPI test use.
var routes = []Route{
	{Method: http.MethodPost, Path: "/api/v1/tasks", Auth: true, handle: (*Server).enqueue},
	{Method: http.MethodGet, Path: "/api/v1/tasks", Auth: true, handle: (*Server).listTasks},
	{Method: http.MethodGet, Path: "/api/v1/tasks/{id}", Auth: true, handle: (*Server).getTask},
	{Method: http.MethodGet, Path: "/api/v1/tasks/{id}/events", Auth: true, handle: (*Server).taskEvents},
	{Method: http.MethodPost, Path: "/api/v1/tasks/{id}/cancel", Auth: true, handle: (*Server).cancelTask},
	{Method: http.MethodPost, Path: "/api/v1/tasks/{id}/signals/{name}", Auth: true, handle: (*Server).signalTask},
	{Method: http.MethodGet, Path: "/api/v1/agents", Auth: true, handle: (*Server).agents},
	{Method: http.MethodGet, Path: "/api/v1/workers", Auth: true, handle: (*Server).workers},
	{Method: http.MethodGet, Path: "/api/v1/tenants", Auth: true, handle: (*Server).tenants},
	{Method: http.MethodGet, Path: "/api/v1/schedules", Auth: true, handle: (*Server).schedules},
	{Method: http.MethodGet, Path: "/api/v1/usage", Auth: true, handle: (*Server).usageTotals},
	{Method: http.MethodGet, Path: "/api/v1/deadletters", Auth: true, handle: (*Server).deadLetters},
	{Method: http.MethodPost, Path: "/api/v1/deadletters/{id}/requeue", Auth: true, handle: (*Server).requeue},
	{Method: http.MethodPost, Path: "/api/v1/queues/{name}/pause", Auth: true, handle: (*Server).pauseQueue},
	{Method: http.MethodPost, Path: "/api/v1/queues/{name}/resume", Auth: true, handle: (*Server).resumeQueue},
	{Method: http.MethodGet, Path: "/api/v1/openapi.yaml", Auth: false, handle: (*Server).openAPI},
	{Method: http.MethodGet, Path: "/healthz", Auth: false, handle: (*Server).healthz},
	{Method: http.MethodGet, Path: "/metrics", Auth: false, handle: (*Server).metricsPage},
}

// Routes returns the API's operations (method, path, whether the token is
// required, the OpenAPI document's summary), in the order of the table.
func Routes() []Route {
	sums := summaries()
	out := make([]Route, len(routes))
	for i, r := range routes {
		out[i] = Route{Method: r.Method, Path: r.Path, Auth: r.Auth, Summary: sums[r.Method+" "+r.Path]}
	}
	return out
}

// summaries maps "METHOD path" to its operation's summary in the embedded
// OpenAPI document, read once (TestOpenAPIMatchesRoutes holds the document
// to the route table; an unreadable document has no summaries).
var summaries = sync.OnceValue(func() map[string]string {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	out := map[string]string{}
	if err := yaml.Unmarshal(openAPIDoc, &doc); err != nil {
		return out
	}
	for path, item := range doc.Paths {
		for method, op := range item { // "parameters" and the like are no operation: no summary
			if m, ok := op.(map[string]any); ok {
				sum, _ := m["summary"].(string)
				out[strings.ToUpper(method)+" "+path] = sum
			}
		}
	}
	return out
})

// buildMux registers one handler per path that dispatches on the method, so
// that a wrong method is a JSON 405 (with Allow) rather than the mux's
// plain-text one, and a catch-all JSON 404.
func (s *Server) buildMux() *http.ServeMux {
	mux := http.NewServeMux()
	byPath := map[string][]Route{}
	var order []string
	for _, r := range routes {
		if _, ok := byPath[r.Path]; !ok {
			order = append(order, r.Path)
		}
		byPath[r.Path] = append(byPath[r.Path], r)
	}
	for _, p := range order {
		rs := byPath[p]
		var allow []string
		for _, r := range rs {
			allow = append(allow, r.Method)
		}
		slices.Sort(allow)
		mux.HandleFunc(p, func(rw http.ResponseWriter, req *http.Request) {
			for _, rt := range rs {
				if req.Method == rt.Method || (req.Method == http.MethodHead && rt.Method == http.MethodGet) {
					s.serveRoute(rt, rw, req)
					return
				}
			}
			rw.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(rw, newErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				"method %s is not allowed on %s (allowed: %s)", req.Method, p, strings.Join(allow, ", ")))
		})
	}
	if s.opts.UI != nil {
		mux.Handle("/ui/", s.opts.UI)
		mux.Handle("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	}
	mux.HandleFunc("/", func(rw http.ResponseWriter, req *http.Request) {
		writeError(rw, newErr(http.StatusNotFound, CodeNotFound, "no route %s %s (see GET /api/v1/openapi.yaml)", req.Method, req.URL.Path))
	})
	return mux
}
