package worker

import "github.com/agentq/agentq/internal/delivery"

// Dead-letter reasons a delivery gives (stable strings; see
// internal/delivery).
const (
	ReasonInvalidPayload    = delivery.ReasonInvalidPayload
	ReasonUnknownAgent      = delivery.ReasonUnknownAgent
	ReasonNotRetryable      = delivery.ReasonNotRetryable
	ReasonAttemptsExhausted = delivery.ReasonAttemptsExhausted
	ReasonDeadlineExceeded  = delivery.ReasonDeadlineExceeded
	ReasonBudgetExhausted   = delivery.ReasonBudgetExhausted
)

// FailpointEnv names the environment variable of the crash test hooks
// (see internal/delivery).
const FailpointEnv = delivery.FailpointEnv
