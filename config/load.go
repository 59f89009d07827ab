package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/resilience"
)

// Load reads the configuration file at path, applies AGENTQ_REDIS_URL from
// the process environment over it and validates the result. path "" means
// no file: Default with the environment applied.
func Load(path string) (*Config, error) {
	var c *Config
	if path == "" {
		c = Default()
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		c, err = parse(data, path)
		if err != nil {
			return nil, err
		}
	}
	c.ApplyEnv(os.Getenv)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse decodes and validates a configuration document. name (usually the
// file name) prefixes error messages and becomes Config.Path. Parse does not
// read the environment; see ApplyEnv. Empty input (or only comments) yields
// Default.
//
// Every error wraps ErrInvalid; each problem is a *FieldError naming the
// file, the line and the dotted field. When there are several, they are
// joined (errors.Join) in line order.
func Parse(data []byte, name string) (*Config, error) {
	c, err := parse(data, name)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// maxErrors bounds the number of problems reported for one document.
const maxErrors = 50

// parse decodes data over Default without validating values.
func parse(data []byte, name string) (c *Config, err error) {
	defer func() {
		// yaml.v3 is not known to panic on v3.0.1, but a config parser must
		// never take a process down on bad input.
		if r := recover(); r != nil {
			c, err = nil, &FieldError{File: name, Reason: fmt.Sprintf("cannot parse YAML: %v", r)}
		}
	}()
	c = Default()
	c.Path = name
	c.lines = map[string]int{}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		return nil, yamlError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(name, err)
		}
		return nil, &FieldError{File: name, Line: extra.Line, Reason: "more than one YAML document; a config file holds one"}
	}

	d := &decoder{file: name, lines: c.lines, budget: 10000 + 10*len(data)}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return c, nil
		}
		root = root.Content[0]
	}
	d.config(root, c)
	if len(d.errs) > 0 {
		return nil, joinFieldErrors(d.errs)
	}
	return c, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a syntax error of yaml.v3 into a *FieldError.
func yamlError(file string, err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{File: file, Line: line, Reason: "invalid YAML: " + m[2]}
	}
	return &FieldError{File: file, Reason: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// decoder walks a yaml.Node tree along the config schema, writing the values
// it finds over a Config and recording the line of every field it sees.
type decoder struct {
	file  string
	lines map[string]int
	errs  []*FieldError
	// budget bounds the entries visited, so that aliases and merge keys
	// referring to each other cannot make decoding take exponential time.
	budget int
}

// spend uses up one unit of the budget and reports whether any is left.
func (d *decoder) spend(n *yaml.Node, path string) bool {
	d.budget--
	if d.budget == 0 {
		d.fail(n, path, "document too complex: too many alias or merge-key expansions")
	}
	return d.budget > 0
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Field: path, Reason: fmt.Sprintf(format, args...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// describe names what a node holds, for type errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		kind := map[string]string{
			"!!str": "string", "!!int": "integer", "!!float": "number",
			"!!bool": "boolean", "!!timestamp": "timestamp", "!!binary": "binary",
		}[n.Tag]
		if kind == "" {
			kind = n.Tag
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("%s %q", kind, v)
	}
	return "an unsupported value"
}

// pair is one key/value of a mapping.
type pair struct{ key, val *yaml.Node }

// pairs returns the entries of a mapping node, with YAML merge keys (<<)
// expanded (explicit keys win) and duplicate keys reported. ok is false (and
// an error recorded) when n is not a mapping; a null node yields no pairs.
func (d *decoder) pairs(n *yaml.Node, path string) ([]pair, bool) {
	n = deref(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping, got %s", describe(n))
		return nil, false
	}
	var out, merged []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if !d.spend(k, path) {
			return nil, false
		}
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merged = append(merged, d.mergePairs(v, path, 0)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be strings, got %s", describe(k))
			continue
		}
		if seen[k.Value] {
			d.fail(k, join(path, k.Value), "defined more than once")
			continue
		}
		seen[k.Value] = true
		out = append(out, pair{k, v})
	}
	for _, p := range merged {
		if !seen[p.key.Value] {
			seen[p.key.Value] = true
			out = append(out, p)
		}
	}
	return out, true
}

// mergePairs returns the entries a merge key's value brings in.
func (d *decoder) mergePairs(v *yaml.Node, path string, depth int) []pair {
	v = deref(v)
	if depth > 10 {
		d.fail(v, path, "merge keys nested too deeply")
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		ps, _ := d.pairs(v, path)
		return ps
	case yaml.SequenceNode:
		var out []pair
		for _, e := range v.Content {
			if !d.spend(e, path) {
				return nil
			}
			out = append(out, d.mergePairs(e, path, depth+1)...)
		}
		return out
	}
	d.fail(v, path, "merge key (<<) must refer to a mapping, got %s", describe(v))
	return nil
}

// fields decodes a mapping whose keys must be among handlers' keys.
func (d *decoder) fields(n *yaml.Node, path string, handlers map[string]func(v *yaml.Node, path string)) {
	ps, _ := d.pairs(n, path)
	for _, p := range ps {
		fp := join(path, p.key.Value)
		h, ok := handlers[p.key.Value]
		if !ok {
			d.fail(p.key, fp, "unknown field%s", suggest(p.key.Value, keys(handlers)))
			continue
		}
		d.lines[fp] = p.key.Line
		h(p.val, fp)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// suggest returns " (did you mean X?)" for the closest candidate, or "".
func suggest(got string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if dist := editDistance(strings.ToLower(got), c); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	if best == "" {
		if len(candidates) > 0 && len(candidates) <= 12 {
			return fmt.Sprintf(" (want one of %s)", strings.Join(candidates, ", "))
		}
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// scalar returns the scalar node at n, or nil (after recording a type error
// naming want) when n is not a scalar. A null node returns nil silently.
func (d *decoder) scalar(n *yaml.Node, path, want string) *yaml.Node {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "must be %s, got %s", want, describe(n))
		return nil
	}
	return n
}

func (d *decoder) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if s := d.scalar(n, path, "a string"); s != nil {
			if s.Tag != "!!str" {
				d.fail(s, path, "must be a string, got %s (quote it)", describe(s))
				return
			}
			*dst = s.Value
		}
	}
}

func (d *decoder) integer(dst *int) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		var v int64
		if d.int64Value(n, path, &v) {
			*dst = int(v)
		}
	}
}

func (d *decoder) int64(dst *int64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) { d.int64Value(n, path, dst) }
}

func (d *decoder) int64Value(n *yaml.Node, path string, dst *int64) bool {
	s := d.scalar(n, path, "an integer")
	if s == nil {
		return false
	}
	var v int64
	if s.Tag != "!!int" || s.Decode(&v) != nil {
		d.fail(s, path, "must be an integer, got %s", describe(s))
		return false
	}
	*dst = v
	return true
}

func (d *decoder) float(dst *float64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s := d.scalar(n, path, "a number")
		if s == nil {
			return
		}
		var v float64
		if (s.Tag != "!!float" && s.Tag != "!!int") || s.Decode(&v) != nil {
			d.fail(s, path, "must be a number, got %s", describe(s))
			return
		}
		*dst = v
	}
}

func (d *decoder) boolean(dst **bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s := d.scalar(n, path, "true or false")
		if s == nil {
			return
		}
		var v bool
		if s.Tag != "!!bool" || s.Decode(&v) != nil {
			d.fail(s, path, "must be true or false, got %s", describe(s))
			return
		}
		*dst = &v
	}
}

func (d *decoder) durationValue(n *yaml.Node, path string, dst *time.Duration) bool {
	s := d.scalar(n, path, "a duration")
	if s == nil {
		return false
	}
	switch s.Tag {
	case "!!int", "!!float":
		d.fail(s, path, "%s has no unit: write a Go duration such as %ss or %sms", s.Value, s.Value, s.Value)
		return false
	case "!!str":
		v, err := time.ParseDuration(s.Value)
		if err != nil {
			d.fail(s, path, "%q is not a duration: write a Go duration such as 500ms, 30s or 1m", s.Value)
			return false
		}
		*dst = v
		return true
	}
	d.fail(s, path, "must be a duration such as 30s, got %s", describe(s))
	return false
}

func (d *decoder) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) { d.durationValue(n, path, dst) }
}

// list decodes a sequence, calling elem for each element with the path
// "path[i]". A null node leaves dst alone; an empty list is kept as empty.
func (d *decoder) list(n *yaml.Node, path string, elem func(i int, e *yaml.Node, path string)) bool {
	n = deref(n)
	if isNull(n) {
		return false
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "must be a list, got %s", describe(n))
		return false
	}
	for i, e := range n.Content {
		if !d.spend(e, path) {
			return false
		}
		ep := fmt.Sprintf("%s[%d]", path, i)
		d.lines[ep] = e.Line
		elem(i, e, ep)
	}
	return true
}

func (d *decoder) strList(dst *[]string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		var out []string
		if d.list(n, path, func(_ int, e *yaml.Node, ep string) {
			s := ""
			d.str(&s)(e, ep)
			out = append(out, s)
		}) {
			if out == nil {
				out = []string{}
			}
			*dst = out
		}
	}
}

func (d *decoder) durList(dst *[]time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		out := []time.Duration{}
		if d.list(n, path, func(_ int, e *yaml.Node, ep string) {
			var v time.Duration
			d.durationValue(e, ep, &v)
			out = append(out, v)
		}) {
			*dst = out
		}
	}
}

// config decodes the root mapping. Sections are decoded in a fixed order,
// defaults before agents, whatever their order in the file.
func (d *decoder) config(root *yaml.Node, c *Config) {
	sections := map[string]*yaml.Node{}
	d.fields(root, "", map[string]func(*yaml.Node, string){
		"redis":    func(v *yaml.Node, _ string) { sections["redis"] = v },
		"worker":   func(v *yaml.Node, _ string) { sections["worker"] = v },
		"defaults": func(v *yaml.Node, _ string) { sections["defaults"] = v },
		"agents":   func(v *yaml.Node, _ string) { sections["agents"] = v },
		"history":  func(v *yaml.Node, _ string) { sections["history"] = v },
		"alerts":   func(v *yaml.Node, _ string) { sections["alerts"] = v },
	})
	if n := sections["redis"]; n != nil {
		d.fields(n, "redis", map[string]func(*yaml.Node, string){
			"url": d.str(&c.Redis.URL),
		})
	}
	if n := sections["worker"]; n != nil {
		w := &c.Worker
		d.fields(n, "worker", map[string]func(*yaml.Node, string){
			"concurrency":      d.integer(&w.Concurrency),
			"shutdown_timeout": d.duration(&w.ShutdownTimeout),
			"http_addr":        d.str(&w.HTTPAddr),
			"poll_interval":    d.duration(&w.PollInterval),
			"forward_interval": d.duration(&w.ForwardInterval),
			"queues": func(v *yaml.Node, path string) {
				ps, ok := d.pairs(v, path)
				if !ok || isNull(deref(v)) {
					return
				}
				q := make(map[string]int, len(ps))
				for _, p := range ps {
					qp := join(path, p.key.Value)
					d.lines[qp] = p.key.Line
					prio := 0
					d.integer(&prio)(p.val, qp)
					q[p.key.Value] = prio
				}
				w.Queues = q
			},
		})
	}
	if n := sections["defaults"]; n != nil {
		d.fields(n, "defaults", d.settingsFields(&c.Defaults))
	}
	if n := sections["history"]; n != nil {
		d.fields(n, "history", map[string]func(*yaml.Node, string){
			"retention": d.duration(&c.History.Retention),
		})
	}
	if n := sections["alerts"]; n != nil {
		a := &c.Alerts
		d.fields(n, "alerts", map[string]func(*yaml.Node, string){
			"threshold":   d.integer(&a.Threshold),
			"window":      d.duration(&a.Window),
			"webhook_url": d.str(&a.WebhookURL),
		})
	}
	if n := sections["agents"]; n != nil {
		ps, _ := d.pairs(n, "agents")
		for _, p := range ps {
			name := p.key.Value
			ap := join("agents", name)
			d.lines[ap] = p.key.Line
			a := Agent{Name: name, Settings: c.Defaults.Clone()}
			fields := d.settingsFields(&a.Settings)
			fields["breaker_key"] = d.str(&a.BreakerKey)
			fields["fallback"] = d.strList(&a.Fallback)
			fields["health"] = func(v *yaml.Node, path string) {
				if isNull(deref(v)) {
					return
				}
				h := &HealthProbe{Interval: DefaultProbeInterval, Timeout: DefaultProbeTimeout}
				d.fields(v, path, map[string]func(*yaml.Node, string){
					"url":           d.str(&h.URL),
					"command":       d.strList(&h.Command),
					"interval":      d.duration(&h.Interval),
					"timeout":       d.duration(&h.Timeout),
					"expect_status": d.integer(&h.ExpectStatus),
				})
				a.Health = h
			}
			fields["exec"] = func(v *yaml.Node, path string) {
				if isNull(deref(v)) {
					return
				}
				e := &Exec{}
				d.fields(v, path, map[string]func(*yaml.Node, string){
					"command":          d.strList(&e.Command),
					"env":              d.strList(&e.Env),
					"dir":              d.str(&e.Dir),
					"max_output_bytes": d.int64(&e.MaxOutputBytes),
				})
				a.Exec = e
			}
			fields["http"] = func(v *yaml.Node, path string) {
				if isNull(deref(v)) {
					return
				}
				h := &HTTP{Body: BodyRequest}
				d.fields(v, path, map[string]func(*yaml.Node, string){
					"url":                d.str(&h.URL),
					"body":               d.str(&h.Body),
					"max_response_bytes": d.int64(&h.MaxResponseBytes),
					"headers": func(v *yaml.Node, path string) {
						ps, ok := d.pairs(v, path)
						if !ok || isNull(deref(v)) {
							return
						}
						h.Headers = make(map[string]string, len(ps))
						for _, p := range ps {
							hp := join(path, p.key.Value)
							d.lines[hp] = p.key.Line
							// Header values are text whatever YAML thinks
							// they are (X-Retries: 3).
							if s := d.scalar(p.val, hp, "a string"); s != nil {
								h.Headers[p.key.Value] = s.Value
							}
						}
					},
				})
				a.HTTP = h
			}
			d.fields(p.val, ap, fields)
			if a.BreakerKey == "" {
				a.BreakerKey = name
			}
			c.Agents[name] = a
		}
	}
}

// settingsFields returns the handlers of a settings block (defaults or an
// agent) decoding over s.
func (d *decoder) settingsFields(s *Settings) map[string]func(*yaml.Node, string) {
	return map[string]func(*yaml.Node, string){
		"timeout": d.duration(&s.Timeout),
		"retry": func(v *yaml.Node, path string) {
			r := &s.Retry
			d.fields(v, path, map[string]func(*yaml.Node, string){
				"max_attempts":    d.integer(&r.MaxAttempts),
				"initial_backoff": d.duration(&r.InitialBackoff),
				"max_backoff":     d.duration(&r.MaxBackoff),
				"jitter":          d.float(&r.Jitter),
				"max_retry_after": d.duration(&r.MaxRetryAfter),
			})
		},
		"circuit_breaker": func(v *yaml.Node, path string) {
			b := &s.CircuitBreaker
			d.fields(v, path, map[string]func(*yaml.Node, string){
				"failure_threshold":   d.integer(&b.FailureThreshold),
				"cooldown":            d.duration(&b.Cooldown),
				"half_open_max_calls": d.integer(&b.HalfOpenMaxCalls),
			})
		},
		"restart": func(v *yaml.Node, path string) {
			r := &s.Restart
			d.fields(v, path, map[string]func(*yaml.Node, string){
				"max_restarts": d.integer(&r.MaxRestarts),
				"delays":       d.durList(&r.Delays),
				"max_pending":  d.integer(&r.MaxPending),
			})
		},
		"classes": func(v *yaml.Node, path string) {
			ps, _ := d.pairs(v, path)
			for _, p := range ps {
				cp := join(path, p.key.Value)
				d.lines[cp] = p.key.Line
				class := resilience.Class(p.key.Value)
				if s.Classes == nil {
					s.Classes = map[resilience.Class]ClassRule{}
				}
				rule := s.Classes[class]
				d.fields(p.val, cp, map[string]func(*yaml.Node, string){
					"retry":     d.boolean(&rule.Retry),
					"breaker":   d.boolean(&rule.Breaker),
					"exhausted": d.strPtr(&rule.Exhausted),
					"fallback":  d.boolean(&rule.Fallback),
				})
				s.Classes[class] = rule
			}
		},
	}
}

func (d *decoder) strPtr(dst **string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		var v string
		if s := d.scalar(n, path, "a string"); s != nil {
			d.str(&v)(s, path)
			if s.Tag == "!!str" {
				*dst = &v
			}
		}
	}
}
