package cli

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/resilience"
)

// maxClassifyInput bounds what `inspector classify -` reads from stdin (the
// classifier itself looks at the first and last 8 KiB).
const maxClassifyInput = 4 << 20

// classifyOptions are the options of `inspector classify`.
type classifyOptions struct {
	status   int
	headers  []string
	exitCode int
	exitSet  bool // --exit-code was given
	agent    string
	json     bool

	// --unmatched lists the failures the worker kept whose verdict was
	// weak, since, of agent, at most limit (unmatched.go).
	unmatched bool
	since     time.Duration
	limit     int
	// changed reports whether a flag was given on the command line.
	changed func(name string) bool

	header http.Header // headers, parsed by Validate
}

var classifyHeaderRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// Validate checks the flags and arguments before anything is read.
func (o *classifyOptions) Validate(args []string) error {
	if o.unmatched {
		return o.validateUnmatched(args)
	}
	for _, f := range []string{"since", "limit"} {
		if o.changed != nil && o.changed(f) {
			return usageErr("--%s goes with --unmatched (classify TEXT classifies one text)", f)
		}
	}
	if len(args) != 1 {
		return usageErr("classify takes the error text, or - to read it from standard input (got %d arguments)", len(args))
	}
	if o.status != 0 && (o.status < 100 || o.status > 599) {
		return usageErr("--status %d is not an HTTP status (100-599)", o.status)
	}
	if o.exitSet && (o.exitCode < 1 || o.exitCode > 255) {
		return usageErr("--exit-code %d is not a failing exit status (1-255; a death by signal N is 128+N)", o.exitCode)
	}
	o.header = nil
	for _, kv := range o.headers {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || !classifyHeaderRE.MatchString(k) {
			return usageErr("--header %q: want NAME=VALUE (e.g. --header Retry-After=20)", kv)
		}
		if o.header == nil {
			o.header = http.Header{}
		}
		o.header.Add(k, v)
	}
	return nil
}

// failure is the failure a runner would report for text and the flags: an
// HTTP agent's (status, headers, body) or an exec agent's (stderr, exit).
func (o *classifyOptions) failure(text string) *resilience.Failure {
	f := &resilience.Failure{Status: o.status, Header: o.header, Text: text}
	if o.exitSet {
		f.Err = fmt.Errorf("agent exited with code %d: %w", o.exitCode, &resilience.ExitStatus{Code: o.exitCode})
	}
	return f
}

// classifyResult is `inspector classify --json`'s object.
type classifyResult struct {
	Class resilience.Class `json:"class"`
	// ClassifiedBy is the kind of evidence that decided Class.
	ClassifiedBy resilience.Evidence `json:"classified_by"`
	// Weak: nothing decided (default) or the model was unsure; a failure
	// the workers would keep for `classify --unmatched`.
	Weak        bool             `json:"weak,omitempty"`
	RetryAfter  string           `json:"retry_after,omitempty"`
	ShouldRetry *bool            `json:"should_retry,omitempty"`
	Agent       string           `json:"agent,omitempty"`
	Decision    classifyDecision `json:"decision"`
	Rule        classifyRule     `json:"rule"`
}

type classifyDecision struct {
	Retry     bool   `json:"retry"`
	Breaker   bool   `json:"breaker"`
	Exhausted string `json:"exhausted"` // restart, dead_letter; "requeue" for canceled
	Fallback  bool   `json:"fallback"`
}

type classifyRule struct {
	Source resilience.MatchSource `json:"source"`
	Index  *int                   `json:"index,omitempty"` // configured rules only: classifier.rules[index]
	Name   string                 `json:"name"`
}

func classifyCmd(app *App, g *global) *cobra.Command {
	o := &classifyOptions{}
	cmd := &cobra.Command{
		Use: "classify [--status N] [--header K=V]... [--exit-code N] [--agent NAME] TEXT|- " +
			"| classify --unmatched [--since D] [--agent NAME] [--limit N]",
		Short: "Classify an error text as the worker would: its class, what decided it, its decision row and the rule that matched; " +
			"or, with --unmatched, list the recent failures whose verdict was weak",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.exitSet = cmd.Flags().Changed("exit-code")
			o.changed = cmd.Flags().Changed
			if err := o.Validate(args); err != nil {
				return err
			}
			if o.unmatched {
				return g.withSession(app, nil, func(cmd *cobra.Command, _ []string, s *session) error {
					return runUnmatched(cmd.Context(), app, s, o, time.Now())
				})(cmd, args)
			}
			cfg, err := g.loadConfig(app)
			if err != nil {
				return err
			}
			return runClassify(app, cfg, o, args[0])
		},
	}
	cmd.Flags().IntVar(&o.status, "status", 0, "the HTTP status (or an exec agent's ActionResponse code)")
	cmd.Flags().StringArrayVar(&o.headers, "header", nil, "a response header NAME=VALUE (repeatable)")
	cmd.Flags().IntVar(&o.exitCode, "exit-code", 0, "an exec agent's exit status (128+N for a death by signal N)")
	cmd.Flags().StringVar(&o.agent, "agent", "", "show the decision row of this agent of --config (default: the defaults block's); "+
		"with --unmatched, only this agent's failures")
	cmd.Flags().BoolVar(&o.json, "json", false, "one JSON object (with --unmatched: JSON Lines, one object per failure)")
	cmd.Flags().BoolVar(&o.unmatched, "unmatched", false, "list the recent failed attempts whose verdict was weak (nothing decided the class, "+
		"or the model was unsure), newest first: write a classifier.rules entry for them")
	cmd.Flags().DurationVar(&o.since, "since", unmatchedSince, "with --unmatched: how far back")
	cmd.Flags().IntVar(&o.limit, "limit", unmatchedLimit, "with --unmatched: at most this many (0: every one kept)")
	return cmd
}

// runClassify classifies text with cfg's classifier.rules first, exactly
// as the worker does, and prints the verdict.
func runClassify(app *App, cfg *config.Config, o *classifyOptions, text string) error {
	settings := cfg.Defaults.Settings
	if o.agent != "" {
		a, ok := cfg.Agent(o.agent)
		if !ok {
			return usageErr("--agent %q is not an agent of %s (agents: %s); a Go-function agent without a block runs with the defaults: leave --agent out",
				o.agent, classifyConfigName(cfg), strings.Join(cfg.AgentNames(), ", "))
		}
		settings = a.Settings
	}
	if text == "-" {
		data, err := io.ReadAll(io.LimitReader(app.In, maxClassifyInput+1))
		if err != nil {
			return runtimeErr(fmt.Errorf("read standard input: %w", err))
		}
		if len(data) > maxClassifyInput {
			return usageErr("standard input is longer than %d bytes", maxClassifyInput)
		}
		text = strings.TrimRight(string(data), "\r\n")
	}
	custom, err := cfg.ClassifierRules()
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	v, m := resilience.Classifier{Custom: custom}.Explain(o.failure(text))

	rule := settings.Policy().Rule(v.Class)
	res := classifyResult{Class: v.Class, ClassifiedBy: v.By, Weak: v.Weak, Agent: o.agent,
		Decision: classifyDecision{Retry: rule.Retry, Breaker: rule.CountsForBreaker, Exhausted: string(rule.Exhausted), Fallback: rule.Fallback},
		Rule:     classifyRule{Source: m.Source, Name: m.Name}}
	switch {
	case v.Class == resilience.Canceled:
		res.Decision = classifyDecision{Exhausted: "requeue"}
	case res.Decision.Exhausted == "":
		res.Decision.Exhausted = string(resilience.DeadLetter)
	}
	if m.Source == resilience.MatchConfig {
		i := m.Index
		res.Rule.Index = &i
	}
	if v.RetryAfter > 0 {
		res.RetryAfter = v.RetryAfter.Round(time.Millisecond).String()
	}
	if v.ShouldRetry != 0 {
		b := v.ShouldRetry > 0
		res.ShouldRetry = &b
	}
	if o.json {
		printJSON(app, res)
		return nil
	}
	policy := "the defaults block"
	if o.agent != "" {
		policy = "agent " + o.agent
	}
	w := table(app)
	fmt.Fprintln(w, "CLASS\tBY\tRETRY\tBREAKER\tEXHAUSTED\tFALLBACK\tRULE")
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", res.Class, res.ClassifiedBy, classifyYesNo(res.Decision.Retry), classifyYesNo(res.Decision.Breaker),
		res.Decision.Exhausted, classifyYesNo(res.Decision.Fallback), m)
	if err := w.Flush(); err != nil {
		return runtimeErr(err)
	}
	fmt.Fprintf(app.Out, "decision row of %s", policy)
	if res.RetryAfter != "" {
		fmt.Fprintf(app.Out, "; the backend asks to wait %s", res.RetryAfter)
	}
	if res.ShouldRetry != nil {
		fmt.Fprintf(app.Out, "; x-should-retry: %t", *res.ShouldRetry)
	}
	fmt.Fprintln(app.Out)
	return nil
}

func classifyYesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func classifyConfigName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "the config (no --config)"
	}
	return cfg.Path
}
