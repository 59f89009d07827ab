// Package alert is the worker's failure-rate alert: one alert per window
// for an agent with threshold or more failures within that window,
// counted fleet-wide in Redis (per process while Redis cannot count), and
// the sender that POSTs each alert to a webhook, a startstop service.
package alert

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
)

// Alerter raises one alert per window for an agent with threshold or more
// failures within that window: an ERROR log line with alert=true, a metric,
// and a POST of a JSON summary to the webhook when one is configured. The
// webhook is called from its own goroutine, retried a few times, and never
// blocks task processing (a full queue drops the POST, and says so).
//
// Counting is fleet-wide: every worker counts an agent's failures in one
// Redis hash per agent (lua/window.lua), in fixed windows of the configured
// length aligned to the Unix epoch on Redis's clock, and the one failure
// that brings the window's count to the threshold raises the alert, in
// whichever worker it happens: one alert per window for the fleet.
//
// When Redis cannot be reached (or the script fails), a worker falls back
// to counting in this process alone, as before fleet counting: a sliding
// window of the failures it saw, one alert per window per process. It
// keeps that count all the time, so the fallback starts with what the
// process saw, and it logs the switch both ways. An alert is never dropped
// because Redis is down; during an outage it may come once per process.
type Alerter struct {
	rdb       redis.UniversalClient // nil: per-process counting only
	threshold int
	window    time.Duration
	webhook   string
	host      string // the webhook's host, the only part of it ever logged
	now       func() time.Time
	// scriptNow, when set (tests), is the clock of the fleet-wide window
	// instead of Redis TIME.
	scriptNow func() time.Time
	log       *slog.Logger
	raisedFn  func(agent string)
	client    *http.Client
	// retryWait is the wait before the second try of a webhook POST; it
	// doubles for the third. Zero: 500ms.
	retryWait time.Duration

	fleetDown atomic.Bool // falling back to per-process counting

	mu        sync.Mutex
	fails     map[string][]time.Time
	raised    map[string]time.Time // agent → when this process last raised (or saw the fleet raise) its alert
	posts     chan alertBody
	lifecycle startstop.Loop // the webhook sender
}

// alertRedisTimeout bounds the fleet count of one failure; past it the
// failure is counted per process.
const alertRedisTimeout = time.Second

//go:embed lua/window.lua
var windowLua embed.FS

// windowScript counts one failure in the fleet-wide window
// (lua/window.lua; F: the window hash's fields).
var windowScript = redisx.NewScripts("alert", windowLua, map[string]map[string]string{
	"F": redisx.Quoted("start", "count"),
}).Script(redisx.NowMS, "lua/window.lua")

// countFleet runs windowScript for one failure of agent.
func (a *Alerter) countFleet(agent string) (n int, raise bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), alertRedisTimeout)
	defer cancel()
	nowArg := ""
	if a.scriptNow != nil {
		nowArg = strconv.FormatInt(a.scriptNow().UnixMilli(), 10)
	}
	res, err := windowScript.Run(ctx, a.rdb, []string{rkeys.AlertWindow(agent)},
		max(a.window.Milliseconds(), 1), a.threshold, nowArg).Int64Slice()
	if err != nil {
		return 0, false, err
	}
	if len(res) != 3 {
		return 0, false, errors.New("alert window script: unexpected reply")
	}
	return int(res[0]), res[1] == 1, nil
}

type alertBody struct {
	Alert     string    `json:"alert"`
	Agent     string    `json:"agent"`
	Failures  int       `json:"failures"`
	Window    string    `json:"window"`
	Threshold int       `json:"threshold"`
	At        time.Time `json:"at"`
}

// Options are an Alerter's.
type Options struct {
	// Threshold is the failures of an agent within Window that raise an
	// alert; zero or less: no alerts.
	Threshold int
	Window    time.Duration
	// Webhook is the URL alerts are POSTed to; "": none.
	Webhook string
	// Logger; nil: slog.Default.
	Logger *slog.Logger
	// Raised, when set, is told of each alert raised (the worker's
	// agentq_alerts_total).
	Raised func(agent string)
}

// New counts failures fleet-wide in rdb, or per process when rdb is nil.
func New(rdb redis.UniversalClient, o Options) *Alerter {
	host := ""
	if u, err := url.Parse(o.Webhook); err == nil {
		host = u.Host
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Raised == nil {
		o.Raised = func(string) {}
	}
	return &Alerter{
		rdb: rdb, threshold: o.Threshold, window: o.Window, webhook: o.Webhook, host: host, now: time.Now,
		log: o.Logger, raisedFn: o.Raised,
		// Its own transport: the sender closes its idle connections on exit
		// without touching other clients' pools.
		client: &http.Client{Timeout: 5 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		fails:  map[string][]time.Time{}, raised: map[string]time.Time{},
		posts: make(chan alertBody, 64),
	}
}

// Start runs the webhook sender until ctx is done or Stop is called (no
// sender without a webhook).
func (a *Alerter) Start(ctx context.Context) {
	if a.webhook != "" {
		a.lifecycle.Go(ctx, a.send)
	}
}

// Stop ends the sender and waits for it.
func (a *Alerter) Stop() { a.lifecycle.Stop() }

// send posts the queued alerts until ctx ends.
func (a *Alerter) send(ctx context.Context) {
	defer a.client.CloseIdleConnections()
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-a.posts:
			a.post(ctx, b)
		}
	}
}

func (a *Alerter) post(ctx context.Context, b alertBody) {
	body, _ := json.Marshal(b)
	delay := a.retryWait
	if delay <= 0 {
		delay = 500 * time.Millisecond
	}
	const tries = 3
	for try := 1; try <= tries; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.webhook, bytes.NewReader(body))
		if err != nil {
			a.log.Error("alert webhook: bad request", "host", a.host, "err", withoutURL(err))
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
			err = &httpStatusError{resp.StatusCode}
		}
		a.log.Warn("alert webhook failed", "host", a.host, "try", try, "of", tries, "err", withoutURL(err))
		if try == tries {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// withoutURL is err without the webhook's URL, which is often a secret
// (Slack's are): net/http's *url.Error and url.Parse's errors quote it
// whole; what they wrap does not.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return http.StatusText(e.code) }

// Failure counts one failure of agent and raises an alert when due: once
// per window for the fleet, or, while Redis cannot count, once per window
// for this process (see Alerter). A nil Alerter raises none.
func (a *Alerter) Failure(agent string) {
	if a == nil || a.threshold <= 0 {
		return
	}
	now := a.now()
	a.mu.Lock()
	cut := now.Add(-a.window)
	f := a.fails[agent]
	i := 0
	for i < len(f) && !f[i].After(cut) {
		i++
	}
	f = append(f[i:], now)
	a.fails[agent] = f
	a.mu.Unlock()

	scope := "process"
	var n int
	var due bool
	if a.rdb != nil {
		fn, raise, err := a.countFleet(agent)
		if err == nil {
			if a.fleetDown.CompareAndSwap(true, false) {
				a.log.Info("alert counting is fleet-wide again")
			}
			scope, n, due = "fleet", fn, raise
		} else if a.fleetDown.CompareAndSwap(false, true) {
			a.log.Warn("alert counting falls back to this worker process: Redis cannot count", "err", err)
		}
	}
	a.mu.Lock()
	last, had := a.raised[agent]
	if scope == "process" {
		n = len(a.fails[agent])
		due = n >= a.threshold && (!had || now.Sub(last) >= a.window)
	}
	if due {
		a.raised[agent] = now
	}
	a.mu.Unlock()
	if !due {
		return
	}
	a.raisedFn(agent)
	a.log.Error("agent failure rate alert", "alert", true, "agent", agent, "failures", n,
		"window", a.window.String(), "threshold", a.threshold, "counted", scope)
	if a.webhook == "" {
		return
	}
	select {
	case a.posts <- alertBody{Alert: "agent_failures", Agent: agent, Failures: n, Window: a.window.String(), Threshold: a.threshold, At: now.UTC()}:
	default:
		a.log.Warn("alert webhook queue full; alert not posted", "agent", agent)
	}
}
