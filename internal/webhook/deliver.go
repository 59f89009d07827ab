package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redact"
	"github.com/agentq/agentq/internal/redisx"
	"github.com/agentq/agentq/internal/rkeys"
	"github.com/agentq/agentq/internal/startstop"
)

// Defaults of Options.
const (
	DefaultPoll           = 250 * time.Millisecond
	DefaultBatch          = 16
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultJitter         = 0.2
	DefaultRepairEvery    = time.Minute
	// DefaultTimeout and DefaultMaxAge are a Hook's when it has none.
	DefaultTimeout = 10 * time.Second
	DefaultMaxAge  = 24 * time.Hour
	// HooksLifetime is how long a task's deliveries are kept after their
	// last change (a given-up delivery stays visible that long).
	HooksLifetime = 7 * 24 * time.Hour
	// maxErrorText caps the last error kept per delivery.
	maxErrorText = 512
)

// Options configure a Deliverer.
type Options struct {
	// Hooks are the configured webhooks by name.
	Hooks map[string]Hook
	// Client sends the deliveries; zero: a client of its own. Its
	// CheckRedirect is replaced by agent.StrictRedirects (a copy is used).
	Client *http.Client
	// Now is the clock; zero: time.Now.
	Now func() time.Time
	// Logger; zero: slog.Default(). URLs are logged redacted, secrets never.
	Logger *slog.Logger
	// Poll is how often the due set is looked at. Zero: DefaultPoll.
	Poll time.Duration
	// Batch is the most tasks claimed at once. Zero: DefaultBatch.
	Batch int
	// Concurrency is the most deliveries this worker makes at once (its
	// pool; each webhook has at most its Hook.Concurrency of them). Zero:
	// DefaultConcurrency.
	Concurrency int
	// InitialBackoff, MaxBackoff and Jitter shape the retries of a failed
	// delivery: min(MaxBackoff, InitialBackoff·2^(n-1)) ±Jitter after the
	// n-th failure. Zero: the defaults.
	InitialBackoff, MaxBackoff time.Duration
	Jitter                     float64
	// RepairEvery is how often, on a Redis Cluster, the outboxes are
	// scanned for a task missing from the due set. Zero: DefaultRepairEvery.
	RepairEvery time.Duration
	// Observe, when set, is told of each delivery attempt's outcome:
	// delivered, failed (to be retried) or given_up (the worker's metrics).
	Observe func(webhook, outcome string)
	// Pending, when set, is told after each claim how many tasks have
	// deliveries still to make (due, waiting for a retry or being made).
	Pending func(n int)
}

// Deliverer makes the webhook deliveries of every task (any number of
// workers run one each; a lease keeps each task's deliveries with one).
type Deliverer struct {
	lifecycle startstop.Loop
	rdb       redis.UniversalClient
	store     *record.Store
	o         Options
	client    *http.Client
	lease     time.Duration
	cluster   bool
	// cursors are Repair's SCAN cursors by master address.
	cursors map[string]uint64
	// slots is the pool (Options.Concurrency) and lanes each webhook's
	// share of it (Hook.Concurrency): an attempt holds one of each.
	slots chan struct{}
	lanes map[string]*lane
	// active counts the claimed tasks not yet released; kick wakes Run
	// when a slot frees.
	active sync.WaitGroup
	kick   chan struct{}
}

// New returns a Deliverer of the webhooks o.Hooks on rdb, reading tasks
// through store.
func New(rdb redis.UniversalClient, store *record.Store, o Options) *Deliverer {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Poll = defaults.Positive(o.Poll, DefaultPoll)
	o.Batch = defaults.Positive(o.Batch, DefaultBatch)
	o.Concurrency = defaults.Positive(o.Concurrency, DefaultConcurrency)
	o.InitialBackoff = defaults.Positive(o.InitialBackoff, DefaultInitialBackoff)
	o.MaxBackoff = defaults.Positive(o.MaxBackoff, DefaultMaxBackoff)
	if o.Jitter <= 0 || o.Jitter > 1 {
		o.Jitter = DefaultJitter
	}
	o.RepairEvery = defaults.Positive(o.RepairEvery, DefaultRepairEvery)
	if o.Observe == nil {
		o.Observe = func(string, string) {}
	}
	if o.Pending == nil {
		o.Pending = func(int) {}
	}
	base := o.Client
	if base == nil {
		base = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	client := *base
	client.CheckRedirect = checkRedirect
	hooks := make(map[string]Hook, len(o.Hooks))
	lanes := make(map[string]*lane, len(o.Hooks))
	for name, h := range o.Hooks {
		h.Timeout = defaults.Positive(h.Timeout, DefaultTimeout)
		h.MaxAge = defaults.Positive(h.MaxAge, DefaultMaxAge)
		if len(h.Events) == 0 {
			h.Events = DefaultEvents
		}
		// No one webhook takes every slot of the pool.
		h.Concurrency = min(defaults.Positive(h.Concurrency, DefaultHookConcurrency), max(1, o.Concurrency/2))
		h.Name = name
		hooks[name] = h
		lanes[name] = &lane{slots: make(chan struct{}, h.Concurrency)}
	}
	o.Hooks = hooks
	// The lease covers one delivery attempt with room to spare, renewed
	// after each: a worker killed mid-delivery holds a task that long.
	lease := 10 * time.Second
	for _, h := range o.Hooks {
		lease = max(lease, 2*h.Timeout+10*time.Second)
	}
	_, cluster := rdb.(*redis.ClusterClient)
	return &Deliverer{rdb: rdb, store: store, o: o, client: &client, lease: lease, cluster: cluster,
		cursors: map[string]uint64{}, lanes: lanes, slots: make(chan struct{}, o.Concurrency),
		kick: make(chan struct{}, 1)}
}

// Run delivers until ctx ends: a pass each Poll, and again whenever an
// attempt frees a slot of the pool; it returns once the attempts under way
// have ended. (Start runs it as a service, with the outbox repair on a
// Cluster.)
func (d *Deliverer) Run(ctx context.Context) error {
	t := time.NewTicker(d.o.Poll)
	defer t.Stop()
	defer d.active.Wait()
	var n atomic.Int64
	for {
		if err := d.pass(ctx, &n); err != nil && ctx.Err() == nil {
			d.o.Logger.Warn("webhooks: delivery pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-d.kick:
		}
	}
}

// claimScript claims due tasks, putting back those whose lease expired
// (lua/claim.lua documents its KEYS, ARGV and replies).
var claimScript = scripts.Script(redisx.NowMS, "lua/claim.lua")

// renewScript extends a lease still held (lua/renew.lua documents its KEYS, ARGV and replies).
var renewScript = scripts.Script("lua/renew.lua")

// releaseScript ends a lease (lua/release.lua documents its KEYS, ARGV and replies).
var releaseScript = scripts.Script("lua/release.lua")

// takeScript moves a task's outbox entries into its deliveries
// (lua/take.lua documents its KEYS, ARGV and replies).
var takeScript = scripts.Script("lua/take.lua")

// Delivery is one delivery of one event of a task to one webhook, as kept
// in the task's deliveries hash (field "<seq>:<webhook>").
type Delivery struct {
	// Event is the task's event, as recorded.
	Event json.RawMessage `json:"event"`
	// Attempts made so far.
	Attempts int `json:"attempts"`
	// First is when the delivery was first due (ms): it is given up
	// max_age after.
	First int64 `json:"first"`
	// Next is when the next attempt is due (ms).
	Next int64 `json:"next"`
	// LastError is the last attempt's error ("" before any failure).
	LastError string `json:"last_error,omitempty"`
	// GivenUp is when the delivery was given up (ms; 0: not given up).
	GivenUp int64 `json:"given_up,omitempty"`
}

// field is a delivery's field in the deliveries hash.
func field(seq int64, hook string) string { return strconv.FormatInt(seq, 10) + ":" + hook }

// splitField is field's inverse.
func splitField(f string) (int64, string, bool) {
	s, name, ok := strings.Cut(f, ":")
	n, err := strconv.ParseInt(s, 10, 64)
	return n, name, ok && err == nil
}

// MessageID is the webhook-id of the delivery of task id's event seq to
// the webhook hook: the same on every attempt, so receivers drop
// duplicates by it.
func MessageID(id string, seq int64, hook string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + strconv.FormatInt(seq, 10) + "\x00" + hook))
	return "msg_" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// Body is what a delivery POSTs (JSON).
type Body struct {
	// Type is "task." and the webhook event name (Type).
	Type string `json:"type"`
	// Timestamp is when the event was recorded.
	Timestamp time.Time `json:"timestamp"`
	Data      BodyData  `json:"data"`
}

// BodyData is a delivery's data: the event and the task as
// GET /api/v1/tasks/{id} shows it when the delivery is made.
type BodyData struct {
	Event json.RawMessage `json:"event"`
	Task  *record.View    `json:"task"`
}

// held is one claimed task being delivered: its lease and what its
// deliveries' outcomes make of its release. Its webhooks' chains run side
// by side and share it.
type held struct {
	id string
	mu sync.Mutex
	// token is the lease's expiry (its token), renewed after each attempt.
	token float64
	// next is when the task is due again (ms; -1: nothing left to make).
	next int64
	// givenUp: the task has a given-up delivery.
	givenUp bool
	// lost: the lease was lost (this worker stalled): its new holder goes
	// on, nothing is released; err: a Redis error, the task is handed back.
	lost bool
	err  error
}

// due lowers h.next to at (ms).
func (h *held) due(at int64) {
	h.mu.Lock()
	h.next = minNext(h.next, at)
	h.mu.Unlock()
}

// chain is the due deliveries of one task to one webhook, in event order.
type chain struct {
	hook   Hook
	fields []string
	dls    []Delivery
}

// task makes the due deliveries of the claimed task id, whose lease
// expires at token: each webhook's in event order, the webhooks side by
// side, each attempt in a slot of the pool (a webhook with no free slot
// waits for a later pass). started is called once the attempts are under
// way or the task handed back; n counts the attempts.
func (d *Deliverer) task(ctx context.Context, id string, token float64, started func(), n *atomic.Int64) {
	started = sync.OnceFunc(started)
	defer started()
	h := &held{id: id, token: token, next: -1}
	view, chains, err := d.plan(ctx, h)
	if err != nil {
		d.warn(id, d.release(ctx, h.id, h.token, 0, false, err))
		return
	}
	var wg sync.WaitGroup
	for _, c := range chains {
		l, ok := d.acquire(c.hook.Name)
		if !ok {
			h.due(d.o.Now().Add(d.deferral(l)).UnixMilli())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.chain(ctx, h, view, c, l, n)
		}()
	}
	started()
	wg.Wait()
	switch {
	case h.lost:
	case ctx.Err() != nil:
		// Stopping: an attempt's outcome is unknown; hand the task back
		// (due again shortly) rather than hold it for the lease.
		d.warn(id, d.release(ctx, h.id, h.token, 0, h.givenUp, ctx.Err()))
	case h.err != nil:
		d.warn(id, d.release(ctx, h.id, h.token, 0, false, h.err))
	default:
		d.warn(id, d.release(ctx, h.id, h.token, h.next, h.givenUp, nil))
	}
}

// warn logs the failure err of task id's deliveries (not when stopping).
func (d *Deliverer) warn(id string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		d.o.Logger.Warn("webhooks: task's deliveries failed", "task", id, "err", err)
	}
}

// plan reads task h's record and deliveries (after taking its outbox) and
// returns the view the bodies carry and the due deliveries, one chain per
// webhook; h.next and h.givenUp account for the rest.
func (d *Deliverer) plan(ctx context.Context, h *held) (*record.View, []*chain, error) {
	view, err := d.store.Get(ctx, h.id)
	if errors.Is(err, record.ErrNotFound) {
		view = nil // the record expired: deliveries already taken still go, with the ID alone
	} else if err != nil {
		return nil, nil, err
	}
	if err := d.take(ctx, h.id, view); err != nil {
		return nil, nil, err
	}
	raw, err := d.rdb.HGetAll(ctx, rkeys.TaskHooks(h.id)).Result()
	if err != nil {
		return nil, nil, err
	}
	if view == nil {
		view = &record.View{ID: h.id}
	}
	// blocked are the webhooks with an earlier delivery of this task still
	// waiting: a webhook gets a task's events in order, so their later
	// deliveries wait behind it.
	blocked := map[string]bool{}
	by := map[string]*chain{}
	var chains []*chain
	now := d.o.Now()
	for _, f := range sortedFields(raw) {
		var dl Delivery
		_, name, ok := splitField(f)
		if !ok || json.Unmarshal([]byte(raw[f]), &dl) != nil {
			_ = d.rdb.HDel(ctx, rkeys.TaskHooks(h.id), f).Err()
			continue
		}
		hook, known := d.o.Hooks[name]
		switch {
		case dl.GivenUp != 0:
			h.givenUp = true
		case blocked[name]:
		case dl.Next > now.UnixMilli():
			h.next, blocked[name] = minNext(h.next, dl.Next), true
		case !known:
			// Not configured here (a config being rolled out): another
			// worker may have it; look again later.
			h.next = minNext(h.next, now.Add(d.o.MaxBackoff).UnixMilli())
		case !hook.wants(eventName(dl.Event)):
			// Taken by a worker that did not know the webhook's events.
			_ = d.rdb.HDel(ctx, rkeys.TaskHooks(h.id), f).Err()
		default:
			c := by[name]
			if c == nil {
				c = &chain{hook: hook}
				by[name] = c
				chains = append(chains, c)
			}
			c.fields, c.dls = append(c.fields, f), append(c.dls, dl)
		}
	}
	return view, chains, nil
}

// chain makes c's deliveries of task h in order, in the slot l holds,
// until one fails (the later ones wait behind it), the lease is lost or
// ctx ends.
func (d *Deliverer) chain(ctx context.Context, h *held, view *record.View, c *chain, l *lane, n *atomic.Int64) {
	defer d.free(l)
	for i, f := range c.fields {
		dl := c.dls[i]
		seq, name, _ := splitField(f)
		n.Add(1)
		begun := time.Now()
		derr := d.send(ctx, c.hook, MessageID(h.id, seq, name), view, dl.Event)
		l.took(time.Since(begun))
		if ctx.Err() != nil {
			return
		}
		if err := d.record(ctx, h.id, f, c.hook, &dl, derr); err != nil {
			h.mu.Lock()
			h.err = err
			h.mu.Unlock()
			return
		}
		if !d.renew(ctx, h) {
			return
		}
		if derr != nil {
			if dl.GivenUp != 0 {
				h.mu.Lock()
				h.givenUp = true
				h.mu.Unlock()
				continue
			}
			h.due(dl.Next)
			return
		}
	}
}

// renew extends task h's lease after an attempt; false when the lease was
// lost (or an earlier chain found it lost or failed).
func (d *Deliverer) renew(ctx context.Context, h *held) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost || h.err != nil {
		return false
	}
	newToken := float64(d.o.Now().UnixMilli() + d.lease.Milliseconds())
	ok, err := renewScript.Run(ctx, d.rdb, []string{rkeys.WebhooksLeased()}, h.id, h.token, newToken).Int()
	switch {
	case err == nil && ok == 1:
		h.token = newToken
	case err == nil:
		h.lost = true
		return false
	}
	return true
}

// eventName is the name of the recorded event raw.
func eventName(raw json.RawMessage) string {
	var ev struct {
		Event string `json:"event"`
	}
	_ = json.Unmarshal(raw, &ev)
	return ev.Event
}

// sortedFields are the fields of a deliveries hash in event order (then
// by webhook).
func sortedFields(raw map[string]string) []string {
	fields := make([]string, 0, len(raw))
	for f := range raw {
		fields = append(fields, f)
	}
	sort.Slice(fields, func(i, j int) bool {
		si, ni, _ := splitField(fields[i])
		sj, nj, _ := splitField(fields[j])
		return si < sj || si == sj && ni < nj
	})
	return fields
}

func minNext(a, b int64) int64 {
	if a < 0 || b < a {
		return b
	}
	return a
}

// take moves task id's outbox entries into its deliveries: one per
// webhook the task names (view.Notify) whose events include the entry's.
func (d *Deliverer) take(ctx context.Context, id string, view *record.View) error {
	entries, err := d.rdb.LRange(ctx, rkeys.TaskOutbox(id), 0, -1).Result()
	if err != nil || len(entries) == 0 {
		return err
	}
	now := d.o.Now().UnixMilli()
	args := []any{len(entries), entries[0], int64(HooksLifetime / time.Second)}
	var notify []string
	if view != nil {
		notify = view.Notify
	}
	for _, e := range entries {
		evs := record.ParseEvents([]string{e})
		if len(evs) == 0 {
			continue
		}
		for _, name := range notify {
			h, ok := d.o.Hooks[name]
			if ok && !h.wants(evs[0].Event) {
				continue
			}
			b, _ := json.Marshal(Delivery{Event: json.RawMessage(e), First: now, Next: now})
			args = append(args, field(evs[0].Seq, name), string(b))
		}
	}
	return takeScript.Run(ctx, d.rdb, []string{rkeys.TaskOutbox(id), rkeys.TaskHooks(id)}, args...).Err()
}

// release ends the lease on task id (token), due again at next (ms; -1:
// no delivery left to make), and returns cause.
func (d *Deliverer) release(ctx context.Context, id string, token float64, next int64, givenUp bool, cause error) error {
	gu := "0"
	if givenUp {
		gu = "1"
	}
	if cause != nil {
		next = d.o.Now().Add(d.o.InitialBackoff).UnixMilli()
	}
	err := releaseScript.Run(context.WithoutCancel(ctx), d.rdb,
		[]string{rkeys.WebhooksDue(), rkeys.WebhooksLeased(), rkeys.WebhooksGivenUp()},
		id, token, next, gu, d.o.Now().UnixMilli()).Err()
	if cause != nil {
		return cause
	}
	return err
}

// record writes the outcome of one attempt of the delivery dl (field f of
// task id's deliveries) to hook: gone when delivered, else rescheduled or
// given up.
func (d *Deliverer) record(ctx context.Context, id, f string, hook Hook, dl *Delivery, derr error) error {
	now := d.o.Now()
	if derr == nil {
		d.o.Observe(hook.Name, "delivered")
		_, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.HDel(ctx, rkeys.TaskHooks(id), f)
			p.HSet(ctx, rkeys.WebhooksStatus(), hook.Name+":ok", now.UnixMilli())
			return nil
		})
		return err
	}
	dl.Attempts++
	dl.LastError = truncate(derr.Error(), maxErrorText)
	outcome := "failed"
	if now.Sub(time.UnixMilli(dl.First)) >= hook.MaxAge {
		dl.GivenUp, outcome = now.UnixMilli(), "given_up"
		d.o.Logger.Warn("webhooks: delivery given up after max_age", "webhook", hook.Name, "task", id,
			"attempts", dl.Attempts, "err", dl.LastError)
	} else {
		dl.Next = min(now.Add(d.backoff(dl.Attempts)).UnixMilli(), dl.First+hook.MaxAge.Milliseconds())
		d.o.Logger.Info("webhooks: delivery failed, will retry", "webhook", hook.Name, "task", id,
			"attempts", dl.Attempts, "next", time.UnixMilli(dl.Next), "err", dl.LastError)
	}
	d.o.Observe(hook.Name, outcome)
	b, _ := json.Marshal(dl)
	st, _ := json.Marshal(lastError{At: now.UnixMilli(), Error: dl.LastError})
	_, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, rkeys.TaskHooks(id), f, string(b))
		p.Expire(ctx, rkeys.TaskHooks(id), HooksLifetime)
		p.HSet(ctx, rkeys.WebhooksStatus(), hook.Name+":error", string(st))
		return nil
	})
	return err
}

// lastError is a webhook's last failure in the status hash.
type lastError struct {
	At    int64  `json:"at"`
	Error string `json:"error"`
}

// backoff is the wait after the n-th failure.
func (d *Deliverer) backoff(n int) time.Duration {
	b := float64(d.o.InitialBackoff) * math.Pow(2, float64(n-1))
	b = min(b, float64(d.o.MaxBackoff))
	b *= 1 + d.o.Jitter*(2*rand.Float64()-1)
	return time.Duration(b)
}

// send POSTs one delivery; nil when the webhook answered 2xx.
func (d *Deliverer) send(ctx context.Context, hook Hook, msgID string, view *record.View, event json.RawMessage) error {
	var ev record.Event
	_ = json.Unmarshal(event, &ev)
	body, err := json.Marshal(Body{Type: Type(ev.Event), Timestamp: ev.At, Data: BodyData{Event: event, Task: view}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, hook.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return redact.Error(err)
	}
	ts := d.o.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentq-webhook")
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(hook.Key, msgID, ts, body))
	resp, err := d.client.Do(req)
	if err != nil {
		return redact.Error(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered HTTP %d", redact.URL(hook.URL), resp.StatusCode)
	}
	return nil
}

// MaxRedirects is the most redirects a delivery follows.
const MaxRedirects = 5

// ErrRedirect is wrapped by the error of a delivery redirected to another
// scheme or host (the rule of HTTP agents with configured headers: its
// signature headers must not go to another host), by a redirect that is
// not 307 or 308 (301, 302 and 303 turn the signed POST into a GET
// without its body, whose 2xx would count as delivered), or past
// MaxRedirects.
var ErrRedirect = errors.New("redirect refused")

// checkRedirect is the CheckRedirect of the deliveries' client: only a 307
// or 308 (the POST is sent again, body and all) to the first request's
// scheme and host (port included) is followed.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	code := 0
	if req.Response != nil {
		code = req.Response.StatusCode
	}
	switch {
	case len(via) > MaxRedirects:
		return fmt.Errorf("%w: stopped after %d redirects", ErrRedirect, MaxRedirects)
	case code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect || req.Method != via[0].Method:
		return fmt.Errorf("%w: HTTP %d to %s would resend the delivery as a %s without its body; "+
			"configure the URL it redirects to (only 307 and 308 are followed)",
			ErrRedirect, code, redact.URL(req.URL.String()), req.Method)
	case !strings.EqualFold(req.URL.Scheme, first.Scheme) || hostPort(req.URL) != hostPort(first):
		return fmt.Errorf("%w: to %s: a delivery is signed for %s only", ErrRedirect, redact.URL(req.URL.String()), redact.Host(first.String()))
	}
	return nil
}

// hostPort is u's lower-cased host with its port, the scheme's default when
// it has none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
