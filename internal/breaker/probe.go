package breaker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/rkeys"
)

// Health-probe results, shared in Redis per breaker key (rkeys.Probe) so
// that every worker's /api/v1/agents shows the same view.

// ProbeWindow is the number of recent probes ProbeStatus.SuccessRate covers.
const ProbeWindow = 100

// maxProbeError caps the error text kept for a probe.
const maxProbeError = 500

// ProbeResult is the outcome of one health probe.
type ProbeResult struct {
	// OK says whether the backend was healthy.
	OK bool
	// Latency is how long the probe took.
	Latency time.Duration
	// Error is why it failed ("" when OK).
	Error string
}

// ProbeStatus is the stored view of a breaker key's probes (the "probe"
// object of /api/v1/agents; fields may be added, never renamed).
type ProbeStatus struct {
	// LastAt is when the last probe ended (Redis time); nil before the
	// first probe.
	LastAt *time.Time `json:"last_at"`
	// LastOK is the last probe's outcome.
	LastOK bool `json:"last_ok"`
	// LatencyMS is the last probe's duration in milliseconds.
	LatencyMS int64 `json:"latency_ms"`
	// SuccessRate is the share of healthy probes among the last Probes
	// (at most ProbeWindow); 0 when there are none.
	SuccessRate float64 `json:"success_rate"`
	// Probes is how many probes SuccessRate covers.
	Probes int `json:"probes"`
	// Error is the last probe's error ("" when it was healthy).
	Error string `json:"error"`
}

// recordProbeScript stores one probe result.
//
// KEYS[1] probe hash. ARGV[1] now ms or "" (Redis TIME), ARGV[2] "1"
// healthy | "0" not, ARGV[3] latency ms, ARGV[4] error text, ARGV[5] window.
// The field "recent" keeps the last ARGV[5] outcomes as a string of 1s and
// 0s. Returns the time stored as last_at (ms).
var recordProbeScript = redis.NewScript(luaPrelude + `
local now = now_ms(ARGV[1])
local recent = (redis.call('HGET', KEYS[1], 'recent') or '') .. ARGV[2]
local w = tonumber(ARGV[5])
if #recent > w then recent = string.sub(recent, #recent - w + 1) end
redis.call('HSET', KEYS[1], 'last_at', now, 'last_ok', ARGV[2], 'latency_ms', ARGV[3], 'error', ARGV[4], 'recent', recent)
return now
`)

// RecordProbe stores the result of one probe of key (one EVALSHA). It does
// not touch the breaker: a probe that is the half-open trial reports to
// Record as well.
func (b *Breakers) RecordProbe(ctx context.Context, key string, r ProbeResult) error {
	ok := "0"
	if r.OK {
		ok = "1"
	}
	errText := r.Error
	if len(errText) > maxProbeError {
		errText = errText[:maxProbeError] + "…"
	}
	ctx, cancel := b.bound(context.WithoutCancel(ctx))
	defer cancel()
	err := recordProbeScript.Run(ctx, b.rdb, []string{rkeys.Probe(key)},
		b.nowArg(), ok, r.Latency.Milliseconds(), errText, ProbeWindow).Err()
	if err != nil {
		return b.wrap(key, "record probe", err)
	}
	return nil
}

// ProbeStatus returns the stored probe results of key; ok is false when no
// probe was ever recorded.
func (b *Breakers) ProbeStatus(ctx context.Context, key string) (st ProbeStatus, ok bool, err error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	h, err := b.rdb.HGetAll(ctx, rkeys.Probe(key)).Result()
	if err != nil {
		return ProbeStatus{}, false, b.wrap(key, "probe status", err)
	}
	if len(h) == 0 {
		return ProbeStatus{}, false, nil
	}
	if ms, _ := strconv.ParseInt(h["last_at"], 10, 64); ms > 0 {
		t := time.UnixMilli(ms)
		st.LastAt = &t
	}
	st.LastOK = h["last_ok"] == "1"
	st.LatencyMS, _ = strconv.ParseInt(h["latency_ms"], 10, 64)
	st.Error = h["error"]
	recent := h["recent"]
	st.Probes = len(recent)
	if st.Probes > 0 {
		st.SuccessRate = float64(strings.Count(recent, "1")) / float64(st.Probes)
	}
	return st, true, nil
}

// ClaimProbe claims the next interval probe of key for interval (SET NX PX
// on rkeys.ProbeClaim, expiring on the Redis server's clock) and reports
// whether this caller won: the workers of a cluster probe a closed breaker
// once per interval between them, not once each.
func (b *Breakers) ClaimProbe(ctx context.Context, key string, interval time.Duration) (bool, error) {
	if interval <= 0 {
		return false, fmt.Errorf("breaker %q: probe interval must be positive, got %s", key, interval)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	won, err := b.rdb.SetNX(ctx, rkeys.ProbeClaim(key), 1, interval).Result()
	if err != nil {
		return false, b.wrap(key, "claim probe", err)
	}
	return won, nil
}
