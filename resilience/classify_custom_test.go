package resilience

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exitOf runs sh -c script and returns the *exec.ExitError of its death.
func exitOf(t *testing.T, script string) error {
	t.Helper()
	err := exec.Command("sh", "-c", script).Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	return fmt.Errorf("agent exited: %w", ee)
}

func TestExitCodeOf(t *testing.T) {
	t.Parallel()
	code, ok := ExitCodeOf(exitOf(t, "exit 3"))
	require.True(t, ok)
	require.Equal(t, 3, code)
	code, ok = ExitCodeOf(&Failure{Err: exitOf(t, "kill -9 $$"), Text: "Killed"})
	require.True(t, ok)
	require.Equal(t, 137, code, "a death by SIGKILL is 128+9, as a shell says")
	code, ok = ExitCodeOf(&Failure{Err: fmt.Errorf("agent exited with code 2: %w", &ExitStatus{Code: 2})})
	require.True(t, ok)
	require.Equal(t, 2, code)
	_, ok = ExitCodeOf(&Failure{Status: 500, Text: "exit status 3"})
	require.False(t, ok, "an exit in the text is not an exit")
}

func TestConfiguredRules(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile
	c := Classifier{Now: func() time.Time { return fixedNow }, model: rulesOnly.model, Custom: []CustomRule{
		{Name: "team quota", Class: QuotaExhausted, Status: []int{500}, Text: re(`quota for team \w+ is gone`)},
		{Class: RateLimited, Header: map[string]*regexp.Regexp{"X-Gateway-State": re(`^busy`)}},
		{Name: "oom", Class: LogicError, ExitCode: []int{137}},
		{Name: "garbage is a backend hiccup", Class: ProviderError, Text: re(`not an ActionResponse: <html>`)},
		{Name: "status and header", Class: NotSupported, Status: []int{404, 410},
			Header: map[string]*regexp.Regexp{"X-Model": re(`retired`)}},
	}}
	withHeader := func(st int, text string, kv ...string) error {
		return &Failure{Status: st, Text: text, Header: hdr(kv...)}
	}
	for _, tc := range []struct {
		name  string
		err   error
		want  Class
		index int // -1: built-in
	}{
		{"configured rule beats the built-in status table",
			status(500, "quota for team X is gone"), QuotaExhausted, 0},
		{"AND: the text alone is not enough",
			status(502, "quota for team X is gone"), ProviderError, -1},
		{"AND: the status alone is not enough",
			status(500, "quota for team X is fine"), ProviderError, -1},
		{"header rule beats the built-in 429",
			withHeader(429, "slow down", "X-Gateway-State", "busy-ish"), RateLimited, 1},
		{"header rule: a header that does not match",
			withHeader(400, "bad", "X-Gateway-State", "idle"), InvalidRequest, -1},
		{"header rule: an absent header never matches",
			status(400, "bad"), InvalidRequest, -1},
		{"exit code of a real SIGKILLed process",
			&Failure{Err: exitOf(t, "kill -9 $$"), Text: "Killed"}, LogicError, 2},
		{"exit code rule: another exit code",
			&Failure{Err: exitOf(t, "exit 1"), Text: "Killed"}, ProviderError, -1},
		{"configured rule beats the runner's own verdict",
			&Failure{Class: LogicError, Text: "agent output is not an ActionResponse: <html><body>502"}, ProviderError, 3},
		{"status list and header together",
			withHeader(410, "gone", "X-Model", "retired 2025-01"), NotSupported, 4},
		{"status list and header: the status is not in the list",
			withHeader(400, "gone", "X-Model", "retired 2025-01"), InvalidRequest, -1},
		{"canceled stays canceled whatever the rules say",
			&Failure{Status: 500, Text: "quota for team X is gone", Err: context.Canceled}, Canceled, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, m := c.Explain(tc.err)
			require.Equal(t, tc.want, v.Class)
			require.Equal(t, v, c.Classify(tc.err), "Explain and Classify agree")
			if tc.index >= 0 {
				require.Equal(t, Match{Source: MatchConfig, Index: tc.index, Name: c.Custom[tc.index].Name, By: ByRule}, m)
				return
			}
			require.Equal(t, MatchBuiltin, m.Source)
			require.Equal(t, -1, m.Index)
			require.Equal(t, rulesOnly.Classify(tc.err).Class, v.Class, "no configured rule matched: the built-in verdict")
		})
	}

	// A configured match keeps the backend's Retry-After and x-should-retry.
	f := &Failure{Status: 500, Text: "quota for team X is gone", Header: hdr("Retry-After", "7", "X-Should-Retry", "false")}
	v := c.Classify(f)
	require.Equal(t, Verdict{Class: QuotaExhausted, RetryAfter: 7 * time.Second, ShouldRetry: -1, By: ByRule}, v)

	// First match wins.
	dup := Classifier{Custom: []CustomRule{
		{Name: "first", Class: Timeout, Text: re(`boom`)},
		{Name: "second", Class: LogicError, Text: re(`boom`)},
	}}
	v, m := dup.Explain(errors.New("boom"))
	require.Equal(t, Timeout, v.Class)
	require.Equal(t, "first", m.Name)

	// A rule without matchers, or with the canceled class, never matches.
	odd := Classifier{model: rulesOnly.model, Custom: []CustomRule{{Class: LogicError}, {Class: Canceled, Text: re(`.`)}}}
	require.Equal(t, ProviderError, odd.Classify(errors.New("boom")).Class)
}

// TestExplainNamesTheBuiltinEvidence: Explain names the built-in text rule,
// the status or the step that decided, and always agrees with Classify.
func TestExplainNamesTheBuiltinEvidence(t *testing.T) {
	t.Parallel()
	names := map[string]Class{}
	for _, r := range DefaultRules() {
		names[r.Name] = r.Class
	}
	v, m := testClassifier.Explain(status(429, `{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`))
	require.Equal(t, QuotaExhausted, v.Class)
	require.Equal(t, MatchBuiltin, m.Source)
	require.Equal(t, QuotaExhausted, names[m.Name], "the text rule %q that matched", m.Name)

	v, m = testClassifier.Explain(status(503, "zzz"))
	require.Equal(t, ProviderError, v.Class)
	require.Equal(t, Match{Source: MatchBuiltin, Index: -1, Name: "status 503", By: ByStatus}, m)
	require.Equal(t, "builtin status 503", m.String())

	_, m = testClassifier.Explain(&Failure{Class: LogicError, Text: "x"})
	require.Equal(t, "runner verdict", m.Name)
	_, m = testClassifier.Explain(context.Canceled)
	require.Equal(t, "context canceled", m.Name)
	_, m = testClassifier.Explain(errors.New("zzz"))
	require.Equal(t, "no rule matched", m.Name)
	v, m = testClassifier.Explain(nil)
	require.Equal(t, Verdict{}, v)
	require.Equal(t, Match{}, m)

	require.Equal(t, "config classifier.rules[2] (oom)", Match{Source: MatchConfig, Index: 2, Name: "oom"}.String())
	require.Equal(t, "config classifier.rules[0]", Match{Source: MatchConfig, Index: 0}.String())

	for _, tc := range realWorldCases {
		v, m := testClassifier.Explain(tc.err)
		require.Equal(t, testClassifier.Classify(tc.err), v, tc.name)
		require.Equal(t, MatchBuiltin, m.Source, tc.name)
		require.NotEmpty(t, m.Name, tc.name)
		if c, ok := names[m.Name]; ok {
			require.Equal(t, c, v.Class, "%s: rule %s", tc.name, m.Name)
		}
	}
}
