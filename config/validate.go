package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentq/agentq/resilience"
	"github.com/agentq/agentq/tasks"
)

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("invalid config")

// FieldError is one problem in a configuration, located by file, line and
// dotted field path (agents.git_agent.retry.max_attempts; list elements as
// restart.delays[1]). Its message reads
//
//	config.yaml:12: agents.git_agent.retry.max_attempts: must be at least 1
//
// Line is 0 when unknown (a Config built in Go, or a value taken from the
// environment); File is "" for a Config built in Go and "AGENTQ_REDIS_URL"
// for the value that variable supplied.
type FieldError struct {
	File   string
	Line   int
	Field  string
	Reason string
}

// Error renders "file:line: field: reason", leaving out the parts that are
// not known.
func (e *FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// joinFieldErrors sorts errs by line and field and joins them; one error is
// returned as is.
func joinFieldErrors(errs []*FieldError) error {
	sort.SliceStable(errs, func(i, j int) bool {
		li, lj := errs[i].Line, errs[j].Line
		if (li == 0) != (lj == 0) {
			return lj == 0 // known lines first, the rest in check order
		}
		return li < lj
	})
	if len(errs) == 1 {
		return errs[0]
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// validator collects the problems of a resolved Config.
type validator struct {
	c    *Config
	errs []*FieldError
}

func (v *validator) fail(path, format string, args ...any) {
	e := &FieldError{File: v.c.Path, Line: v.c.lineOf(path), Field: path, Reason: fmt.Sprintf(format, args...)}
	v.errs = append(v.errs, e)
}

// lineOf returns the line that set path or, when the file left it out, the
// line of its closest ancestor that the file has (agents.a.exec for a
// missing agents.a.exec.command); 0 when unknown.
func (c *Config) lineOf(path string) int {
	for path != "" {
		if l, ok := c.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

// Validate checks every value of c and returns nil or an error wrapping
// ErrInvalid made of *FieldError values (joined when there are several).
//
// A value an agent inherits unchanged from Defaults is reported once, under
// defaults.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.redis()
	v.worker()
	v.settings("defaults", c.Defaults.Settings, nil)
	for _, name := range c.AgentNames() {
		v.agent(name, c.Agents[name])
	}
	v.fallbackCycles()
	v.sharedLimits()
	for _, name := range c.AgentNames() {
		v.attemptLength(name)
	}
	v.positive("history.retention", c.History.Retention)
	v.positive("usage.retention", c.Usage.Retention)
	v.atLeast("usage.max_series", c.Usage.MaxSeries, 1)
	v.atLeast("alerts.threshold", c.Alerts.Threshold, 1)
	v.positive("alerts.window", c.Alerts.Window)
	if c.Alerts.WebhookURL != "" {
		v.httpURL("alerts.webhook_url", c.Alerts.WebhookURL)
	}
	v.classifier()
	v.webhooks()
	v.tenants()
	v.schedules()
	v.pricing()
	if len(v.errs) == 0 {
		return nil
	}
	return joinFieldErrors(v.errs)
}

func (v *validator) positive(path string, d time.Duration) {
	if d <= 0 {
		v.fail(path, "must be a positive duration, got %s", d)
	}
}

func (v *validator) atLeast(path string, n, least int) {
	if n < least {
		v.fail(path, "must be at least %d, got %d", least, n)
	}
}

func (v *validator) redis() {
	r := v.c.Redis
	fail := v.fail
	if v.c.redisFromEnv {
		fail = func(path, format string, args ...any) {
			v.errs = append(v.errs, &FieldError{File: EnvRedisURL, Field: path, Reason: fmt.Sprintf(format, args...)})
		}
	}
	set := 0
	for _, on := range []bool{r.URL != "", r.Sentinel != nil, r.Cluster != nil} {
		if on {
			set++
		}
	}
	switch {
	case set == 0:
		fail("redis", "names no Redis: set one of url, sentinel and cluster")
	case set > 1:
		fail("redis", "sets more than one of url, sentinel and cluster: choose one topology")
	}
	if r.URL != "" {
		v.redisURL(fail, r.URL)
	}
	if s := r.Sentinel; s != nil {
		if s.MasterName == "" {
			v.fail("redis.sentinel.master_name", "must name the master the sentinels monitor")
		}
		v.addrs("redis.sentinel.addrs", s.Addrs)
		v.secret("redis.sentinel.password", s.Password)
		v.secret("redis.sentinel.sentinel_password", s.SentinelPassword)
		if s.DB < 0 {
			v.fail("redis.sentinel.db", "must be ≥ 0, got %d", s.DB)
		}
	}
	if c := r.Cluster; c != nil {
		v.addrs("redis.cluster.addrs", c.Addrs)
		v.secret("redis.cluster.password", c.Password)
	}
	if r.WaitReplicas < 0 {
		v.fail("redis.wait_replicas", "must be ≥ 0, got %d", r.WaitReplicas)
	}
	v.positive("redis.wait_timeout", r.WaitTimeout)
}

// redisURL checks redis.url (or AGENTQ_REDIS_URL, through fail).
func (v *validator) redisURL(fail func(path, format string, args ...any), raw string) {
	scheme, _, _ := strings.Cut(raw, "://")
	if scheme == SchemeSentinel || scheme == SchemeCluster {
		if _, _, err := ParseRedisURL(raw); err != nil {
			fail("redis.url", "bad %s URL: %v", scheme, err)
		}
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		fail("redis.url", "not a URL: %v", unwrapURLError(err))
		return
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			fail("redis.url", "%s URL has no host", u.Scheme)
		}
	case "unix":
		if u.Path == "" {
			fail("redis.url", "unix URL has no socket path")
		}
	default:
		fail("redis.url", "scheme %q not supported: use redis://, rediss:// (TLS), unix://, %s:// or %s://",
			u.Scheme, SchemeSentinel, SchemeCluster)
	}
}

func (v *validator) addrs(path string, addrs []string) {
	if len(addrs) == 0 {
		v.fail(path, "must list at least one host:port")
	}
	for i, a := range addrs {
		if err := checkAddr(a); err != nil {
			v.fail(fmt.Sprintf("%s[%d]", path, i), "%v", err)
		}
	}
}

// secret checks the ${VAR} references of a password.
func (v *validator) secret(path, s string) {
	if err := checkPlaceholders(s); err != nil {
		v.fail(path, "%v", err)
	}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (v *validator) worker() {
	w := v.c.Worker
	v.atLeast("worker.concurrency", w.Concurrency, 1)
	v.positive("worker.shutdown_timeout", w.ShutdownTimeout)
	v.positive("worker.poll_interval", w.PollInterval)
	v.positive("worker.forward_interval", w.ForwardInterval)
	if w.HTTPAddr != "" {
		if _, port, err := net.SplitHostPort(w.HTTPAddr); err != nil {
			v.fail("worker.http_addr", "must be host:port (e.g. 127.0.0.1:9090): %v", err)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			v.fail("worker.http_addr", "port %q is not a number in 0..65535", port)
		}
	}
	if len(w.Queues) == 0 {
		v.fail("worker.queues", "must name at least one queue")
	}
	names := make([]string, 0, len(w.Queues))
	for q := range w.Queues {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		path := join("worker.queues", q)
		if err := checkName(q); err != nil {
			v.fail(path, "invalid queue name: %v", err)
		}
		v.atLeast(path, w.Queues[q], 1)
	}
}

// checkName validates an agent, queue or breaker name: non-empty, without
// whitespace, control characters or braces (which would break Redis hash
// tags).
func checkName(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '{' || r == '}' {
			return fmt.Errorf("%q contains whitespace, a control character or a brace", s)
		}
	}
	return nil
}

// settings validates s at prefix. When base is non-nil (an agent), values
// equal to base's are skipped: they are reported under defaults.
func (v *validator) settings(prefix string, s Settings, base *Settings) {
	sc := settingsCheck{validator: v, prefix: prefix, s: s, base: base}
	if sc.changed(func(s Settings) any { return s.Timeout }) {
		v.positive(sc.path("timeout"), s.Timeout)
	}
	sc.retry()
	sc.breaker()
	sc.restart()
	sc.classes()
}

// settingsCheck validates one settings block: the defaults (base nil) or an
// agent's (base the defaults).
type settingsCheck struct {
	*validator
	prefix string
	s      Settings
	base   *Settings
}

// changed reports whether the value get picks differs from base's.
func (sc settingsCheck) changed(get func(Settings) any) bool {
	return sc.base == nil || !reflect.DeepEqual(get(sc.s), get(*sc.base))
}

func (sc settingsCheck) path(field string) string { return sc.prefix + "." + field }

func (sc settingsCheck) retry() {
	r, p := sc.s.Retry, sc.path
	if sc.changed(func(s Settings) any { return s.Retry.MaxAttempts }) {
		sc.atLeast(p("retry.max_attempts"), r.MaxAttempts, 1)
	}
	initChanged := sc.changed(func(s Settings) any { return s.Retry.InitialBackoff })
	maxChanged := sc.changed(func(s Settings) any { return s.Retry.MaxBackoff })
	if initChanged {
		sc.positive(p("retry.initial_backoff"), r.InitialBackoff)
	}
	if maxChanged {
		sc.positive(p("retry.max_backoff"), r.MaxBackoff)
	}
	if (initChanged || maxChanged) && r.InitialBackoff > 0 && r.MaxBackoff > 0 && r.MaxBackoff < r.InitialBackoff {
		field := p("retry.max_backoff")
		if !maxChanged {
			field = p("retry.initial_backoff")
		}
		sc.fail(field, "max_backoff (%s) must not be less than initial_backoff (%s)", r.MaxBackoff, r.InitialBackoff)
	}
	if sc.changed(func(s Settings) any { return s.Retry.Jitter }) {
		if math.IsNaN(r.Jitter) || r.Jitter < 0 || r.Jitter > 1 {
			sc.fail(p("retry.jitter"), "must be between 0 and 1, got %v", r.Jitter)
		}
	}
	if sc.changed(func(s Settings) any { return s.Retry.MaxRetryAfter }) {
		sc.positive(p("retry.max_retry_after"), r.MaxRetryAfter)
	}
}

func (sc settingsCheck) breaker() {
	b, p := sc.s.CircuitBreaker, sc.path
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.Mode }) {
		if b.Mode != "" && b.Mode != BreakerModeRate && b.Mode != BreakerModeConsecutive {
			sc.fail(p("circuit_breaker.mode"), "must be %q or %q, got %q", BreakerModeRate, BreakerModeConsecutive, b.Mode)
		}
	}
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.FailureThreshold }) && b.FailureThreshold != 0 {
		sc.atLeast(p("circuit_breaker.failure_threshold"), b.FailureThreshold, 1)
	}
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.Window }) {
		sc.positive(p("circuit_breaker.window"), b.Window)
	}
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.FailureRate }) {
		if math.IsNaN(b.FailureRate) || b.FailureRate <= 0 || b.FailureRate > 1 {
			sc.fail(p("circuit_breaker.failure_rate"), "must be in (0, 1], got %v", b.FailureRate)
		}
	}
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.MinCalls }) {
		sc.atLeast(p("circuit_breaker.min_calls"), b.MinCalls, 1)
	}
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.MinFailingTasks }) {
		sc.atLeast(p("circuit_breaker.min_failing_tasks"), b.MinFailingTasks, 1)
	}
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.Cooldown }) {
		sc.positive(p("circuit_breaker.cooldown"), b.Cooldown)
	}
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.MaxCooldown }) {
		sc.positive(p("circuit_breaker.max_cooldown"), b.MaxCooldown)
	}
	// A max_cooldown below cooldown is raised to it (breaker.Config):
	// a file that sets only a long cooldown keeps working.
	if sc.changed(func(s Settings) any { return s.CircuitBreaker.HalfOpenMaxCalls }) {
		sc.atLeast(p("circuit_breaker.half_open_max_calls"), b.HalfOpenMaxCalls, 1)
	}
}

func (sc settingsCheck) restart() {
	rs, p := sc.s.Restart, sc.path
	mrChanged := sc.changed(func(s Settings) any { return s.Restart.MaxRestarts })
	delaysChanged := sc.changed(func(s Settings) any { return s.Restart.Delays })
	if mrChanged {
		sc.atLeast(p("restart.max_restarts"), rs.MaxRestarts, 0)
	}
	if delaysChanged {
		for i, d := range rs.Delays {
			sc.positive(fmt.Sprintf("%s[%d]", p("restart.delays"), i), d)
		}
	}
	if (mrChanged || delaysChanged) && rs.MaxRestarts > 0 && len(rs.Delays) == 0 {
		field := p("restart.delays")
		if _, ok := sc.c.lines[field]; !ok && mrChanged {
			field = p("restart.max_restarts")
		}
		sc.fail(field, "must list at least one delay when max_restarts is %d", rs.MaxRestarts)
	}
	if sc.changed(func(s Settings) any { return s.Restart.MaxPending }) {
		sc.atLeast(p("restart.max_pending"), rs.MaxPending, 1)
	}
}

func (sc settingsCheck) classes() {
	classes := make([]string, 0, len(sc.s.Classes))
	for c := range sc.s.Classes {
		classes = append(classes, string(c))
	}
	sort.Strings(classes)
	for _, name := range classes {
		rule := sc.s.Classes[resilience.Class(name)]
		if sc.base != nil && reflect.DeepEqual(rule, sc.base.Classes[resilience.Class(name)]) {
			continue
		}
		path := sc.path("classes." + name)
		class, err := resilience.ParseClass(name)
		if err != nil {
			known := make([]string, 0, len(resilience.Classes()))
			for _, k := range resilience.Classes() {
				known = append(known, string(k))
			}
			if s := suggest(name, known); strings.HasPrefix(s, " (did") {
				sc.fail(path, "unknown error class%s", s)
			} else {
				sc.fail(path, "unknown error class (want one of %s)", strings.Join(known, ", "))
			}
			continue
		}
		if class == resilience.Canceled {
			sc.fail(path, "canceled is never a failure and cannot be configured")
			continue
		}
		if rule.Exhausted != nil && *rule.Exhausted != ExhaustedRestart && *rule.Exhausted != ExhaustedDeadLetter {
			sc.fail(path+".exhausted", "must be %s or %s, got %q", ExhaustedRestart, ExhaustedDeadLetter, *rule.Exhausted)
		}
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (v *validator) agent(name string, a Agent) {
	prefix := join("agents", name)
	if err := checkName(name); err != nil {
		v.fail(prefix, "invalid agent name: %v", err)
	}
	if a.BreakerKey != "" {
		if err := checkName(a.BreakerKey); err != nil {
			v.fail(prefix+".breaker_key", "invalid breaker key: %v", err)
		}
	}
	if a.Queue != "" {
		if err := checkName(a.Queue); err != nil {
			v.fail(prefix+".queue", "invalid queue name: %v", err)
		} else if len(v.c.Worker.Queues) > 0 && v.c.Worker.Queues[a.Queue] == 0 {
			v.fail(prefix+".queue", "is %q, which worker.queues does not list (served queues: %s); its tasks would never run",
				a.Queue, strings.Join(v.c.ServedQueues(), ", "))
		}
	}
	if a.Exec != nil && a.HTTP != nil {
		v.fail(prefix, "has both exec and http: choose one")
	}
	if a.Exec != nil {
		v.exec(prefix+".exec", a.Exec)
	}
	if a.HTTP != nil {
		v.http(prefix+".http", a.HTTP)
	}
	v.fallback(prefix, name, a.Fallback)
	if a.Health != nil {
		v.health(prefix+".health", a.Health)
	}
	if a.Limits != nil {
		v.limits(prefix+".limits", a.Limits)
	}
	v.agentBudget(prefix+".budget", name, a.Budget, a.Fallback)
	base := v.c.Defaults.Settings
	v.settings(prefix, a.Settings, &base)
}

func (v *validator) exec(path string, e *Exec) {
	switch {
	case len(e.Command) == 0:
		v.fail(path+".command", "must name the program to run")
	case e.Command[0] == "":
		v.fail(path+".command[0]", "program must not be empty")
	}
	for i, kv := range e.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !envNameRE.MatchString(k) {
			v.fail(fmt.Sprintf("%s.env[%d]", path, i), "want NAME or NAME=value, got %q", kv)
		}
	}
	if e.MaxOutputBytes < 0 {
		v.fail(path+".max_output_bytes", "must not be negative, got %d", e.MaxOutputBytes)
	}
}

func (v *validator) http(path string, h *HTTP) {
	v.httpURL(path+".url", h.URL)
	if h.Body != "" && h.Body != BodyRequest && h.Body != BodyParams {
		v.fail(path+".body", "must be %s or %s, got %q", BodyRequest, BodyParams, h.Body)
	}
	if h.MaxResponseBytes < 0 {
		v.fail(path+".max_response_bytes", "must not be negative, got %d", h.MaxResponseBytes)
	}
	hdrs := make([]string, 0, len(h.Headers))
	for k := range h.Headers {
		hdrs = append(hdrs, k)
	}
	sort.Strings(hdrs)
	for _, k := range hdrs {
		hp := path + ".headers." + k
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ':' }) {
			v.fail(hp, "invalid header name")
			continue
		}
		if err := checkPlaceholders(h.Headers[k]); err != nil {
			v.fail(hp, "%v", err)
		}
	}
}

// fallback checks the fallback list of the agent name at prefix; cycles are
// fallbackCycles' business.
func (v *validator) fallback(prefix, name string, list []string) {
	seen := map[string]bool{}
	for i, f := range list {
		path := fmt.Sprintf("%s.fallback[%d]", prefix, i)
		_, known := v.c.Agents[f]
		switch {
		case f == name:
			v.fail(path, "an agent cannot be its own fallback")
		case !known:
			v.fail(path, "unknown agent %q: a fallback must be a configured agent%s", f, suggest(f, v.c.AgentNames()))
		case seen[f]:
			v.fail(path, "%q is listed more than once", f)
		}
		seen[f] = true
	}
}

func (v *validator) health(path string, h *HealthProbe) {
	switch {
	case h.URL != "" && len(h.Command) > 0:
		v.fail(path, "has both url and command: choose one")
	case h.URL == "" && len(h.Command) == 0:
		v.fail(path, "must set url or command")
	case h.URL != "":
		v.httpURL(path+".url", h.URL)
	case h.Command[0] == "":
		v.fail(path+".command[0]", "program must not be empty")
	}
	if h.ExpectStatus != 0 && h.URL == "" {
		v.fail(path+".expect_status", "applies to url probes only")
	} else if h.ExpectStatus != 0 && (h.ExpectStatus < 100 || h.ExpectStatus > 599) {
		v.fail(path+".expect_status", "must be an HTTP status in 100..599, got %d", h.ExpectStatus)
	}
	v.positive(path+".interval", h.Interval)
	v.positive(path+".timeout", h.Timeout)
}

func (v *validator) limits(path string, l *Limits) {
	if l.Key != "" {
		if err := checkName(l.Key); err != nil {
			v.fail(path+".key", "invalid limits key: %v", err)
		}
	}
	if l.Requests < 0 {
		v.fail(path+".requests", "must not be negative, got %d", l.Requests)
	}
	if l.Tokens < 0 {
		v.fail(path+".tokens", "must not be negative, got %d", l.Tokens)
	}
	if l.Concurrency < 0 {
		v.fail(path+".concurrency", "must not be negative, got %d", l.Concurrency)
	}
	switch {
	case l.Per < 0:
		v.fail(path+".per", "must be positive, got %s", l.Per)
	case l.Per == 0 && (l.Requests > 0 || l.Tokens > 0):
		v.fail(path+".per", "is required with requests or tokens (the window they count in, e.g. 1m)")
	case l.Per > 0 && l.Per < time.Millisecond:
		v.fail(path+".per", "must be at least 1ms, got %s", l.Per)
	}
	if l.Requests == 0 && l.Tokens == 0 && l.Concurrency == 0 {
		v.fail(path, "sets no limit: set requests, tokens or concurrency")
	}
}

// sharedLimits checks that agents sharing a limits key configure the same
// numbers: the key's limits are one set, whichever agent's task asks. The
// later agent (by name) is the one reported.
func (v *validator) sharedLimits() {
	first := map[string]string{} // limits key -> first agent with it
	for _, name := range v.c.AgentNames() {
		a, _ := v.c.Agent(name)
		if a.Limits == nil {
			continue
		}
		l := *a.Limits
		other, ok := first[l.Key]
		if !ok {
			first[l.Key] = name
			continue
		}
		o, _ := v.c.Agent(other)
		ol := *o.Limits
		path := "agents." + name + ".limits"
		for _, d := range []struct {
			field     string
			mine, its any
		}{
			{"requests", l.Requests, ol.Requests}, {"tokens", l.Tokens, ol.Tokens},
			{"per", l.Per, ol.Per}, {"concurrency", l.Concurrency, ol.Concurrency},
		} {
			if d.mine != d.its {
				v.fail(path+"."+d.field, "is %v, but agent %q shares limits key %q with %v: agents sharing a key must configure the same limits",
					d.mine, other, l.Key, d.its)
			}
		}
	}
}

// attemptLength checks that the longest attempt of agent name — its own
// timeout plus the timeout of each agent of its fallback chain — fits in
// tasks.MaxAttempt, the time asynq gives a delivery (less the hand-off
// grace): a longer attempt would be cut by asynq instead of timing out.
func (v *validator) attemptLength(name string) {
	a := v.c.Agents[name]
	total := a.Timeout
	for _, f := range a.Fallback {
		if fa, ok := v.c.Agents[f]; ok && fa.Timeout > 0 {
			total += fa.Timeout
		}
	}
	if total > tasks.MaxAttempt {
		v.fail("agents."+name+".timeout", "an attempt may last %s (timeout %s plus its fallback chain), more than the %s a task run may take",
			total, a.Timeout, tasks.MaxAttempt)
	}
}

// fallbackCycles reports each cycle of the fallback relation once, at the
// list element that closes it (agents.b.fallback[0] for a → b → a).
func (v *validator) fallbackCycles() {
	const (
		unvisited = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(name string)
	visit = func(name string) {
		mark[name] = onPath
		path = append(path, name)
		for i, f := range v.c.Agents[name].Fallback {
			if _, ok := v.c.Agents[f]; !ok || f == name {
				continue // reported by agent()
			}
			switch mark[f] {
			case onPath:
				start := 0
				for j, n := range path {
					if n == f {
						start = j
					}
				}
				cycle := append(append([]string(nil), path[start:]...), f)
				v.fail(fmt.Sprintf("agents.%s.fallback[%d]", name, i), "fallback cycle: %s", strings.Join(cycle, " → "))
			case unvisited:
				visit(f)
			}
		}
		path = path[:len(path)-1]
		mark[name] = done
	}
	for _, name := range v.c.AgentNames() {
		if mark[name] == unvisited {
			visit(name)
		}
	}
}

// checkPlaceholders checks the ${VAR} references of a header value.
func checkPlaceholders(s string) error {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return errors.New("unterminated ${ (write ${NAME})")
		}
		if name := s[i+2 : i+j]; !envNameRE.MatchString(name) {
			return fmt.Errorf("${%s} is not a valid environment variable reference", name)
		}
		s = s[i+j+1:]
	}
}

func (v *validator) httpURL(path, raw string) {
	if raw == "" {
		v.fail(path, "must not be empty")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		v.fail(path, "not a URL: %v", unwrapURLError(err))
		return
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The value is not echoed: a webhook's path or a query may be a secret.
		got := "no host"
		switch {
		case u.Scheme == "":
			got = "no scheme"
		case u.Scheme != "http" && u.Scheme != "https":
			got = fmt.Sprintf("scheme %q", u.Scheme)
		}
		v.fail(path, "must be an absolute http:// or https:// URL, got %s", got)
	}
}
