// Package agent defines what an agent is to agentq — a Runner that turns an
// ActionRequest into result data or an error — and the three ways to provide
// one:
//
//   - Func: a Go function registered by a library user.
//   - Exec: a subprocess speaking the exec agent protocol: the ActionRequest
//     JSON on stdin, one ActionResponse JSON object on stdout. No shell is
//     involved, the environment is an explicit allowlist, stdout is capped,
//     and the agent runs in its own process group, which is killed as a
//     whole when the call's context ends.
//   - HTTP: a POST of the ActionRequest (or of its params) to an endpoint;
//     a 2xx reply's JSON is the data. Header values may reference secrets as
//     ${VAR}, expanded at request time and never stored.
//
// Runners never classify failures themselves, with two exceptions: verdicts
// only the runner can make (output that is not an ActionResponse, output over
// the cap, a command that cannot be started: logic_error / not_supported) and
// the call's own context (timeout, canceled). Everything else is returned as
// a *resilience.Failure carrying the status, headers, error text and Go error
// chain that resilience.Classify looks at.
//
// Runners never log: error texts are sanitized agent output, and neither
// environment values nor expanded headers appear in errors, even when the
// agent or its gateway echoes them: the runner redacts the secrets it
// handed over from what it returns (secrets.go, internal/redact.Secrets).
package agent
