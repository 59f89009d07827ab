"""agentq: a client of agentq's HTTP API (Client, AsyncClient) and helpers
for exec agents (agentq.agent). Standard library only; Python 3.9+."""

from ._types import ClassifiedBy, ErrorClass, Event, Priority, Reason, Result, ResumedBy, State, WaitingFor, WaitKind
from .aio import AsyncClient
from .client import (MAX_EVENT_BYTES, MAX_REPLY_BYTES, ROUTES, TASK_FIELDS, Client, go_duration,
                     parse_sse, task_request, task_result, task_spec)
from .errors import (AgentqError, AgentUnavailable, APIError, BudgetExhausted, Conflict, Forbidden,
                     EventTooLarge, Internal, InvalidRequest, InvalidSignal, SignalCap, MethodNotAllowed, NotFound,
                     RedirectRefused, RequestTooLarge, ResponseTooLarge, TaskEnded, TooManyRequests, TransportError,
                     Unauthorized, Unavailable, OverCapacity, UnsupportedMediaType, WaitTimeout,
                     TaskFailed, TaskCanceled, WebhookVerificationError)
from .webhook import verify_webhook

__version__ = "1.0.0"

__all__ = [
    "Client", "AsyncClient", "State", "Priority", "ErrorClass", "ClassifiedBy", "Reason", "Event", "Result", "WaitKind", "ResumedBy", "WaitingFor",
    "ROUTES", "TASK_FIELDS", "MAX_REPLY_BYTES", "MAX_EVENT_BYTES", "go_duration", "parse_sse", "task_request",
    "task_spec", "InvalidSignal", "SignalCap",
    "AgentqError", "APIError", "TransportError", "WaitTimeout", "InvalidRequest",
    "Unauthorized", "Forbidden", "NotFound", "MethodNotAllowed", "AgentUnavailable",
    "BudgetExhausted", "TaskEnded", "Conflict", "RequestTooLarge", "UnsupportedMediaType",
    "TooManyRequests", "Internal", "Unavailable", "OverCapacity", "RedirectRefused", "ResponseTooLarge",
    "EventTooLarge", "TaskFailed", "TaskCanceled", "WebhookVerificationError", "verify_webhook",
    "task_result", "__version__",
]
