package worker

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/httpx"
	"github.com/agentq/agentq/internal/redistest"
)

// opsServed is a worker's ops server started as Run starts it (listenOps
// on a loopback listener), on a real redis-server.
type opsServed struct {
	base, port string
	logs       *logBuf
}

func serveOps(t *testing.T, token string) opsServed {
	t.Helper()
	rs := redistest.Start(t)
	logs := &logBuf{}
	cfg, err := config.Parse([]byte("agents: {a: {}}\n"), "test.yaml")
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	w, err := New(cfg, rs.Client(), WithLogger(logs.logger()), WithAPIToken(token), WithListener(ln),
		WithAgent("a", fixedAgent(&calls{}, nil)))
	require.NoError(t, err)
	o, err := w.listenOps()
	require.NoError(t, err)
	o.Start(context.Background())
	t.Cleanup(o.Stop)
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	return opsServed{base: "http://" + ln.Addr().String(), port: port, logs: logs}
}

type opsReply struct {
	status int
	header http.Header
	json   map[string]any
}

// opsGet GETs path from the loopback address local with extra headers
// (Host sets the Host header).
func opsGet(t *testing.T, local, url string, hdr map[string]string) opsReply {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := opsReply{status: resp.StatusCode, header: resp.Header}
	if resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(b, &r.json), string(b))
	}
	return r
}

// TestOpsRefusesRebindingAndForeignOrigins: on a loopback address the ops
// server answers only a loopback Host with its port (a DNS-rebinding page
// sends its own name) and refuses a foreign Origin, on every endpoint,
// /metrics and the token-less /api/v1/agents included.
func TestOpsRefusesRebindingAndForeignOrigins(t *testing.T) {
	t.Parallel()
	o := serveOps(t, "")
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/v1/agents"} {
		for _, host := range []string{"127.0.0.1:" + o.port, "localhost:" + o.port, "[::1]:" + o.port, "localhost"} {
			r := opsGet(t, "127.0.0.1", o.base+path, map[string]string{"Host": host})
			require.Equal(t, http.StatusOK, r.status, "%s Host %s", path, host)
		}
		for _, host := range []string{"evil.example:" + o.port, "evil.example", "127.0.0.1.nip.io:" + o.port, "127.0.0.1:1"} {
			r := opsGet(t, "127.0.0.1", o.base+path, map[string]string{"Host": host})
			require.Equal(t, http.StatusForbidden, r.status, "%s Host %s", path, host)
			require.Equal(t, "forbidden", r.json["code"])
		}
		for _, origin := range []string{"http://evil.example", "null", "http://127.0.0.1:1"} {
			r := opsGet(t, "127.0.0.1", o.base+path, map[string]string{"Origin": origin})
			require.Equal(t, http.StatusForbidden, r.status, "%s Origin %s", path, origin)
			require.Equal(t, "forbidden", r.json["code"])
		}
		r := opsGet(t, "127.0.0.1", o.base+path, map[string]string{"Origin": o.base})
		require.Equal(t, http.StatusOK, r.status, "%s from its own origin", path)
	}
}

// TestOpsBearerGuessingLockedOut: wrong tokens on /api/v1/agents are
// counted per client address: past the limit that address gets 429 with
// Retry-After, the right token included; another address is unaffected;
// the log names the address, never the token.
func TestOpsBearerGuessingLockedOut(t *testing.T) {
	t.Parallel()
	const token = "ops-s3cret-Qx7"
	o := serveOps(t, token)
	for i := range httpx.DefaultMaxFailures {
		r := opsGet(t, "127.0.0.1", o.base+"/api/v1/agents", map[string]string{"Authorization": "Bearer guess-" + strconv.Itoa(i)})
		require.Equal(t, http.StatusUnauthorized, r.status)
	}
	r := opsGet(t, "127.0.0.1", o.base+"/api/v1/agents", map[string]string{"Authorization": "Bearer " + token})
	require.Equal(t, http.StatusTooManyRequests, r.status, "the right token too, while locked out")
	require.Equal(t, httpx.CodeTooManyRequests, r.json["code"])
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	require.Positive(t, secs)
	r = opsGet(t, "127.0.0.1", o.base+"/metrics", nil)
	require.Equal(t, http.StatusOK, r.status, "endpoints without a token stay open")

	r = opsGet(t, "127.0.0.2", o.base+"/api/v1/agents", map[string]string{"Authorization": "Bearer " + token})
	require.Equal(t, http.StatusOK, r.status, "another address is unaffected")

	out := o.logs.String()
	require.Contains(t, out, "authentication failed")
	require.Contains(t, out, "client=127.0.0.1")
	require.Contains(t, out, `route="GET /api/v1/agents"`)
	require.NotContains(t, out, "guess-")
	require.NotContains(t, out, token)
}
