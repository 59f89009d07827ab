package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// Request is the ActionRequest handed to an agent: on stdin for exec agents,
// as the POST body for http agents, as the argument for Go functions.
type Request struct {
	TaskID        string          `json:"task_id"`
	Agent         string          `json:"agent"`
	Action        string          `json:"action"`
	Params        json.RawMessage `json:"params"`
	CorrelationID string          `json:"correlation_id"`
	Attempt       int             `json:"attempt"`
	Restart       int             `json:"restart"`
}

// Response is the ActionResponse an exec agent prints on stdout.
type Response struct {
	Status string          `json:"status"` // "success" or "error"
	Code   int             `json:"code"`
	Data   json.RawMessage `json:"data,omitempty"`
	Error  string          `json:"error"`
}

// Runner runs one attempt of a task. It returns the result data on success.
// On failure it returns an error, usually a *resilience.Failure carrying the
// status, headers and error text the classifier needs. A Runner must return
// promptly once ctx is done and must leave no process behind.
type Runner interface {
	Run(ctx context.Context, req Request) (json.RawMessage, error)
}

// Func adapts a Go function to a Runner: the way library users register
// agents written in Go.
type Func func(ctx context.Context, req Request) (json.RawMessage, error)

// Run calls f.
func (f Func) Run(ctx context.Context, req Request) (json.RawMessage, error) { return f(ctx, req) }

// Registry maps agent names to runners. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	runners map[string]Runner
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{runners: map[string]Runner{}} }

// Register adds or replaces the runner for name.
func (r *Registry) Register(name string, run Runner) error {
	if name == "" {
		return fmt.Errorf("agent: empty agent name")
	}
	if run == nil {
		return fmt.Errorf("agent %q: nil runner", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runners[name] = run
	return nil
}

// Lookup returns the runner for name.
func (r *Registry) Lookup(name string) (Runner, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	run, ok := r.runners[name]
	return run, ok
}

// Names lists the registered agents, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.runners))
	for n := range r.runners {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
