package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// received is one request a test receiver got.
type received struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// receiver is a loopback webhook endpoint answering with status(n) for its
// n-th request (0-based).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	status func(n int) int
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	r := &receiver{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, received{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
			Signature: req.Header.Get("webhook-signature"), Body: b})
		r.mu.Unlock()
		w.WriteHeader(r.status(n))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// newSecret is a fresh whsec_ secret and its key.
func newSecret(t *testing.T) (string, []byte) {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), key
}

// verify checks a request the way a Standard Webhooks receiver does
// (standardwebhooks.com), written here independently of Sign: the secret
// after whsec_ is base64-decoded, the signed content is
// "${id}.${timestamp}.${body}", the signature is base64 HMAC-SHA256 after
// "v1,", and the timestamp is within 5 minutes.
func verify(t *testing.T, secret string, r received) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(r.ID + "." + r.Timestamp + "." + string(r.Body)))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	var ok bool
	for _, sig := range strings.Fields(r.Signature) {
		v, s, _ := strings.Cut(sig, ",")
		ok = ok || v == "v1" && hmac.Equal([]byte(s), []byte(want))
	}
	require.True(t, ok, "signature %q does not verify", r.Signature)
	ts, err := strconv.ParseInt(r.Timestamp, 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), ts, 300)
	require.True(t, strings.HasPrefix(r.ID, "msg_"))
}

type setupT struct {
	rdb   redis.UniversalClient
	store *record.Store
	ctx   context.Context
}

func setup(t *testing.T) setupT {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	return setupT{rdb: rdb, store: record.NewStore(rdb), ctx: context.Background()}
}

// finish records task id, which notifies notify, as ended by c.
func (s setupT) finish(t *testing.T, id string, notify []string, c record.Change) {
	t.Helper()
	sd := record.Seed{Agent: "llm", Action: "chat", Queue: "default", EnqueuedAt: time.Now(), Notify: notify}
	_, err := s.store.Create(s.ctx, record.New{ID: id, Seed: sd, State: record.StatePending})
	require.NoError(t, err)
	out, err := s.store.Apply(s.ctx, record.Delivery{ID: id, Attempt: 1, Seed: sd}, c)
	require.NoError(t, err)
	require.Equal(t, record.Applied, out)
}

func hook(name, url string, key []byte, events ...string) Hook {
	if len(events) == 0 {
		events = DefaultEvents
	}
	return Hook{Name: name, URL: url, Key: key, Events: events, Timeout: 5 * time.Second, MaxAge: time.Hour}
}

// until calls d.Tick until cond holds (10 s at most).
func until(t *testing.T, d *Deliverer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition not met in time")
		_, err := d.Tick(context.Background())
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeliverySignedByStandardWebhooks: a task that ended is told to its
// webhook once, signed as Standard Webhooks says (verified by an
// independent implementation), the body naming the event type and
// carrying the task JSON; an event the webhook does not take is not sent.
func TestDeliverySignedByStandardWebhooks(t *testing.T) {
	s := setup(t)
	rcv := newReceiver(t, func(int) int { return http.StatusNoContent })
	secret, key := newSecret(t)
	d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{"done": hook("done", rcv.srv.URL+"/hook?token=x", key)}})
	s.finish(t, "t1", []string{"done"}, record.Retrying(record.Attempt{Attempt: 1, ErrorClass: "timeout"}, time.Millisecond, time.Now()))
	_, err := d.Tick(s.ctx)
	require.NoError(t, err)
	require.Empty(t, rcv.requests(), "retrying is not among the webhook's events")
	out, err := s.store.Apply(s.ctx, record.Delivery{ID: "t1", Attempt: 2}, record.Succeeded(record.Attempt{Attempt: 2, Agent: "llm"}, json.RawMessage(`{"answer":42}`)))
	require.NoError(t, err)
	require.Equal(t, record.Applied, out)
	until(t, d, func() bool { return len(rcv.requests()) == 1 })
	r := rcv.requests()[0]
	verify(t, secret, r)
	var body struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			Event record.Event `json:"event"`
			Task  record.View  `json:"task"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &body))
	require.Equal(t, "task.succeeded", body.Type)
	require.Equal(t, record.EventSucceeded, body.Data.Event.Event)
	require.EqualValues(t, 3, body.Data.Event.Seq)
	require.Equal(t, "t1", body.Data.Task.ID)
	require.Equal(t, record.StateSucceeded, body.Data.Task.State)
	require.JSONEq(t, `{"answer":42}`, string(body.Data.Task.Result))
	require.Equal(t, []string{"done"}, body.Data.Task.Notify)
	// Nothing more to deliver: the task leaves the sets.
	_, err = d.Tick(s.ctx)
	require.NoError(t, err)
	require.Len(t, rcv.requests(), 1, "delivered once")
	for _, k := range []string{rkeys.WebhooksDue(), rkeys.WebhooksLeased()} {
		n, err := s.rdb.ZCard(s.ctx, k).Result()
		require.NoError(t, err)
		require.Zero(t, n, k)
	}
	st, err := Statuses(s.ctx, s.rdb, d.o.Hooks)
	require.NoError(t, err)
	require.Len(t, st, 1)
	require.Zero(t, st[0].Pending)
	require.False(t, st[0].LastOKAt.IsZero())
	require.NotContains(t, st[0].URL, "token", "the URL is shown redacted")
}

// TestDeliveryRetriedUntilTheReceiverRecovers: a delivery answered 500 is
// retried with backoff, keeps its webhook-id, shows as failing meanwhile,
// and is delivered once the receiver recovers.
func TestDeliveryRetriedUntilTheReceiverRecovers(t *testing.T) {
	s := setup(t)
	var down atomic.Bool
	down.Store(true)
	rcv := newReceiver(t, func(int) int {
		if down.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	secret, key := newSecret(t)
	d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{"h": hook("h", rcv.srv.URL, key)},
		InitialBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	s.finish(t, "t2", []string{"h"}, record.DeadLettered(record.Attempt{Attempt: 1, ErrorClass: "logic_error"}, "not_retryable"))
	until(t, d, func() bool { return len(rcv.requests()) >= 2 })
	st, err := Statuses(s.ctx, s.rdb, d.o.Hooks)
	require.NoError(t, err)
	require.Equal(t, 1, st[0].Pending)
	require.Equal(t, 1, st[0].Failing)
	require.Contains(t, st[0].LastError, "HTTP 500")
	require.True(t, st[0].FailingNow())
	require.False(t, st[0].NextTry.IsZero())
	down.Store(false)
	n := len(rcv.requests())
	until(t, d, func() bool { return len(rcv.requests()) > n })
	got := rcv.requests()
	for _, r := range got {
		require.Equal(t, got[0].ID, r.ID, "the same webhook-id on every attempt")
		verify(t, secret, r)
	}
	st, err = Statuses(s.ctx, s.rdb, d.o.Hooks)
	require.NoError(t, err)
	require.Zero(t, st[0].Pending)
	require.False(t, st[0].FailingNow())
	_, err = d.Tick(s.ctx)
	require.NoError(t, err)
	require.Len(t, rcv.requests(), len(got), "not delivered again once delivered")
}

// TestDeliveryGivenUpAfterMaxAgeAndRetried: a delivery still failing at its
// webhook's max_age is given up and kept visible; `retry NAME` makes it
// due again, and it is delivered.
func TestDeliveryGivenUpAfterMaxAgeAndRetried(t *testing.T) {
	s := setup(t)
	var down atomic.Bool
	down.Store(true)
	rcv := newReceiver(t, func(int) int {
		if down.Load() {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	_, key := newSecret(t)
	h := hook("h", rcv.srv.URL, key)
	h.MaxAge = 100 * time.Millisecond
	d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{"h": h}, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	s.finish(t, "t3", []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	var st []Status
	until(t, d, func() bool {
		var err error
		st, err = Statuses(s.ctx, s.rdb, d.o.Hooks)
		require.NoError(t, err)
		return st[0].GivenUp == 1
	})
	require.Zero(t, st[0].Pending)
	n := len(rcv.requests())
	_, err := d.Tick(s.ctx)
	require.NoError(t, err)
	require.Len(t, rcv.requests(), n, "a given-up delivery is not tried again on its own")
	down.Store(false)
	made, err := Retry(s.ctx, s.rdb, "h", time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, made)
	until(t, d, func() bool { return len(rcv.requests()) > n })
	st, err = Statuses(s.ctx, s.rdb, d.o.Hooks)
	require.NoError(t, err)
	require.Zero(t, st[0].GivenUp)
	require.Zero(t, st[0].Pending)
}

// TestDeliveryTakenOverAfterALostLease: a worker that claimed a task and
// died before delivering loses nothing: after the lease, another delivers.
func TestDeliveryTakenOverAfterALostLease(t *testing.T) {
	s := setup(t)
	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	_, key := newSecret(t)
	hooks := map[string]Hook{"h": hook("h", rcv.srv.URL, key)}
	s.finish(t, "t4", []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	// The first worker claims and dies.
	ids, err := claimScript.Run(s.ctx, s.rdb, []string{rkeys.WebhooksDue(), rkeys.WebhooksLeased()}, time.Now().UnixMilli(), 60000, 16).Slice()
	require.NoError(t, err)
	require.Equal(t, "t4", ids[1])
	d := New(s.rdb, s.store, Options{Hooks: hooks})
	_, err = d.Tick(s.ctx)
	require.NoError(t, err)
	require.Empty(t, rcv.requests(), "the lease is held")
	later := New(s.rdb, s.store, Options{Hooks: hooks, Now: func() time.Time { return time.Now().Add(2 * time.Minute) }})
	until(t, later, func() bool { return len(rcv.requests()) == 1 })
}

// TestDeliveryRedirectToAnotherHostRefused: a delivery is not sent on to
// another host by a redirect (its signature would go with it).
func TestDeliveryRedirectToAnotherHostRefused(t *testing.T) {
	s := setup(t)
	other := newReceiver(t, func(int) int { return http.StatusOK })
	redirect := httptest.NewServer(http.RedirectHandler(strings.Replace(other.srv.URL, "127.0.0.1", "localhost", 1), http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	_, key := newSecret(t)
	d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{"h": hook("h", redirect.URL, key)}, InitialBackoff: time.Hour})
	s.finish(t, "t5", []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
	var st []Status
	until(t, d, func() bool {
		var err error
		st, err = Statuses(s.ctx, s.rdb, d.o.Hooks)
		require.NoError(t, err)
		return st[0].Failing == 1
	})
	require.Contains(t, st[0].LastError, "redirect")
	require.Empty(t, other.requests())
}

// TestParseSecret: whsec_ secrets, and errors that do not echo them.
func TestParseSecret(t *testing.T) {
	t.Parallel()
	secret, key := newSecret(t)
	got, err := ParseSecret(secret)
	require.NoError(t, err)
	require.Equal(t, key, got)
	for _, bad := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!notbase64", "whsec_c2hvcnQ="} {
		_, err := ParseSecret(bad)
		require.ErrorIs(t, err, ErrSecret)
		require.NotContains(t, err.Error(), strings.TrimPrefix(bad, "whsec_"))
	}
}

// TestSignStandardWebhooksExample: Sign reproduces the example of the
// Standard Webhooks specification; the clients' verify_webhook /
// verifyWebhook unit tests verify the same vector, so signer and verifiers
// agree byte for byte.
func TestSignStandardWebhooksExample(t *testing.T) {
	t.Parallel()
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
}

// TestDeliveriesInEventOrder: a webhook gets a task's events in order: a
// later event waits while an earlier one to the same webhook is failing,
// and does not hold up another webhook.
func TestDeliveriesInEventOrder(t *testing.T) {
	s := setup(t)
	var down atomic.Bool
	down.Store(true)
	slow := newReceiver(t, func(int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	fast := newReceiver(t, func(int) int { return http.StatusOK })
	_, key := newSecret(t)
	d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{
		"slow": hook("slow", slow.srv.URL, key, "retrying", "succeeded"),
		"fast": hook("fast", fast.srv.URL, key, "retrying", "succeeded"),
	}, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
	s.finish(t, "o", []string{"slow", "fast"}, record.Retrying(record.Attempt{Attempt: 1, ErrorClass: "timeout"}, time.Millisecond, time.Now()))
	_, err := s.store.Apply(s.ctx, record.Delivery{ID: "o", Attempt: 2}, record.Succeeded(record.Attempt{Attempt: 2}, nil))
	require.NoError(t, err)
	until(t, d, func() bool { return len(fast.requests()) == 2 && len(slow.requests()) >= 3 })
	for _, r := range slow.requests() {
		require.Contains(t, string(r.Body), `"type":"task.retrying"`, "nothing after the failing retrying event")
	}
	down.Store(false)
	until(t, d, func() bool {
		got := slow.requests()
		return strings.Contains(string(got[len(got)-1].Body), `"type":"task.succeeded"`)
	})
	types := func(rs []received) []string {
		var out []string
		for _, r := range rs {
			var b Body
			require.NoError(t, json.Unmarshal(r.Body, &b))
			if len(out) == 0 || out[len(out)-1] != b.Type {
				out = append(out, b.Type)
			}
		}
		return out
	}
	require.Equal(t, []string{"task.retrying", "task.succeeded"}, types(fast.requests()))
	require.Equal(t, []string{"task.retrying", "task.succeeded"}, types(slow.requests()))
}

// TestDeliveryRedirectKeepsThePOSTOrFails: a same-host 301, 302 or 303
// (the trailing-slash kind: /hook → /hook/) would turn the signed POST
// into a GET without its body, whose 2xx would count as delivered: it
// fails the attempt, with a last error saying why, and nothing reaches
// the target. A same-host 307 or 308 is followed: the POST arrives there,
// body and signature intact.
func TestDeliveryRedirectKeepsThePOSTOrFails(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			s := setup(t)
			var mu sync.Mutex
			var got []received
			var methods []string
			mux := http.NewServeMux()
			mux.Handle("/hook", http.RedirectHandler("/hook/", code))
			mux.HandleFunc("/hook/", func(w http.ResponseWriter, req *http.Request) {
				b, _ := io.ReadAll(req.Body)
				mu.Lock()
				defer mu.Unlock()
				methods = append(methods, req.Method)
				got = append(got, received{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
					Signature: req.Header.Get("webhook-signature"), Body: b})
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			secret, key := newSecret(t)
			d := New(s.rdb, s.store, Options{Hooks: map[string]Hook{"h": hook("h", srv.URL+"/hook", key)}, InitialBackoff: time.Hour})
			s.finish(t, "rd", []string{"h"}, record.Succeeded(record.Attempt{Attempt: 1}, nil))
			var st []Status
			until(t, d, func() bool {
				var err error
				st, err = Statuses(s.ctx, s.rdb, d.o.Hooks)
				require.NoError(t, err)
				return st[0].Failing == 1 || !st[0].LastOKAt.IsZero()
			})
			mu.Lock()
			defer mu.Unlock()
			if code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect {
				require.Zero(t, st[0].Pending, "delivered")
				require.Equal(t, []string{http.MethodPost}, methods)
				verify(t, secret, got[0])
				require.Contains(t, string(got[0].Body), `"type":"task.succeeded"`)
				return
			}
			require.Empty(t, methods, "nothing reaches the target: a GET there is no delivery")
			require.Equal(t, 1, st[0].Pending, "still to deliver")
			require.True(t, st[0].FailingNow())
			require.Contains(t, st[0].LastError, "redirect refused")
			require.Contains(t, st[0].LastError, "HTTP "+strconv.Itoa(code))
			require.Contains(t, st[0].LastError, "without its body")
		})
	}
}
