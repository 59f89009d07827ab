"""agentq: a client of agentq's HTTP API (Client, AsyncClient) and helpers
for exec agents (agentq.agent). Standard library only; Python 3.9+."""

from ._types import ErrorClass, Event, Priority, Reason, Result, State
from .aio import AsyncClient
from .client import ROUTES, TASK_FIELDS, Client, go_duration, parse_sse, task_request
from .errors import (AgentqError, AgentUnavailable, APIError, BudgetExhausted, Conflict, Forbidden,
                     Internal, InvalidRequest, MethodNotAllowed, NotFound,
                     RequestTooLarge, TaskEnded, TooManyRequests, TransportError,
                     Unauthorized, Unavailable, UnsupportedMediaType, WaitTimeout)

__version__ = "1.0.0"

__all__ = [
    "Client", "AsyncClient", "State", "Priority", "ErrorClass", "Reason", "Event", "Result",
    "ROUTES", "TASK_FIELDS", "go_duration", "parse_sse", "task_request",
    "AgentqError", "APIError", "TransportError", "WaitTimeout", "InvalidRequest",
    "Unauthorized", "Forbidden", "NotFound", "MethodNotAllowed", "AgentUnavailable",
    "BudgetExhausted", "TaskEnded", "Conflict", "RequestTooLarge", "UnsupportedMediaType",
    "TooManyRequests", "Internal", "Unavailable", "__version__",
]
