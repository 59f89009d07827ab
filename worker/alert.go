package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// alerter raises one alert per window for an agent with threshold or more
// failures within that window: an ERROR log line with alert=true, a metric,
// and a POST of a JSON summary to the webhook when one is configured. The
// webhook is called from its own goroutine, retried a few times, and never
// blocks task processing (a full queue drops the POST, and says so).
//
// Counting is per worker process.
type alerter struct {
	threshold int
	window    time.Duration
	webhook   string
	now       func() time.Time
	log       *slog.Logger
	metrics   *metrics
	client    *http.Client
	// retryWait is the wait before the second try of a webhook POST; it
	// doubles for the third. Zero: 500ms.
	retryWait time.Duration

	mu     sync.Mutex
	fails  map[string][]time.Time
	raised map[string]time.Time // agent → start of the window its last alert covered
	posts  chan alertBody
	wg     sync.WaitGroup
}

type alertBody struct {
	Alert     string    `json:"alert"`
	Agent     string    `json:"agent"`
	Failures  int       `json:"failures"`
	Window    string    `json:"window"`
	Threshold int       `json:"threshold"`
	At        time.Time `json:"at"`
}

func newAlerter(threshold int, window time.Duration, webhook string, log *slog.Logger, m *metrics) *alerter {
	return &alerter{
		threshold: threshold, window: window, webhook: webhook, now: time.Now, log: log, metrics: m,
		// Its own transport: the sender closes its idle connections on exit
		// without touching other clients' pools.
		client: &http.Client{Timeout: 5 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		fails:  map[string][]time.Time{}, raised: map[string]time.Time{},
		posts: make(chan alertBody, 64),
	}
}

// start runs the webhook sender until ctx is done.
func (a *alerter) start(ctx context.Context) {
	if a.webhook == "" {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.client.CloseIdleConnections()
		for {
			select {
			case <-ctx.Done():
				return
			case b := <-a.posts:
				a.post(ctx, b)
			}
		}
	}()
}

func (a *alerter) wait() { a.wg.Wait() }

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
			a.log.Error("alert webhook: bad request", "err", err)
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
		a.log.Warn("alert webhook failed", "try", try, "of", tries, "err", err)
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

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return http.StatusText(e.code) }

// failure counts one failure of agent and raises an alert when due.
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
	n := len(f)
	last, had := a.raised[agent]
	due := n >= a.threshold && (!had || now.Sub(last) >= a.window)
	if due {
		a.raised[agent] = now
	}
	a.mu.Unlock()
	if !due {
		return
	}
	a.metrics.alerts.WithLabelValues(agent).Inc()
	a.log.Error("agent failure rate alert", "alert", true, "agent", agent, "failures", n,
		"window", a.window.String(), "threshold", a.threshold)
	if a.webhook == "" {
		return
	}
	select {
	case a.posts <- alertBody{Alert: "agent_failures", Agent: agent, Failures: n, Window: a.window.String(), Threshold: a.threshold, At: now.UTC()}:
	default:
		a.log.Warn("alert webhook queue full; alert not posted", "agent", agent)
	}
}
