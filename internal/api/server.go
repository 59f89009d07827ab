package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/internal/stores"
	"github.com/agentq/agentq/tasks"
)

// Defaults of Options.
const (
	// DefaultAddr is the listen address of `enqueuer serve` (loopback only:
	// put a proxy or an explicit --http in front to expose it).
	DefaultAddr = "127.0.0.1:8080"
	// DefaultMaxBody is the request body limit (1 MiB).
	DefaultMaxBody = 1 << 20
	// DefaultRedisTimeout bounds the Redis work of one request.
	DefaultRedisTimeout = 3 * time.Second
	// DefaultMaxBatch is the most tasks one POST /api/v1/tasks may carry.
	DefaultMaxBatch = 1000
	// DefaultDeadLetterLimit and MaxDeadLetterLimit are the page sizes of
	// GET /api/v1/deadletters.
	DefaultDeadLetterLimit = 50
	MaxDeadLetterLimit     = 1000
)

// EnvToken is the environment variable `enqueuer serve` reads the bearer
// token from.
const EnvToken = "AGENTQ_API_TOKEN"

//go:embed openapi.yaml
var openAPIDoc []byte

// OpenAPI returns the embedded OpenAPI 3 document (api/openapi.yaml).
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// Options configure a Server. The zero value is usable: no token, the
// defaults above, time.Now and slog.Default().
type Options struct {
	// Token is the bearer token every route but /healthz, /metrics and
	// the OpenAPI document requires. Zero: no authentication.
	Token string
	// MaxBody limits request bodies (413 request_too_large). Zero: DefaultMaxBody.
	MaxBody int64
	// RedisTimeout bounds the Redis work of one request (a batch gets four
	// times as long); past it the reply is 503 unavailable. Zero: DefaultRedisTimeout.
	RedisTimeout time.Duration
	// MaxBatch bounds the tasks of one batch. Zero: DefaultMaxBatch.
	MaxBatch int
	// Now is the clock fail-fast compares a breaker's open_until with. Zero: time.Now.
	Now func() time.Time
	// Logger logs server errors (5xx) and the listener. Zero: slog.Default().
	Logger *slog.Logger
	// Addr is the address the Handler is served on, for the DNS-rebinding
	// check: when its host is loopback (localhost, 127.0.0.0/8, ::1) a
	// request whose Host header is not a loopback name or address with
	// Addr's port is refused (403 forbidden). Serve uses its listener's
	// address instead. Zero: no Host check in Handler.
	Addr string
	// UI is served at /ui/ (and /ui redirects there), behind the same Host
	// and Origin checks as the API: the web console (console.Console's
	// Handler), which does its own authentication. Zero: no /ui/.
	UI http.Handler
	// Limiter counts wrong bearer tokens per client address and locks a
	// client out (429 too_many_requests, with Retry-After, before its token
	// is compared) after 10 within a minute (httpx.Limiter). `enqueuer
	// serve` shares one with the console, so that the API, the console's
	// bearer requests and its login form draw on one allowance. Zero: a
	// limiter of its own with the defaults.
	Limiter *httpx.Limiter
	// Notifier is the process's notifier (notify.Hub), shared by the
	// waits (?wait=) and event streams, started and stopped by the
	// caller. Zero: the server makes its own on first use (Close stops it).
	Notifier *notify.Hub
	// KeepAlive is how often an idle event stream gets a comment. Zero:
	// DefaultKeepAlive.
	KeepAlive time.Duration
	// Holds caps the waits (?wait=) and event streams open at once, per
	// client address and in all (503 over_capacity with Retry-After past
	// either). `enqueuer serve` shares one with the console. Zero: its own
	// with httpx.DefaultMaxHolds for both caps.
	Holds *httpx.Holds
}

// Server is the HTTP API on one Redis and one configuration.
type Server struct {
	stores.Set // Hubs: Options.Notifier, or the server's own
	opts       Options
	mux        *http.ServeMux
	handler    http.Handler
	metrics    *httpMetrics
}

// New returns the API server on rdb. cfg gives the known agents (a task for
// an agent cfg does not name is 400 invalid_request; when cfg names no agent
// at all the check is off, since agents registered only in Go code cannot be
// known) and their breaker keys, the queues a task may name (worker.queues)
// and the retention of task records (history.retention). nil cfg means
// config.Default().
//
// rdb should have ContextTimeoutEnabled (cli.OpenRedis sets it), so that a
// Redis that stops answering is bounded by the request's deadline.
func New(rdb redis.UniversalClient, cfg *config.Config, opts Options) *Server {
	opts.MaxBody = defaults.Positive(opts.MaxBody, DefaultMaxBody)
	opts.RedisTimeout = defaults.Positive(opts.RedisTimeout, DefaultRedisTimeout)
	opts.MaxBatch = defaults.Positive(opts.MaxBatch, DefaultMaxBatch)
	opts.Now = defaults.Clock(opts.Now)
	opts.Logger = defaults.Logger(opts.Logger)
	if opts.Holds == nil {
		opts.Holds = httpx.NewHolds(httpx.HoldsOptions{})
	}
	if opts.Limiter == nil {
		opts.Limiter = httpx.NewLimiter(httpx.LimiterOptions{Logger: opts.Logger})
	}
	set := stores.New(rdb, cfg, stores.Options{Notifier: opts.Notifier, RedisTimeout: opts.RedisTimeout, Logger: opts.Logger})
	s := &Server{Set: set, opts: opts, metrics: newHTTPMetrics()}
	s.mux = s.buildMux()
	s.handler = s.outer(opts.Addr)
	return s
}

// Handler returns the API's http.Handler: the routes behind the Origin
// check (and the Host check when Options.Addr is a loopback address),
// counted in the server's metrics (GET /metrics).
func (s *Server) Handler() http.Handler { return s.handler }

// outer is the mux behind the guards for a server bound to addr, with
// every request counted (the guards' refusals included).
func (s *Server) outer(addr string) http.Handler {
	return s.metrics.instrument(s.mux, s.guard(s.mux, addr))
}

// Serve serves the API on ln until ctx is done, then shuts down gracefully
// (in-flight requests get up to 10s) and returns nil. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.outer(ln.Addr().String()),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	defer s.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// ListenAndServe listens on addr (DefaultAddr when empty) and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("api: listen: %w", err)
	}
	s.opts.Logger.Info("api listening", "addr", ln.Addr().String(), "auth", s.opts.Token != "")
	return s.Serve(ctx, ln)
}

// serveRoute runs one route: auth, body limit, a bounded context, and the
// error reply.
func (s *Server) serveRoute(rt Route, rw http.ResponseWriter, r *http.Request) {
	if rt.Auth {
		switch res, wait := s.opts.Limiter.Bearer(r, s.opts.Token, r.Method+" "+rt.Path); res {
		case httpx.AuthBlocked:
			e := newErr(http.StatusTooManyRequests, CodeTooManyRequests,
				"too many wrong bearer tokens from your address: wait before trying again")
			e.retryAfter = wait
			writeError(rw, e)
			return
		case httpx.AuthMissing:
			writeError(rw, newErr(http.StatusUnauthorized, CodeUnauthorized, "missing bearer token (send Authorization: Bearer <token>)"))
			return
		case httpx.AuthWrong:
			writeError(rw, newErr(http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token (send Authorization: Bearer <token>)"))
			return
		}
	}
	if ae := checkJSONBody(r); ae != nil {
		writeError(rw, ae)
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(rw, r.Body, s.opts.MaxBody)
	}
	err := rt.handle(s, rw, r)
	if err == nil {
		return
	}
	ae := s.classify(r.Context(), err)
	if ae.status >= 500 {
		s.opts.Logger.Warn("api request failed", "method", r.Method, "path", r.URL.Path, "status", ae.status, "err", err)
	}
	writeError(rw, ae)
}

// classify turns a handler's error into its reply: an *apiError as is,
// not-found errors as 404, fail-fast refusals as 409, Redis that cannot
// answer as 503 and anything else as 500 — unless a quick PING shows Redis
// is down, which makes it 503 too.
func (s *Server) classify(ctx context.Context, err error) *apiError {
	var ae *apiError
	var ue *UnavailableError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ue):
		return unavailableErr(ue, s.opts.Now())
	case errors.Is(err, tasks.ErrNotFound), errors.Is(err, deadletter.ErrNotFound):
		return newErr(http.StatusNotFound, CodeNotFound, "%v", err)
	case errors.Is(err, tasks.ErrInvalidEnvelope):
		return invalid("%v", err)
	case redisDown(err):
		return newErr(http.StatusServiceUnavailable, CodeUnavailable, "redis unavailable: %v", err)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(time.Second, s.opts.RedisTimeout))
	defer cancel()
	if perr := s.Redis.Ping(pctx).Err(); perr != nil {
		return newErr(http.StatusServiceUnavailable, CodeUnavailable, "redis unavailable: %v", err)
	}
	return newErr(http.StatusInternalServerError, CodeInternal, "%v", err)
}

// bounded is the request's context bounded by the Redis timeout (times n).
func (s *Server) bounded(r *http.Request, n int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), time.Duration(n)*s.opts.RedisTimeout)
}

func (s *Server) healthz(rw http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), min(2*time.Second, s.opts.RedisTimeout))
	defer cancel()
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		// /healthz needs no token: the raw error (Redis address, server
		// reply) goes to the log only.
		s.opts.Logger.Warn("healthz: redis ping failed", "err", err)
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{
			"status": "unavailable", "redis": "down", "code": CodeUnavailable, "error": "redis unavailable",
		})
		return nil
	}
	writeJSON(rw, http.StatusOK, map[string]string{"status": "ok", "redis": "ok"})
	return nil
}

// metricsPage serves GET /metrics: the server's registry in Prometheus'
// text format, without a token (httpMetrics: counts and gauges, no task
// IDs or other data).
func (s *Server) metricsPage(rw http.ResponseWriter, r *http.Request) error {
	s.metrics.page.ServeHTTP(rw, r)
	return nil
}

func (s *Server) openAPI(rw http.ResponseWriter, _ *http.Request) error {
	rw.Header().Set("Content-Type", "application/yaml")
	_, _ = rw.Write(openAPIDoc)
	return nil
}
