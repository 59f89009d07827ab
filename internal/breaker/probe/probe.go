// Package probe is the agents' health probes, beside their breakers: a
// Spec (a URL or a command, from an agent's health block) and the Prober,
// a startstop service that runs it for a worker's lifetime.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/procgroup"
	"github.com/agentq/agentq/internal/redact"
	"github.com/agentq/agentq/internal/startstop"
)

// An agent with a health block gets a prober in every worker that runs it.
// Its breaker then never takes real tasks as half-open trials (the pipeline
// admits them with Breakers.AllowTask, CLOSED only): when the cooldown of
// an open breaker ends, the probe is the trial. The prober loop:
//
//   - OPEN: wait until the cooldown ends, then ask Breakers.AllowProbe for
//     the episode's one trial lease (one prober cluster-wide wins it), run
//     the probe and Record it: healthy closes the breaker (and the deferred
//     tasks are woken), unhealthy reopens it for a fresh cooldown.
//   - HALF_OPEN with the lease held elsewhere: look again shortly.
//   - CLOSED: probe every interval, once per interval cluster-wide
//     (Breakers.ClaimProbe). These probes are recorded in the probe
//     statistics and metrics only: they neither open nor close the breaker.
//     Real calls decide when a closed breaker opens, so a health endpoint
//     that fails while the real one works (or a flapping probe) never stops
//     traffic; the probe takes over only once the breaker is open.
//
// Every probe's result is stored in Redis per breaker key
// (Breakers.RecordProbe) and shown by /api/v1/agents ("probe") and
// /metrics (agentq_probe_total, agentq_probe_duration_seconds: the
// worker's, through Metrics).

// Spec is an agent's resolved health probe.
type Spec struct {
	Kind     string // "url" or "command"
	Target   string // for logs (a URL redacted)
	Interval time.Duration
	Timeout  time.Duration
	check    func(ctx context.Context) error
}

// maxProbeBody bounds what a URL probe reads of the answer.
const maxProbeBody = 4 << 10

// NewSpec is the probe of health block h of an agent whose exec block
// (nil: none) gives a command probe its environment and directory.
func NewSpec(h config.HealthProbe, ex *config.Exec) *Spec {
	ps := &Spec{Interval: h.Interval, Timeout: h.Timeout}
	if ps.Interval <= 0 {
		ps.Interval = config.DefaultProbeInterval
	}
	if ps.Timeout <= 0 {
		ps.Timeout = config.DefaultProbeTimeout
	}
	if h.URL != "" {
		ps.Kind, ps.Target = "url", redact.URL(h.URL)
		ps.check = urlCheck(h.URL, h.ExpectStatus)
		return ps
	}
	var env []string
	dir := ""
	if ex != nil {
		env, dir = ex.Env, ex.Dir
	}
	ps.Kind, ps.Target = "command", strings.Join(h.Command, " ")
	ps.check = commandCheck(h.Command, env, dir, os.Getenv)
	return ps
}

var probeClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// urlCheck GETs url: healthy on a 2xx answer, or on exactly expect when it
// is not zero.
func urlCheck(url string, expect int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return redact.Error(err) // its text holds the URL, query and all
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
		ok := resp.StatusCode >= 200 && resp.StatusCode < 300
		if expect != 0 {
			ok = resp.StatusCode == expect
		}
		if !ok {
			return fmt.Errorf("probe GET %s: status %d: %s", redact.URL(url), resp.StatusCode, strings.TrimSpace(clip(string(body), 300)))
		}
		return nil
	}
}

// commandCheck runs argv (no shell) in its own process group: healthy on
// exit status 0. env follows the exec agent's rules: "NAME" passes NAME
// through from the worker when set and non-empty, "NAME=value" sets it,
// nothing else is inherited. When ctx ends the whole group is killed; on
// Linux it is also killed when the worker dies (internal/procgroup).
// The values passed through from the worker are redacted from the error it
// returns, as an exec agent's are (agent.EnvSecrets).
func commandCheck(argv, env []string, dir string, getenv func(string) string) func(ctx context.Context) error {
	argv = append([]string(nil), argv...)
	penv := agent.AllowedEnv(env, getenv)
	secrets := redact.NewSecrets(agent.EnvSecrets(env, getenv)...)
	return func(ctx context.Context) error {
		var group procgroup.Group
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = penv // never nil: nil would inherit the worker's environment
		cmd.Dir = dir
		cmd.Cancel = func() error { return group.Signal(syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		out := agent.NewTailWriter(maxProbeBody)
		cmd.Stdout, cmd.Stderr = out, out
		err := group.Start(cmd) // Start and Wait on this goroutine
		if err == nil {
			err = group.Wait() // and SIGKILLs whatever is left of the group
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("probe command %s: %w", argv[0], ctx.Err())
			}
			return secrets.Error(fmt.Errorf("probe command %s: %w: %s", argv[0], err, secrets.Clipped(strings.TrimSpace(clip(out.String(), 300)))))
		}
		return nil
	}
}

// maxProbePoll bounds how long a prober sleeps before it looks at its
// breaker again (it notices that real calls opened the breaker within it).
const maxProbePoll = time.Second

// Metrics are a Prober's metrics (the worker's).
type Metrics struct {
	// Probed counts one probe of agent: its outcome and duration.
	Probed func(agent string, ok bool, elapsed time.Duration)
	// State is told of the breaker state a trial probe left key in.
	State func(key string, st breaker.State)
}

// Prober runs one agent's health probe for the worker's lifetime.
type Prober struct {
	agent string
	key   string
	cfg   breaker.Config // the agent's, with TrialLease = config.Lease(probe timeout)
	spec  *Spec
	poll  time.Duration
	br    *breaker.Breakers
	m     Metrics
	log   *slog.Logger

	lifecycle startstop.Loop
}

// New is the prober of agent, whose breaker is key with settings cfg in
// br, running spec.
func New(agent, key string, cfg breaker.Config, spec *Spec, br *breaker.Breakers, m Metrics, log *slog.Logger) *Prober {
	cfg.TrialLease = config.Lease(spec.Timeout)
	if m.Probed == nil {
		m.Probed = func(string, bool, time.Duration) {}
	}
	if m.State == nil {
		m.State = func(string, breaker.State) {}
	}
	return &Prober{
		agent: agent, key: key, cfg: cfg, spec: spec,
		poll: min(spec.Interval, maxProbePoll), br: br, m: m,
		log: log.With("agent", agent, "breaker_key", key, "probe", spec.Kind),
	}
}

// Start runs the probe loop until ctx ends or Stop is called. Calling it
// again, or after Stop, does nothing.
func (p *Prober) Start(ctx context.Context) { p.lifecycle.Go(ctx, p.loop) }

// Stop ends the loop and waits for it (a running probe is canceled). It is
// idempotent and safe without Start.
func (p *Prober) Stop() { p.lifecycle.Stop() }

func (p *Prober) loop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(p.step(ctx))
	}
}

// step makes one decision and returns how long to wait before the next.
func (p *Prober) step(ctx context.Context) time.Duration {
	adm, err := p.br.AllowProbe(ctx, p.key, p.cfg)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("probe: breaker unavailable", "err", err)
		}
		return p.poll
	}
	if adm.Allowed {
		// The half-open trial of this episode is ours.
		perr := p.probe(ctx, true)
		out := breaker.OutcomeSuccess
		switch {
		case ctx.Err() != nil:
			out = breaker.OutcomeIgnore
		case perr != nil:
			out = breaker.OutcomeFailure
		}
		st, rerr := p.br.Record(ctx, p.key, p.cfg, adm, out)
		switch {
		case rerr != nil:
			p.log.Warn("probe: breaker record failed", "err", rerr)
		case out == breaker.OutcomeSuccess:
			p.m.State(p.key, st)
			p.log.Info("probe healthy: breaker closed", "state", st)
		case out == breaker.OutcomeFailure:
			p.m.State(p.key, st)
			p.log.Warn("probe failed: breaker reopened", "state", st, "err", perr)
		}
		return 0
	}
	switch adm.State {
	case breaker.StateClosed:
		won, err := p.br.ClaimProbe(ctx, p.key, p.spec.Interval)
		if err == nil && won {
			_ = p.probe(ctx, false)
		}
		return p.poll
	default:
		// OPEN before its cooldown ends, or a trial in flight elsewhere.
		wait := adm.RetryIn
		if wait <= 0 || wait > p.poll {
			wait = p.poll
		}
		return wait
	}
}

// probe runs the check once under its timeout and records the result in
// Redis and the metrics.
func (p *Prober) probe(ctx context.Context, trial bool) error {
	pctx, cancel := context.WithTimeout(ctx, p.spec.Timeout)
	started := time.Now()
	err := p.spec.check(pctx)
	elapsed := time.Since(started)
	if err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("probe timed out after %s: %w", p.spec.Timeout, err)
	}
	cancel()
	if ctx.Err() != nil {
		return ctx.Err() // shutdown: not a result
	}
	res := breaker.ProbeResult{OK: err == nil, Latency: elapsed}
	if err != nil {
		res.Error = err.Error()
	}
	p.m.Probed(p.agent, err == nil, elapsed)
	if rerr := p.br.RecordProbe(ctx, p.key, res); rerr != nil {
		p.log.Debug("probe: could not store result", "err", rerr)
	}
	p.log.Debug("probe", "ok", res.OK, "trial", trial, "latency_ms", elapsed.Milliseconds(), "err", res.Error)
	return err
}

// clip is s cut to n bytes, marked when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
