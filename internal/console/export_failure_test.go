package console

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/api"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/rkeys"
)

// pageKiller is a go-redis hook that kills the redis-server when the
// export asks for its second page of dead letters: a Redis lost mid-stream,
// after the first lines have gone out.
type pageKiller struct {
	armed atomic.Bool
	pages atomic.Int32
	once  sync.Once
	kill  func()
}

func (h *pageKiller) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pageKiller) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *pageKiller) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		page := false
		if h.armed.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			for _, a := range cmd.Args() {
				if a == rkeys.DLQScratch() {
					page = true
				}
			}
		}
		if page && h.pages.Load() >= 1 {
			h.once.Do(h.kill)
		}
		err := next(ctx, cmd)
		if page && err == nil {
			h.pages.Add(1)
		}
		return err
	}
}

// exportFixture is a console whose Redis client carries a pageKiller.
func exportFixture(t *testing.T) (*fixture, *redistest.Server, *pageKiller) {
	t.Helper()
	srv := redistest.Start(t)
	hook := &pageKiller{kill: srv.Kill}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, DialTimeout: time.Second, MaxRetries: 1})
	rdb.AddHook(hook)
	t.Cleanup(func() { _ = rdb.Close() })
	cfg := testConfig()
	log := slog.New(slog.DiscardHandler)
	f := &fixture{rdb: rdb, dlq: deadletter.NewStore(rdb)}
	c := New(rdb, cfg, Options{Token: testToken, Sampler: NewSampler(rdb, SamplerOptions{Logger: log}), Client: nil, Logger: log, RedisTimeout: time.Second})
	hs := httptest.NewServer(api.New(rdb, cfg, api.Options{Token: testToken, Logger: log, UI: c.Handler()}).Handler())
	t.Cleanup(hs.Close)
	f.url = hs.URL
	return f, srv, hook
}

func getExport(t *testing.T, u string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u+"/ui/deadletters/export", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// TestExportRedisDownIs503: Redis gone before the export's first read is
// the console's error page with 503, not a 200 with an empty body.
func TestExportRedisDownIs503(t *testing.T) {
	t.Parallel()
	f, srv, _ := exportFixture(t)
	f.seedDeadLetters(t, 3)
	srv.Stop()
	res, body, err := getExport(t, f.url)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, string(body))
	require.Contains(t, string(body), "Redis is unavailable")
	require.NotContains(t, res.Header.Get("Content-Type"), "ndjson")
	require.Empty(t, res.Header.Get("Content-Disposition"))
}

// TestExportRedisLostMidStreamAborts: Redis killed after the first page
// has gone out: the status (200) cannot change any more, so the reply must
// not end cleanly: the client reads the first lines and then an error, not
// an end of file that would pass for a whole export.
func TestExportRedisLostMidStreamAborts(t *testing.T) {
	t.Parallel()
	f, _, hook := exportFixture(t)
	f.seedDeadLetters(t, 1200) // three pages of 500
	hook.armed.Store(true)
	res, body, err := getExport(t, f.url)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, int32(1), hook.pages.Load(), "Redis was killed at the second page")
	require.Error(t, err, "a cut export must not read as a clean end of file (%d bytes read)", len(body))
	require.True(t, errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 1, "the lines written before the failure were flushed")
	require.Less(t, len(lines), 1200)
}

// TestExportEmptyIs200: no dead letters is a 200 with an empty JSON Lines
// body, as before.
func TestExportEmptyIs200(t *testing.T) {
	t.Parallel()
	f, _, _ := exportFixture(t)
	res, body, err := getExport(t, f.url)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "application/x-ndjson", res.Header.Get("Content-Type"))
	require.Empty(t, body)
}
