package worker

import (
	"bytes"
	"context"
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

// alerter raises one alert per window for an agent with threshold or more
// failures within that window: an ERROR log line with alert=true, a metric,
// and a POST of a JSON summary to the webhook when one is configured. The
// webhook is called from its own goroutine, retried a few times, and never
// blocks task processing (a full queue drops the POST, and says so).
//
// Counting is fleet-wide: every worker counts an agent's failures in one
// Redis hash per agent (alertScript), in fixed windows of the configured
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
type alerter struct {
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
	metrics   *metrics
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

// alertScript counts one failure of an agent in the fleet-wide window and
// says whether this call raises the window's alert.
//
// KEYS[1] the agent's window hash (rkeys.AlertWindow): start (window start,
// ms) and count.
// ARGV[1] window length in ms; ARGV[2] threshold; ARGV[3] now in ms, or ""
// for Redis TIME (one clock for the fleet).
// Returns {count in the window including this failure, 1 when this call
// raises the alert (count reached exactly the threshold) else 0, window
// start ms}.
//
// The window is [now - now mod window, +window). A hash from an earlier
// window is reset; the hash expires two windows after its last failure.
// The count reaches the threshold once per window, so exactly one call in
// the fleet gets raise = 1.
var alertScript = redis.NewScript(redisx.LuaNowMS + `
local now = now_ms(ARGV[3])
local w = tonumber(ARGV[1])
local start = now - (now % w)
local cur = tonumber(redis.call('HGET', KEYS[1], 'start') or '-1')
if cur < start then
  redis.call('HSET', KEYS[1], 'start', start, 'count', 0)
else
  start = cur
end
local n = redis.call('HINCRBY', KEYS[1], 'count', 1)
redis.call('PEXPIRE', KEYS[1], 2 * w)
local raise = 0
if n == tonumber(ARGV[2]) then raise = 1 end
return {n, raise, start}
`)

// countFleet runs alertScript for one failure of agent.
func (a *alerter) countFleet(agent string) (n int, raise bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), alertRedisTimeout)
	defer cancel()
	nowArg := ""
	if a.scriptNow != nil {
		nowArg = strconv.FormatInt(a.scriptNow().UnixMilli(), 10)
	}
	res, err := alertScript.Run(ctx, a.rdb, []string{rkeys.AlertWindow(agent)},
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

// newAlerter counts failures fleet-wide in rdb, or per process when rdb is
// nil.
func newAlerter(rdb redis.UniversalClient, threshold int, window time.Duration, webhook string, log *slog.Logger, m *metrics) *alerter {
	host := ""
	if u, err := url.Parse(webhook); err == nil {
		host = u.Host
	}
	return &alerter{
		rdb: rdb, threshold: threshold, window: window, webhook: webhook, host: host, now: time.Now, log: log, metrics: m,
		// Its own transport: the sender closes its idle connections on exit
		// without touching other clients' pools.
		client: &http.Client{Timeout: 5 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		fails:  map[string][]time.Time{}, raised: map[string]time.Time{},
		posts: make(chan alertBody, 64),
	}
}

// Start runs the webhook sender until ctx is done or Stop is called (no
// sender without a webhook).
func (a *alerter) Start(ctx context.Context) {
	if a.webhook != "" {
		a.lifecycle.Go(ctx, a.send)
	}
}

// Stop ends the sender and waits for it.
func (a *alerter) Stop() { a.lifecycle.Stop() }

// send posts the queued alerts until ctx ends.
func (a *alerter) send(ctx context.Context) {
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

func (a *alerter) post(ctx context.Context, b alertBody) {
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

// failure counts one failure of agent and raises an alert when due: once
// per window for the fleet, or, while Redis cannot count, once per window
// for this process (see alerter).
func (a *alerter) failure(agent string) {
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
	a.metrics.alerts.WithLabelValues(a.metrics.agent(agent)).Inc()
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
