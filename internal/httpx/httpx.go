// Package httpx holds what agentq's two HTTP servers — the enqueue API
// (package api) and the worker's ops endpoints — share, below both: the
// JSON error body, JSON replies, the bearer-token check with its
// failed-token limiter (limit.go), and the Host and Origin checks against
// DNS rebinding and cross-site requests (guard.go).
package httpx

import (
	"encoding/json"
	"net/http"
	"time"
)

// ErrorBody is the JSON of every error reply (stable: fields may be added,
// never renamed). Agent, BreakerKey, State and OpenUntil are set for
// agent_unavailable; Index names the offending task of a batch.
type ErrorBody struct {
	Code       string     `json:"code"`
	Error      string     `json:"error"`
	Index      *int       `json:"index,omitempty"`
	Agent      string     `json:"agent,omitempty"`
	BreakerKey string     `json:"breaker_key,omitempty"`
	State      string     `json:"state,omitempty"`
	OpenUntil  *time.Time `json:"open_until,omitempty"`
	// Budget and ResetsAt are, for budget_exhausted, the budget that
	// refused the task and when it has room again.
	Budget   string     `json:"budget,omitempty"`
	Tenant   string     `json:"tenant,omitempty"`
	ResetsAt *time.Time `json:"resets_at,omitempty"`
}

// WriteJSON writes v as the JSON reply with status; replies are never
// cached (they describe live state).
func WriteJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("Cache-Control", "no-store")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}
