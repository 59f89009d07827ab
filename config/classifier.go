package config

import (
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/agentq/agentq/resilience"
)

// Classifier holds what operators teach the failure classifier.
type Classifier struct {
	// Rules are checked before the built-in classifier for every failure
	// but a cancellation (and a call's own timeout, which the worker
	// decides before classifying); the first that matches gives the class
	// (YAML classifier: {rules: [{class: quota_exhausted, status: 500,
	// regexp: "quota for team"}]}). Zero → none.
	Rules []ClassifierRule `yaml:"rules"`
}

// ClassifierRule is one operator rule: a failure that matches every matcher
// the rule sets gets Class. At least one matcher is required.
type ClassifierRule struct {
	// Name is shown by inspector classify; optional.
	Name string `yaml:"name"`
	// Class is the verdict: one of the error classes but canceled. Required.
	Class resilience.Class `yaml:"class"`
	// Status matches the failure's HTTP status (an exec agent's
	// ActionResponse code): one status (status: 500) or a list, any of
	// which matches (status: [500, 503]).
	Status Codes `yaml:"status"`
	// Header matches response headers: each named header must have a value
	// the Go regexp matches (header: {X-Error-Kind: "^quota"}); "" only
	// requires the header. Names are case-insensitive.
	Header map[string]string `yaml:"header"`
	// Regexp is a Go (RE2) regular expression the failure's message must
	// match: the error text task history and dead letters show
	// ("status 500: {…}", "agent exited with code 137: exit status 137: …").
	// Case-sensitive unless it starts with (?i).
	Regexp string `yaml:"regexp"`
	// ExitCode matches an exec agent's exit status: one code or a list; a
	// death by signal N is 128+N (exit_code: 137 is SIGKILL, the OOM
	// killer's). It matches only an agent that died without printing a
	// valid ActionResponse.
	ExitCode Codes `yaml:"exit_code"`
}

// Codes is a list of integers the file may write as one integer
// (status: 500) or as a list (status: [500, 503]).
type Codes []int

var codesType = reflect.TypeFor[Codes]()

var headerNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// ClassifierRules compiles classifier.rules for resilience.Classifier's
// Custom field (the worker's classifier and inspector classify use it). The
// error, like Validate's, names the field of each bad rule.
func (c *Config) ClassifierRules() ([]resilience.CustomRule, error) {
	v := &validator{c: c}
	rules := v.classifier()
	if len(v.errs) > 0 {
		return nil, joinFieldErrors(v.errs)
	}
	return rules, nil
}

// classifier checks classifier.rules and returns them compiled.
func (v *validator) classifier() []resilience.CustomRule {
	var out []resilience.CustomRule
	for i, r := range v.c.Classifier.Rules {
		p := fmt.Sprintf("classifier.rules[%d]", i)
		cr := resilience.CustomRule{Name: r.Name, Class: r.Class}
		ok := true
		switch class, err := resilience.ParseClass(string(r.Class)); {
		case r.Class == "":
			v.fail(p+".class", "required: the class a matching failure gets (one of %s)", classList())
			ok = false
		case err != nil:
			v.fail(p+".class", "unknown error class%s", classSuggestion(string(r.Class)))
			ok = false
		case class == resilience.Canceled:
			v.fail(p+".class", "canceled is never a failure and cannot be a rule's class")
			ok = false
		}
		for _, s := range r.Status {
			if s < 100 || s > 599 {
				v.fail(p+".status", "%d is not an HTTP status (100-599)", s)
				ok = false
			}
		}
		for _, e := range r.ExitCode {
			if e < 1 || e > 255 {
				v.fail(p+".exit_code", "%d is not a failing exit status (1-255; a death by signal N is 128+N)", e)
				ok = false
			}
		}
		cr.Status, cr.ExitCode = []int(r.Status), []int(r.ExitCode)
		names := make([]string, 0, len(r.Header))
		for name := range r.Header {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			hp := join(p+".header", name)
			if !headerNameRE.MatchString(name) {
				v.fail(hp, "%q is not a header name", name)
				ok = false
				continue
			}
			re, err := regexp.Compile(r.Header[name])
			if err != nil {
				v.fail(hp, "%v", err)
				ok = false
				continue
			}
			if cr.Header == nil {
				cr.Header = map[string]*regexp.Regexp{}
			}
			cr.Header[http.CanonicalHeaderKey(name)] = re
		}
		if r.Regexp != "" {
			re, err := regexp.Compile(r.Regexp)
			if err != nil {
				v.fail(p+".regexp", "%v", err)
				ok = false
			}
			cr.Text = re
		}
		if len(r.Status) == 0 && len(r.Header) == 0 && r.Regexp == "" && len(r.ExitCode) == 0 {
			v.fail(p, "needs at least one matcher: status, header, regexp or exit_code")
			ok = false
		}
		if ok {
			out = append(out, cr)
		}
	}
	return out
}

func classList() string {
	known := make([]string, 0, len(resilience.Classes()))
	for _, k := range resilience.Classes() {
		if k != resilience.Canceled {
			known = append(known, string(k))
		}
	}
	return strings.Join(known, ", ")
}

// classSuggestion is " (did you mean X?)" or " (want one of …)".
func classSuggestion(name string) string {
	known := make([]string, 0, len(resilience.Classes()))
	for _, k := range resilience.Classes() {
		known = append(known, string(k))
	}
	if s := suggest(name, known); strings.HasPrefix(s, " (did") {
		return s
	}
	return " (want one of " + classList() + ")"
}

// Policy is the decision table these settings give: resilience's default
// table with the classes block merged over it cell by cell. The worker
// runs an agent with its Policy; inspector classify shows a class's row.
func (s Settings) Policy() resilience.Policy {
	rules := map[resilience.Class]resilience.Rule{}
	def := resilience.DefaultPolicy()
	for c, r := range s.Classes {
		rule := def.Rule(c)
		if r.Retry != nil {
			rule.Retry = *r.Retry
		}
		if r.Breaker != nil {
			rule.CountsForBreaker = *r.Breaker
		}
		if r.Exhausted != nil {
			rule.Exhausted = resilience.OnExhausted(*r.Exhausted)
		}
		if r.Fallback != nil {
			rule.Fallback = *r.Fallback
		}
		rules[c] = rule
	}
	return def.With(rules)
}
