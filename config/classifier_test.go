package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentq/agentq/resilience"
)

func TestClassifierRulesParse(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`classifier:
  rules:
    - name: team quota
      class: quota_exhausted
      status: 500
      regexp: 'quota for team \w+ is gone'
    - class: rate_limited
      status: [502, 503]
      header: {x-gateway-state: '^busy', X-Present: ''}
    - class: logic_error
      exit_code: 137
    - class: not_supported
      exit_code: [126, 127]
agents:
  a: {timeout: 1s}
`), "agentq.yaml")
	require.NoError(t, err)
	require.Len(t, c.Classifier.Rules, 4)
	require.Equal(t, Codes{500}, c.Classifier.Rules[0].Status, "one status is a list of one")
	require.Equal(t, Codes{502, 503}, c.Classifier.Rules[1].Status)

	rules, err := c.ClassifierRules()
	require.NoError(t, err)
	require.Len(t, rules, 4)
	require.Equal(t, "team quota", rules[0].Name)
	require.Equal(t, resilience.QuotaExhausted, rules[0].Class)
	require.Equal(t, []int{500}, rules[0].Status)
	require.True(t, rules[0].Text.MatchString("status 500: quota for team X is gone"))
	require.Contains(t, rules[1].Header, "X-Gateway-State", "header names are canonical")
	require.Contains(t, rules[1].Header, "X-Present")
	require.Equal(t, []int{137}, rules[2].ExitCode)
	require.Equal(t, []int{126, 127}, rules[3].ExitCode)

	// The compiled rules drive a classifier.
	cl := resilience.Classifier{Custom: rules}
	v, m := cl.Explain(&resilience.Failure{Status: 500, Text: "quota for team X is gone"})
	require.Equal(t, resilience.QuotaExhausted, v.Class)
	require.Equal(t, resilience.Match{Source: resilience.MatchConfig, Index: 0, Name: "team quota", By: resilience.ByRule}, m)

	// No rules: none, and the zero classifier.
	rules, err = Default().ClassifierRules()
	require.NoError(t, err)
	require.Empty(t, rules)
}

func TestClassifierRulesErrors(t *testing.T) {
	t.Parallel()
	const head = "classifier:\n  rules:\n"
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		want  string
	}{
		{"no class", head + "    - {status: 500}\n", 3, "classifier.rules[0].class", "required"},
		{"unknown class", head + "    - {class: quota_exausted, status: 500}\n", 3, "classifier.rules[0].class", "did you mean quota_exhausted?"},
		{"far class", head + "    - {class: boom, status: 500}\n", 3, "classifier.rules[0].class", "want one of network_transient"},
		{"canceled class", head + "    - {class: canceled, status: 500}\n", 3, "classifier.rules[0].class", "cannot be a rule's class"},
		{"no matcher", head + "    - {class: timeout, name: lonely}\n", 3, "classifier.rules[0]", "needs at least one matcher"},
		{"bad regexp", head + "    - {class: timeout, status: 500}\n    - {class: timeout, status: 500}\n    - {class: timeout, regexp: 'quota (team'}\n",
			5, "classifier.rules[2].regexp", "missing closing )"},
		{"status out of range", head + "    - {class: timeout, status: 99}\n", 3, "classifier.rules[0].status", "99 is not an HTTP status"},
		{"status in list out of range", head + "    - class: timeout\n      status: [500, 600]\n", 4, "classifier.rules[0].status", "600 is not an HTTP status"},
		{"status not a number", head + "    - {class: timeout, status: five}\n", 3, "classifier.rules[0].status", "must be an integer"},
		{"status list element not a number", head + "    - class: timeout\n      status: [500, x]\n", 4, "classifier.rules[0].status[1]", "must be an integer"},
		{"exit code zero", head + "    - {class: timeout, exit_code: 0}\n", 3, "classifier.rules[0].exit_code", "not a failing exit status"},
		{"exit code too big", head + "    - {class: timeout, exit_code: [1, 300]}\n", 3, "classifier.rules[0].exit_code", "300 is not a failing exit status"},
		{"bad header regexp", head + "    - class: timeout\n      header: {X-Kind: '(['}\n", 4, "classifier.rules[0].header.X-Kind", "missing closing ]"},
		{"bad header name", head + "    - class: timeout\n      header: {'X Kind': 'a'}\n", 4, "classifier.rules[0].header.X Kind", "not a header name"},
		{"header not a mapping", head + "    - {class: timeout, header: 'X-Kind=a'}\n", 3, "classifier.rules[0].header", "must be a mapping"},
		{"unknown rule field", head + "    - {class: timeout, regex: 'a'}\n", 3, "classifier.rules[0].regex", "did you mean regexp?"},
		{"rules not a list", head + "    class: timeout\n", 3, "classifier.rules", "must be a list"},
		{"unknown classifier field", "classifier:\n  rule: []\n", 2, "classifier.rule", "did you mean rules?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireFieldError(t, tt.yaml, tt.line, tt.field, tt.want)
		})
	}
}

// TestClassifierRulesErrorFromGo: a Config built in Go gets the same
// checks from ClassifierRules (what worker.New calls) as from Validate.
func TestClassifierRulesErrorFromGo(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Classifier.Rules = []ClassifierRule{{Class: resilience.Timeout, Status: Codes{500}}, {Class: resilience.Timeout, Regexp: "("}}
	_, err := c.ClassifierRules()
	require.ErrorIs(t, err, ErrInvalid)
	var fe *FieldError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "classifier.rules[1].regexp", fe.Field)
	require.ErrorIs(t, c.Validate(), ErrInvalid)
}

// TestSettingsPolicy: the classes block merged over the default table.
func TestSettingsPolicy(t *testing.T) {
	t.Parallel()
	require.Equal(t, resilience.DefaultPolicy(), DefaultSettings().Policy())
	yes, dl := true, ExhaustedDeadLetter
	s := DefaultSettings()
	s.Classes = map[resilience.Class]ClassRule{resilience.Timeout: {Retry: new(bool), Exhausted: &dl}, resilience.InvalidRequest: {Breaker: &yes}}
	p := s.Policy()
	require.Equal(t, resilience.Rule{Retry: false, CountsForBreaker: true, Exhausted: resilience.DeadLetter}, p.Rule(resilience.Timeout))
	require.Equal(t, resilience.Rule{Retry: false, CountsForBreaker: true, Exhausted: resilience.DeadLetter}, p.Rule(resilience.InvalidRequest))
	require.Equal(t, resilience.DefaultPolicy().Rule(resilience.RateLimited), p.Rule(resilience.RateLimited))
}
