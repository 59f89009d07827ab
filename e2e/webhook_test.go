package e2e

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/internal/redistest"
)

// hookRequest is one request the test's webhook receiver got.
type hookRequest struct {
	id, timestamp, signature string
	body                     []byte
	task                     string
	typ                      string
}

// hookReceiver is a loopback webhook endpoint; answer decides each
// request's status from the task's requests so far (0-based n).
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []hookRequest
	answer func(task string, n int) int
}

func newHookReceiver(t *testing.T, answer func(task string, n int) int) *hookReceiver {
	r := &hookReceiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var body struct {
			Type string `json:"type"`
			Data struct {
				Task struct {
					ID string `json:"id"`
				} `json:"task"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &body)
		h := hookRequest{id: req.Header.Get("webhook-id"), timestamp: req.Header.Get("webhook-timestamp"),
			signature: req.Header.Get("webhook-signature"), body: b, task: body.Data.Task.ID, typ: body.Type}
		r.mu.Lock()
		n := 0
		for _, g := range r.got {
			if g.task == h.task {
				n++
			}
		}
		r.got = append(r.got, h)
		r.mu.Unlock()
		w.WriteHeader(r.answer(h.task, n))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) of(task string) []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookRequest
	for _, g := range r.got {
		if g.task == task {
			out = append(out, g)
		}
	}
	return out
}

// verifyStandardWebhook verifies a request as standardwebhooks.com
// specifies, independently of agentq's code: HMAC-SHA256 under the
// base64-decoded part of the whsec_ secret, over "${id}.${timestamp}.${body}",
// sent as "v1,<base64>" (space-separated signatures), timestamp within 5 min.
func verifyStandardWebhook(t *testing.T, secret string, r hookRequest) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(r.id + "." + r.timestamp + "." + string(r.body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	require.Contains(t, strings.Fields(r.signature), want, "webhook-signature does not verify")
	ts, err := strconv.ParseInt(r.timestamp, 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), ts, 300)
}

// TestWebhooksEndToEnd: real worker processes deliver a task's webhook
// (opted in with `enqueuer --notify`), signed by the Standard Webhooks
// algorithm; a delivery answered 500 is retried and delivered once the
// receiver recovers, with the same webhook-id; a delivery whose worker is
// SIGKILLed while the receiver holds its request is made by a second
// worker after the lease, with the same webhook-id. `inspector webhooks`
// shows the failing endpoint meanwhile, and an unknown --notify is exit 2.
func TestWebhooksEndToEnd(t *testing.T) {
	t.Parallel()
	b := buildBins(t)
	srv := redistest.Start(t)
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	t.Cleanup(func() { close(hold) })
	rcv := newHookReceiver(t, func(task string, n int) int {
		switch {
		case task == "flaky" && n == 0:
			return http.StatusInternalServerError
		case task == "owed" && n == 0:
			held <- struct{}{}
			select { // the worker is killed meanwhile
			case <-hold:
			case <-time.After(60 * time.Second):
			}
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cfg := writeConfig(t, fmt.Sprintf(`
worker:
  concurrency: 4
  shutdown_timeout: 5s
webhooks:
  results:
    url: %q
    secret: ${HOOK_SECRET}
    timeout: 3s
agents:
  tool:
    exec: {command: [%q], env: [PATH]}
`, rcv.srv.URL+"/agentq?token=abc", b.agent))
	env := []string{"HOOK_SECRET=" + secret}

	_, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--notify", "resluts", "--params", `{}`)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, `unknown webhook "resluts"`)

	ops := freeAddr(t)
	w1 := startEnv(t, "worker1", env, b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops)
	waitHTTP(t, "http://"+ops+"/readyz", 20*time.Second)
	out, errOut, code := run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--id", "flaky",
		"--notify", "results", "--params", `{"mode":"echo","n":1}`)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "flaky", strings.TrimSpace(out))

	// Answered 500 first: shown failing, then retried and delivered.
	deadline := time.Now().Add(30 * time.Second)
	for len(rcv.of("flaky")) < 1 {
		require.True(t, time.Now().Before(deadline), "no delivery")
		time.Sleep(20 * time.Millisecond)
	}
	out, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "webhooks", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"name":"results"`)
	require.NotContains(t, out, "token=abc", "the URL is shown redacted")
	for len(rcv.of("flaky")) < 2 {
		require.True(t, time.Now().Before(deadline), "not retried")
		time.Sleep(20 * time.Millisecond)
	}
	got := rcv.of("flaky")
	require.Equal(t, got[0].id, got[1].id, "the same webhook-id on the retry")
	for _, r := range got {
		require.Equal(t, "task.succeeded", r.typ)
		verifyStandardWebhook(t, secret, r)
	}

	// The worker that owes a delivery is killed while the receiver holds it.
	out, errOut, code = run(t, "", b.enqueuer, "--config", cfg, "--redis", srv.URL(), "--agent", "tool", "--id", "owed",
		"--notify", "results", "--params", `{"mode":"echo","n":2}`)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "owed", strings.TrimSpace(out))
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery of owed was not attempted")
	}
	w1.signal(syscall.SIGKILL)
	<-w1.done
	ops2 := freeAddr(t)
	startEnv(t, "worker2", env, b.worker, "--config", cfg, "--redis", srv.URL(), "--http", ops2)
	deadline = time.Now().Add(60 * time.Second)
	for len(rcv.of("owed")) < 2 {
		require.True(t, time.Now().Before(deadline), "the second worker did not deliver what the first owed")
		time.Sleep(50 * time.Millisecond)
	}
	owed := rcv.of("owed")
	require.Equal(t, owed[0].id, owed[1].id, "the same webhook-id after the takeover")
	verifyStandardWebhook(t, secret, owed[1])
	waitHTTP(t, "http://"+ops2+"/readyz", 20*time.Second)
	resp, err := http.Get("http://" + ops2 + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(metrics), `agentq_webhook_deliveries_total{outcome="delivered",webhook="results"} 1`)

	// Everything delivered: nothing pending.
	for {
		out, errOut, code = run(t, "", b.inspector, "--config", cfg, "--redis", srv.URL(), "webhooks", "--json")
		require.Equal(t, 0, code, errOut)
		var st struct {
			Pending   int    `json:"pending"`
			LastError string `json:"last_error"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		if st.Pending == 0 {
			require.Contains(t, st.LastError, "HTTP 500")
			break
		}
		require.True(t, time.Now().Before(deadline), "still pending: %s", out)
		time.Sleep(100 * time.Millisecond)
	}
}
