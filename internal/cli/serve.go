package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"unicode"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/console"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/tasks"
)

// serveHelp is `enqueuer serve --help`: every route of the API's table
// (api.Routes) and every page of the console (console.Pages), so that the
// list cannot drift from what serve serves.
func serveHelp() string {
	var b strings.Builder
	b.WriteString("Serve agentq's HTTP API on --http (default " + api.DefaultAddr + ", loopback only):\n\n")
	for _, r := range api.Routes() {
		fmt.Fprintf(&b, "  %-4s %-38s %s\n", r.Method, r.Path, strings.TrimSuffix(r.Summary, "."))
	}
	b.WriteString("\nand the web console at " + console.Base + " (--no-console turns it off), a page each:\n\n")
	for _, p := range console.Pages() {
		fmt.Fprintf(&b, "  %-4s %-38s %s: %s\n", "GET", console.Base+p.Path, p.Name, p.About)
	}
	fmt.Fprintf(&b, "  %-4s %-38s %s\n", "GET", console.Base+"tasks/{id}", "a task: state, history, live events; cancel, signal")
	fmt.Fprintf(&b, "  %-4s %-38s %s\n", "GET", console.Base+"deadletter/{id}", "a dead letter: requeue, delete")
	fmt.Fprintf(&b, "  %-4s %-38s %s\n", "GET", console.Base+"login", "the login form (a session cookie)")
	b.WriteString(serveNotes)
	return b.String()
}

// serveNotes end `enqueuer serve --help`: authentication, guards, limits.
const serveNotes = `
When ` + api.EnvToken + ` is set, every route but /healthz, /metrics and
the OpenAPI document requires "Authorization: Bearer <token>" (/metrics
carries counts only, for a Prometheus scrape without a secret). Without it, serve
refuses a non-loopback --http (exit 2) unless --insecure-no-auth is given.
Writes must be Content-Type: application/json (else 415), a request whose
Origin is not the API's own is 403, and on a loopback address a Host that
is not localhost, 127.x or [::1] is 403 (CSRF and DNS-rebinding guards).
Errors are JSON {"code":"…","error":"…"}. SIGINT/SIGTERM stop the server
gracefully.

Waits (?wait=) and event streams (the console's too) are capped: at most
--max-waiters open at once (default 10,000; each costs about 40 KB) and
--max-waiters-per-client from one client address (the TCP peer; default
--max-waiters). Past either: 503 over_capacity with Retry-After.

The web console takes the same token: the Authorization header, or the
login form at ` + console.Base + `login (a session cookie).`

// serveOptions are `enqueuer serve`'s flags.
type serveOptions struct {
	addr           string
	maxBody        int64
	insecureNoAuth bool
	noConsole      bool
	maxWaiters     int
	maxPerClient   int
	logFormat      string
}

// Validate checks the flags and the token (api.EnvToken, token) before
// anything touches Redis: a configuration mistake is exit 2 at once.
func (o *serveOptions) Validate(token string) error {
	if o.maxBody <= 0 {
		return usageErr("--max-body must be positive (got %d)", o.maxBody)
	}
	if o.maxWaiters <= 0 {
		return usageErr("--max-waiters must be positive (got %d)", o.maxWaiters)
	}
	if o.maxPerClient < 0 || o.maxPerClient > o.maxWaiters {
		return usageErr("--max-waiters-per-client must be from 1 to --max-waiters (%d), or 0 for --max-waiters (got %d)", o.maxWaiters, o.maxPerClient)
	}
	if err := checkLogFormat(o.logFormat); err != nil {
		return err
	}
	return checkOpenAPIAuth(o.addr, token, o.insecureNoAuth)
}

// newServeCmd builds `enqueuer serve`: the HTTP API of package api. The
// process's main owns the signals: serve stops gracefully when the command's
// context is done.
func newServeCmd(app *App, g *global) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API (POST /api/v1/tasks, GET /api/v1/tasks/{id}, …)",
		Long:  serveHelp(),
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), app, g)
		},
	}
	cmd.Flags().StringVar(&o.addr, "http", api.DefaultAddr, "listen address of the HTTP API")
	cmd.Flags().Int64Var(&o.maxBody, "max-body", api.DefaultMaxBody, "request body limit in bytes (larger bodies get 413 request_too_large)")
	cmd.Flags().IntVar(&o.maxWaiters, "max-waiters", httpx.DefaultMaxHolds, "most waits (?wait=) and event streams open at once, in all (past it: 503 over_capacity with Retry-After)")
	cmd.Flags().IntVar(&o.maxPerClient, "max-waiters-per-client", 0, "most waits and event streams open at once from one client address (the TCP peer); 0: --max-waiters")
	cmd.Flags().BoolVar(&o.noConsole, "no-console", false, "do not serve the web console at "+console.Base)
	bindLogFormat(cmd, &o.logFormat)
	cmd.Flags().BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "serve without "+api.EnvToken+" on a non-loopback address (only behind something that authenticates callers)")
	return cmd
}

// run serves the API (and the console) until ctx is done.
func (o *serveOptions) run(ctx context.Context, app *App, g *global) error {
	token := app.Getenv(api.EnvToken)
	if err := o.Validate(token); err != nil {
		return err
	}
	cfg, rdb, err := g.connect(ctx, app)
	if err != nil {
		return err
	}
	defer rdb.Close()
	defer startTracing(ctx, app, "agentq-api")()
	log := NewLogger(app, "info", o.logFormat)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return runtimeErr(fmt.Errorf("listen on %s: %w", o.addr, err))
	}
	// A name may resolve to more than loopback: judge the bound address too.
	if err := checkOpenAPIAuth(ln.Addr().String(), token, o.insecureNoAuth); err != nil {
		_ = ln.Close()
		return err
	}
	o.warnAuth(log, ln.Addr().String(), token)
	if len(cfg.Agents) == 0 {
		log.Warn("the config names no agents: tasks for any agent name are accepted")
	}
	log.Info("enqueuer serve: HTTP API listening", "addr", "http://"+ln.Addr().String(), "auth", token != "", "agents", cfg.AgentNames(), "queues", cfg.ServedQueues())
	// One allowance of wrong tokens per client address for the API,
	// the console's bearer requests and its login form.
	limiter := httpx.NewLimiter(httpx.LimiterOptions{Logger: log})
	// One notifier for every wait and event stream of the API and the
	// console: a few Redis connections however many wait.
	hub := notify.New(rdb, record.StoreOf(tasks.NewStore(rdb)), notify.Options{Logger: log})
	hub.Start(ctx)
	defer hub.Stop()
	// One cap on the waits and streams of the API and the console.
	holds := httpx.NewHolds(httpx.HoldsOptions{Max: o.maxWaiters, PerClient: o.maxPerClient})
	var ui http.Handler
	if !o.noConsole {
		sampler := console.NewSampler(rdb, console.SamplerOptions{Logger: log})
		sampler.Start(ctx)
		defer sampler.Stop()
		ui = newConsole(rdb, cfg, console.Options{Token: token, Sampler: sampler, Logger: log, Limiter: limiter, Notifier: hub, Holds: holds})
		log.Info("enqueuer serve: web console", "url", "http://"+ln.Addr().String()+console.Base)
	}
	srv := api.New(rdb, cfg, api.Options{Token: token, MaxBody: o.maxBody, Logger: log, UI: ui, Limiter: limiter, Notifier: hub, Holds: holds})
	if err := srv.Serve(ctx, ln); err != nil {
		return runtimeErr(err)
	}
	log.Info("enqueuer serve: stopped")
	return nil
}

// warnAuth logs that the API on addr accepts requests without
// authentication, when it does.
func (o *serveOptions) warnAuth(log *slog.Logger, addr, token string) {
	switch {
	case token == "" && o.insecureNoAuth && !api.IsLoopbackAddr(addr):
		log.Warn("--insecure-no-auth: the API accepts requests without authentication on a non-loopback address; anyone who can reach " + addr + " can enqueue tasks and read dead letters")
	case token == "":
		log.Warn("no " + api.EnvToken + " set: the API accepts requests without authentication (loopback only)")
	}
}

// newConsole is the web console's handler with opts, given a tasks client
// on rdb and a canceler that cancels through it.
func newConsole(rdb redis.UniversalClient, cfg *config.Config, opts console.Options) http.Handler {
	client := tasks.NewClient(rdb, cfg.ClientOptions()...)
	opts.Client = client
	opts.Canceler = console.CancelFunc(func(ctx context.Context, id, reason string) error {
		_, err := client.Cancel(ctx, id, reason)
		return err
	})
	return console.New(rdb, cfg, opts).Handler()
}

// checkOpenAPIAuth refuses (exit 2) to serve on a non-loopback address
// without a token: anyone on the network could then enqueue tasks (exec
// agents run commands) and read dead letters with their params.
//
// A token that is set must be usable: blank or with white space or control
// characters, no client could send it as "Bearer <token>" (HTTP trims a
// header's white space), so it is refused rather than taken as protection.
// It must be a secret too (checkTokenStrength).
func checkOpenAPIAuth(addr, token string, insecureNoAuth bool) error {
	if token != "" && strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return usageErr("%s holds white space or a control character (%d bytes): set it to a secret token without them",
			api.EnvToken, len(token))
	}
	if err := checkTokenStrength(token); err != nil {
		return err
	}
	if token != "" || insecureNoAuth || api.IsLoopbackAddr(addr) {
		return nil
	}
	return usageErr("refusing to serve the HTTP API on %s without authentication: set %s to a secret token "+
		"(clients send Authorization: Bearer <token>), listen on a loopback address (--http %s), "+
		"or pass --insecure-no-auth if something in front of the API authenticates its callers",
		addr, api.EnvToken, api.DefaultAddr)
}

// MinTokenBytes is the shortest API token serve accepts: a shorter one
// ("a", "s3cret") is guessed, not a secret.
const MinTokenBytes = 16

// tokenPlaceholder starts the placeholder values of the examples
// (deploy/kubernetes/secret.example.yaml): a token that starts with it was
// copied, not made.
const tokenPlaceholder = "CHANGE-ME"

// checkTokenStrength refuses (exit 2) a token that is set but is no secret:
// shorter than MinTokenBytes, or an example's placeholder. The message
// says how to make one and never prints the token.
func checkTokenStrength(token string) error {
	const how = "make one with: openssl rand -hex 32"
	switch {
	case token == "":
		return nil
	case len(token) >= len(tokenPlaceholder) && strings.EqualFold(token[:len(tokenPlaceholder)], tokenPlaceholder):
		return usageErr("%s is the example's placeholder (%s…), not a secret: %s", api.EnvToken, tokenPlaceholder, how)
	case len(token) < MinTokenBytes:
		return usageErr("%s is %d bytes, too short to be a secret (at least %d): %s", api.EnvToken, len(token), MinTokenBytes, how)
	}
	return nil
}
