package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/agentq/agentq/internal/redact"
	"github.com/agentq/agentq/resilience"
)

// Secrets in agent replies.
//
// A runner knows the secret values it handed the agent: an http agent's
// ${VAR} expansions (each expanded value, and each whole header value that
// held one), an exec agent's environment passed through from the worker
// (except the well-known variables of publicEnv). An agent or a gateway
// may echo them ("401 invalid api key (you sent Authorization: Bearer
// sk-…)"); the runner replaces them, and their obvious encodings (see
// redact.Secrets), in the error text and the Go error's text it returns
// (an http agent also in the result data: a gateway's echo), so that
// nothing downstream (history, dead letters, logs, spans, asynq's last
// error, results) ever holds them. Values
// shorter than redact.MinSecretLen are left alone, as are literal values
// written in the config (a header without ${VAR}, an env entry
// NAME=value): keep secrets in the environment.

// publicEnv are the environment variables an exec agent may be given that
// are not secrets: redacting a HOME of "/home/agent" would mangle every
// path in a traceback.
var publicEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "PWD": true,
	"TMPDIR": true, "TMP": true, "TEMP": true, "TZ": true, "LANG": true, "LANGUAGE": true,
	"TERM": true, "HOSTNAME": true, "PYTHONPATH": true, "NODE_PATH": true, "GOPATH": true,
}

// isPublicEnv reports whether the variable name holds no secret.
func isPublicEnv(name string) bool { return publicEnv[name] || strings.HasPrefix(name, "LC_") }

// EnvSecrets are the values of allow (an exec agent's env allowlist) that
// a subprocess gets from getenv and that may be secrets: every NAME passed
// through except the public ones. Literal NAME=value entries are config
// text, not secrets.
func EnvSecrets(allow []string, getenv func(string) string) []string {
	var out []string
	for _, name := range allow {
		if strings.Contains(name, "=") || isPublicEnv(name) {
			continue
		}
		if v := getenv(name); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// secretCache keeps the redactor of the last set of secret values a
// runner saw, so that a runner whose environment does not change (the
// usual case) builds it once.
type secretCache struct {
	last atomic.Pointer[cachedSecrets]
}

type cachedSecrets struct {
	key string
	s   *redact.Secrets
}

// get returns the redactor of values, nil when there are none.
func (c *secretCache) get(values []string) *redact.Secrets {
	if len(values) == 0 {
		return nil
	}
	values = slices.Clone(values)
	slices.Sort(values) // header maps iterate in any order
	key := strings.Join(values, "\x00")
	if cur := c.last.Load(); cur != nil && cur.key == key {
		return cur.s
	}
	s := redact.NewSecrets(values...)
	c.last.Store(&cachedSecrets{key: key, s: s})
	return s
}

// scrub removes the secrets of s from a runner's result: the data, and
// the Text and Err of a *resilience.Failure (any other error is wrapped
// with a redacted text).
func scrub(s *redact.Secrets, data json.RawMessage, err error) (json.RawMessage, error) {
	if s == nil {
		return data, err
	}
	if f, ok := err.(*resilience.Failure); ok {
		f.Text = s.Clipped(f.Text)
		f.Err = s.Error(f.Err)
	} else if err != nil {
		err = s.Error(err)
	}
	if len(data) > 0 {
		data = s.JSON(data)
	}
	return data, err
}
