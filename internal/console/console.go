// Package console is agentq's web console, served by `enqueuer serve` at
// /ui/: Overview (queues, dead letters, restarts, breakers, agent health
// and charts of the last hour, kept in Redis per minute), Dead letters
// (filter, page, open, requeue, delete, export), Task (search by ID: state,
// wait and history; cancel; send a signal), Breakers (reset, trip), Agents, Restarts, Budgets
// (reset) and more.
//
// Pages are rendered on the server with html/template; the CSS and the
// little JavaScript (auto-refresh, confirmations) are embedded in the
// binary, so the console loads nothing from elsewhere and reads fine
// without JavaScript. It authenticates with the API's token: the
// "Authorization: Bearer" header, or the login form at /ui/login, which
// sets a signed session cookie (see auth.go). Every state-changing form is
// a POST carrying a CSRF token, and must come from the console's own
// origin.
package console

import (
	"context"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/notify"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/stores"
	"github.com/agentq/agentq/tasks"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Base is the path the console is served under.
const Base = "/ui/"

// Defaults of Options.
const (
	DefaultSessionTTL   = 12 * time.Hour
	DefaultPageSize     = 50
	DefaultRedisTimeout = 3 * time.Second
	// DefaultRefresh is how often a page refreshes itself (with JavaScript).
	DefaultRefresh = 10 * time.Second
)

// Canceler cancels a task (tasks.Client's Cancel). The console shows a
// Cancel button on a task's page only when Options.Canceler is set.
type Canceler interface {
	Cancel(ctx context.Context, id, reason string) error
}

// CancelFunc adapts a function to a Canceler, e.g. tasks.Client's Cancel:
//
//	console.CancelFunc(func(ctx context.Context, id, reason string) error {
//		_, err := client.Cancel(ctx, id, reason)
//		return err
//	})
type CancelFunc func(ctx context.Context, id, reason string) error

// Cancel calls f.
func (f CancelFunc) Cancel(ctx context.Context, id, reason string) error { return f(ctx, id, reason) }

// Options configure a Console. The zero value is usable: no token (open:
// only for loopback), no cancel, no chart.
type Options struct {
	// Token is the API token (AGENTQ_API_TOKEN): a bearer header or a login
	// with it opens the console. Zero: no authentication.
	Token string
	// Canceler cancels tasks from the Task page. Zero: no Cancel button.
	Canceler Canceler
	// Sampler stores readings of the queue sizes in Redis and reads the
	// Overview's charts back from there (internal/charts). Zero: no charts.
	Sampler *Sampler
	// Client requeues dead letters. Zero: tasks.NewClient(rdb,
	// cfg.ClientOptions()...).
	Client *tasks.Client
	// Breakers reads, resets and trips breakers. Zero:
	// breaker.New(rdb) with RedisTimeout as its call timeout.
	Breakers *breaker.Breakers
	// RedisTimeout bounds the Redis work of one page (an export gets 20
	// times as long; a bulk requeue or delete 25 s). Zero: DefaultRedisTimeout.
	RedisTimeout time.Duration
	// SessionTTL is how long a login lasts. Zero: DefaultSessionTTL.
	SessionTTL time.Duration
	// PageSize is the dead letters, and the budgets, per page. Zero:
	// DefaultPageSize.
	PageSize int
	// Refresh is how often pages refresh themselves. Zero: DefaultRefresh;
	// negative: never.
	Refresh time.Duration
	// Now is the clock of sessions. Zero: time.Now.
	Now func() time.Time
	// Logger logs server errors and wrong tokens. Zero: slog.Default().
	Logger *slog.Logger
	// Limiter counts wrong tokens (bearer headers and logins) per client
	// address and locks a client out (429) after 10 within a minute; pass
	// the API's (api.Options.Limiter) so both draw on one allowance. Zero:
	// a limiter of its own with the defaults.
	Limiter *httpx.Limiter
	// Notifier is the process's notifier, shared with the API (serve
	// passes its one), for the Task page's live events. Zero: the console
	// makes its own on first use (Close stops it).
	Notifier *notify.Hub
	// Holds caps the live event streams open at once, per client address
	// and in all (503 with Retry-After past either); pass the API's
	// (api.Options.Holds) so both draw on one cap. Zero: no cap.
	Holds *httpx.Holds
}

// Console is the web console on one Redis and one configuration.
type Console struct {
	stores.Set // Hubs: Options.Notifier, or the console's own
	opts       Options
	key        []byte
	base       string
	pages      map[string]*template.Template
	handler    http.Handler
}

// New returns the console on rdb; cfg (nil: config.Default()) names the
// agents and their breakers.
func New(rdb redis.UniversalClient, cfg *config.Config, opts Options) *Console {
	opts.RedisTimeout = defaults.Positive(opts.RedisTimeout, DefaultRedisTimeout)
	opts.SessionTTL = defaults.Positive(opts.SessionTTL, DefaultSessionTTL)
	opts.PageSize = defaults.Positive(opts.PageSize, DefaultPageSize)
	if opts.Refresh == 0 {
		opts.Refresh = DefaultRefresh
	}
	opts.Now = defaults.Clock(opts.Now)
	opts.Logger = defaults.Logger(opts.Logger)
	if opts.Limiter == nil {
		opts.Limiter = httpx.NewLimiter(httpx.LimiterOptions{Now: opts.Now, Logger: opts.Logger})
	}
	set := stores.New(rdb, cfg, stores.Options{Client: opts.Client, Breakers: opts.Breakers,
		Notifier: opts.Notifier, RedisTimeout: opts.RedisTimeout, Logger: opts.Logger})
	opts.Client, opts.Breakers = set.Client, set.Breakers
	c := &Console{Set: set, opts: opts, key: keyFor(opts.Token), base: Base}
	c.pages = parsePages()
	c.handler = c.routes()
	return c
}

// Handler serves the console under /ui/.
func (c *Console) Handler() http.Handler { return c.handler }

// handlerFunc serves one page; a returned error is rendered as the error page.
type handlerFunc func(c *Console, rw http.ResponseWriter, r *http.Request, s session) error

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix(c.base+"static/", http.FileServerFS(static))
	mux.Handle("GET "+c.base+"static/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Cache-Control", "public, max-age=300")
		fileServer.ServeHTTP(rw, r)
	}))
	mux.HandleFunc("GET "+c.base+"login", c.loginPage)
	mux.HandleFunc("POST "+c.base+"login", c.login)
	for _, rt := range []struct {
		pattern string
		h       handlerFunc
	}{
		{"GET " + c.base + "{$}", (*Console).overview},
		{"POST " + c.base + "logout", (*Console).logout},
		{"GET " + c.base + "deadletters", (*Console).deadLetters},
		{"GET " + c.base + "deadletters/export", (*Console).exportDeadLetters},
		{"GET " + c.base + "deadletters/bulk", (*Console).bulkConfirm},
		{"POST " + c.base + "deadletters/bulk", (*Console).bulk},
		{"GET " + c.base + "deadletter/{id}", (*Console).deadLetter},
		{"POST " + c.base + "deadletter/{id}/requeue", (*Console).requeue},
		{"POST " + c.base + "deadletter/{id}/delete", (*Console).deleteDeadLetter},
		{"GET " + c.base + "tasks", (*Console).taskList},
		{"POST " + c.base + "queues/{name}/pause", (*Console).queuePause},
		{"POST " + c.base + "queues/{name}/resume", (*Console).queueResume},
		{"GET " + c.base + "tasks/{id}", (*Console).task},
		{"GET " + c.base + "tasks/{id}/events", (*Console).taskEvents},
		{"POST " + c.base + "tasks/{id}/cancel", (*Console).cancel},
		{signalRoute, (*Console).signal},
		{"GET " + c.base + "breakers", (*Console).breakerList},
		{"POST " + c.base + "breakers/reset", (*Console).breakerReset},
		{"POST " + c.base + "breakers/trip", (*Console).breakerTrip},
		{"GET " + c.base + "agents", (*Console).agents},
		{"GET " + c.base + "restarts", (*Console).restarts},
		{"GET " + c.base + "webhooks", (*Console).webhooks},
		{"GET " + c.base + "workers", (*Console).workers},
		{"GET " + c.base + "tenants", (*Console).tenants},
		{"GET " + c.base + "schedules", (*Console).schedules},
		{"GET " + c.base + "usage", (*Console).usagePage},
		{"GET " + c.base + "budgets", (*Console).budgetsPage},
		{"POST " + c.base + "budgets/reset", (*Console).budgetReset},
	} {
		mux.HandleFunc(rt.pattern, c.serve(rt.h))
	}
	mux.HandleFunc(c.base, c.serve(func(c *Console, rw http.ResponseWriter, r *http.Request, s session) error {
		return httpError(http.StatusNotFound, "There is no page %s.", r.URL.Path)
	}))
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		securityHeaders(rw.Header())
		mux.ServeHTTP(rw, r)
	})
}

// serve wraps a page: authentication, the same-origin and CSRF checks of a
// POST, and the error page.
func (c *Console) serve(h handlerFunc) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Cache-Control", "no-store")
		s, err := c.authenticate(rw, r)
		if err != nil {
			if errors.Is(err, errNoSession) {
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					http.Redirect(rw, r, c.base+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				err = httpError(http.StatusUnauthorized, "Log in first (or send Authorization: Bearer with the API token).")
			}
			c.renderError(rw, r, session{}, err)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(rw, r.Body, formLimit(r))
			if err := r.ParseForm(); err != nil {
				c.renderError(rw, r, s, httpError(http.StatusBadRequest, "Unreadable form: %v", err))
				return
			}
			if !s.bearer {
				if !sameOrigin(r) {
					c.renderError(rw, r, s, httpError(http.StatusForbidden, "Cross-origin form refused: this form did not come from the console's own pages."))
					return
				}
				if !c.checkCSRF(s, r.PostForm.Get(csrfField)) {
					c.renderError(rw, r, s, httpError(http.StatusForbidden, "The form's CSRF token is missing or stale: reload the page and try again."))
					return
				}
			}
		}
		if err := h(c, rw, r, s); err != nil {
			c.renderError(rw, r, s, err)
		}
	}
}

// maxForm bounds a form's body (maxSignalForm the signal form's).
const maxForm = 64 << 10

// signalRoute is the signal form's route (a pattern of routes).
const signalRoute = "POST " + Base + "tasks/{id}/signal"

// formLimit is how large the body of POST r (matched by the mux: its
// Pattern is set) may be.
func formLimit(r *http.Request) int64 {
	if r.Pattern == signalRoute {
		return maxSignalForm
	}
	return maxForm
}

// bounded is r's context bounded by the Redis timeout times n.
func (c *Console) bounded(r *http.Request, n int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), time.Duration(n)*c.opts.RedisTimeout)
}

// statusError is an error page with its status.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func httpError(status int, format string, args ...any) error {
	return &statusError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (c *Console) renderError(rw http.ResponseWriter, r *http.Request, s session, err error) {
	var se *statusError
	switch {
	case errors.As(err, &se):
	case errors.Is(err, tasks.ErrNotFound), errors.Is(err, deadletter.ErrNotFound):
		se = &statusError{status: http.StatusNotFound, msg: err.Error()}
	case redisx.IsUnavailable(err), errors.Is(err, context.DeadlineExceeded):
		se = &statusError{status: http.StatusServiceUnavailable, msg: "Redis is unavailable: " + err.Error()}
	default:
		se = &statusError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	if se.status >= 500 {
		c.opts.Logger.Warn("console request failed", "method", r.Method, "path", r.URL.Path, "status", se.status, "err", err)
	}
	c.render(rw, r, s, se.status, "error.html", "", http.StatusText(se.status), se)
}

// page is what every template gets.
type page struct {
	Title  string
	Nav    string // the active nav link
	Base   string
	CSRF   string
	Logout bool // a logout button (session cookie with a token)
	// Guest: no one is logged in (the login page, an error before
	// logging in): the page shows no nav bar and no search.
	Guest   bool
	Flash   string
	Refresh int // seconds; 0: none
	Now     time.Time
	Data    any
}

func (c *Console) render(rw http.ResponseWriter, r *http.Request, s session, status int, name, nav, title string, data any) {
	t, ok := c.pages[name]
	if !ok {
		http.Error(rw, "console: no template "+name, http.StatusInternalServerError)
		return
	}
	p := page{
		Title: title, Nav: nav, Base: c.base, CSRF: c.csrfToken(s),
		Logout: c.opts.Token != "" && !s.bearer && s.id != nil, Guest: s.id == nil && !s.bearer,
		Flash: c.flash(r, s), Now: c.opts.Now().UTC(), Data: data,
	}
	if nav != "" && name != "bulk.html" && status == http.StatusOK && c.opts.Refresh > 0 {
		p.Refresh = int(c.opts.Refresh / time.Second)
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		c.opts.Logger.Warn("console: rendering failed", "template", name, "err", err)
		http.Error(rw, "console: rendering failed", http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.WriteHeader(status)
	_, _ = rw.Write([]byte(b.String()))
}

// Flashes. A form's POST answers 303 to a page whose URL carries only the
// kind of what was done (?done=requeued); what it was done to (the dead
// letter's ID, the breaker's key, the counts) is stored server-side for
// the session (rkeys.ConsoleFlash, flashTTL) and rendered only when the
// URL's kind is the stored one. No text of the URL ever reaches the page,
// so a link cannot make the console say what it never did.

// flashTTL is how long a flash is shown (pages refresh themselves).
const flashTTL = 5 * time.Minute

// flashMsg is what a form did.
type flashMsg struct {
	Kind   string `json:"kind"`
	ID     string `json:"id,omitempty"`
	Key    string `json:"key,omitempty"`
	N      int    `json:"n,omitempty"`
	Failed int    `json:"failed,omitempty"`
	For    string `json:"for,omitempty"`
	More   bool   `json:"more,omitempty"`
	// Resumed: a signal sent (again) resumed the task.
	Resumed bool `json:"resumed,omitempty"`
}

// text is the flash's sentence.
func (f flashMsg) text() string {
	more := ""
	if f.More {
		more = " Time ran out before the end: the rest are still dead letters; run it again."
	}
	switch f.Kind {
	case "requeued":
		return fmt.Sprintf("Requeued %s: it is pending again.", f.ID)
	case "deleted":
		return fmt.Sprintf("Deleted dead letter %s.", f.ID)
	case "requeued-n":
		if f.Failed > 0 {
			return fmt.Sprintf("Requeued %d dead letters; %d could not be requeued.", f.N, f.Failed) + more
		}
		return fmt.Sprintf("Requeued %d dead letters.", f.N) + more
	case "deleted-n":
		return fmt.Sprintf("Deleted %d dead letters.", f.N) + more
	case "reset":
		return fmt.Sprintf("Breaker %s reset (closed).", f.Key)
	case "tripped":
		return fmt.Sprintf("Breaker %s tripped (open) for %s.", f.Key, f.For)
	case "canceled":
		return fmt.Sprintf("Canceled task %s.", f.ID)
	case "paused":
		return fmt.Sprintf("Queue %s paused: its tasks are held, none starts, until it is resumed.", f.Key)
	case "resumed":
		return fmt.Sprintf("Queue %s resumed.", f.Key)
	case "budget-reset":
		of := fmt.Sprintf("%s %s", f.Key, f.ID)
		if f.ID == "" {
			of = "the default tenant"
		}
		return fmt.Sprintf("Budget of %s reset: its window's debits are forgotten; tasks waiting for it start within a minute.", of)
	}
	return f.signalText()
}

// flash is the flash of the page r asks for (?done=KIND): the session's
// stored one when its kind is KIND, else none.
func (c *Console) flash(r *http.Request, s session) string {
	kind := r.URL.Query().Get("done")
	if kind == "" || s.id == nil {
		return ""
	}
	ctx, cancel := c.bounded(r, 1)
	defer cancel()
	b, err := c.Redis.Get(ctx, rkeys.ConsoleFlash(hex.EncodeToString(s.id))).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			c.opts.Logger.Debug("console: reading the flash failed", "err", err)
		}
		return ""
	}
	var f flashMsg
	if json.Unmarshal(b, &f) != nil || f.Kind != kind {
		return ""
	}
	return f.text()
}

// redirect answers a POST with 303 to path?done=KIND, storing f as the
// session's flash (a bearer request has no session: no flash).
func (c *Console) redirect(rw http.ResponseWriter, r *http.Request, s session, path string, f flashMsg) {
	if s.id != nil {
		ctx, cancel := c.bounded(r, 1)
		defer cancel()
		b, _ := json.Marshal(f)
		if err := c.Redis.Set(ctx, rkeys.ConsoleFlash(hex.EncodeToString(s.id)), b, flashTTL).Err(); err != nil {
			c.opts.Logger.Warn("console: storing the flash failed", "err", err)
		}
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	http.Redirect(rw, r, path+sep+url.Values{"done": {f.Kind}}.Encode(), http.StatusSeeOther)
}

// safeNext keeps a post-login destination inside the console.
func (c *Console) safeNext(next string) string {
	if !strings.HasPrefix(next, c.base) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return c.base
	}
	return next
}

func (c *Console) loginPage(rw http.ResponseWriter, r *http.Request) {
	rw.Header().Set("Cache-Control", "no-store")
	if c.opts.Token == "" {
		http.Redirect(rw, r, c.base, http.StatusSeeOther)
		return
	}
	next := c.safeNext(r.URL.Query().Get("next"))
	c.render(rw, r, session{}, http.StatusOK, "login.html", "", "Log in", map[string]any{"Next": next})
}

func (c *Console) login(rw http.ResponseWriter, r *http.Request) {
	rw.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(rw, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.renderError(rw, r, session{}, httpError(http.StatusBadRequest, "Unreadable form: %v", err))
		return
	}
	if !sameOrigin(r) {
		c.renderError(rw, r, session{}, httpError(http.StatusForbidden, "Cross-origin login refused."))
		return
	}
	next := c.safeNext(r.PostForm.Get("next"))
	if c.opts.Token != "" {
		got := r.PostForm.Get("token")
		switch res, wait := c.opts.Limiter.Verify(r, r.Method+" "+r.URL.Path, func() bool { return httpx.TokenEqual(got, c.opts.Token) }); res {
		case httpx.AuthBlocked:
			rw.Header().Set("Retry-After", strconv.FormatInt(httpx.RetryAfterSeconds(wait), 10))
			c.render(rw, r, session{}, http.StatusTooManyRequests, "login.html", "", "Log in",
				map[string]any{"Next": next, "Error": "Too many wrong tokens from your address: wait a minute."})
			return
		case httpx.AuthWrong:
			c.render(rw, r, session{}, http.StatusUnauthorized, "login.html", "", "Log in",
				map[string]any{"Next": next, "Error": "Wrong token."})
			return
		}
	}
	s, v := c.newSession()
	c.setSessionCookie(rw, r, v, s.expires)
	http.Redirect(rw, r, next, http.StatusSeeOther)
}

func (c *Console) logout(rw http.ResponseWriter, r *http.Request, s session) error {
	if !s.bearer {
		ctx, cancel := c.bounded(r, 1)
		defer cancel()
		if err := c.revoke(ctx, s); err != nil {
			return fmt.Errorf("console: logging out (the session could not be revoked; it stays valid): %w", err)
		}
	}
	c.setSessionCookie(rw, r, "", time.Time{})
	if c.opts.Token == "" {
		http.Redirect(rw, r, c.base, http.StatusSeeOther)
		return nil
	}
	http.Redirect(rw, r, c.base+"login", http.StatusSeeOther)
	return nil
}
