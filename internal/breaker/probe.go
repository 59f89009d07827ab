package breaker

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/fleet"
	"github.com/agentq/agentq/internal/redisx"
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

// The fields of a probe hash (rkeys.Probe).
const (
	probeLastAt    = "last_at"
	probeLastOK    = "last_ok"
	probeLatencyMS = "latency_ms"
	probeError     = "error"
	probeRecent    = "recent"
)

//go:embed lua/record_probe.lua
var probeLua embed.FS

// recordProbeScript stores one probe result (lua/record_probe.lua).
var recordProbeScript = redisx.NewScripts("breaker", probeLua, map[string]map[string]string{
	"F": redisx.Quoted(probeLastAt, probeLastOK, probeLatencyMS, probeError, probeRecent),
}).Script(redisx.NowMS, "lua/record_probe.lua")

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
	if ms, _ := strconv.ParseInt(h[probeLastAt], 10, 64); ms > 0 {
		t := time.UnixMilli(ms)
		st.LastAt = &t
	}
	st.LastOK = h[probeLastOK] == "1"
	st.LatencyMS, _ = strconv.ParseInt(h[probeLatencyMS], 10, 64)
	st.Error = h[probeError]
	recent := h[probeRecent]
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
	won, err := fleet.Claim(ctx, b.rdb, rkeys.ProbeClaim(key), "1", interval)
	if err != nil {
		return false, b.wrap(key, "claim probe", err)
	}
	return won, nil
}
