"""Typed errors: one class per API error ``code`` (the JSON error body's)."""


class AgentqError(Exception):
    """Base of every error this package raises."""


class TransportError(AgentqError):
    """The request did not get an HTTP answer (connection refused or reset,
    a timeout). For an enqueue it may have landed: retry with the same id."""


class RedirectRefused(AgentqError):
    """The server answered a redirect (3xx), which the client never follows:
    the token would go with it to wherever ``location`` points, and a POST
    would become a GET. ``status``, ``method``, ``url`` (the request's) and
    ``location`` (the Location header, None without one). Not retried: point
    the client's url at the API itself."""

    def __init__(self, method, url, status, location):
        super().__init__(
            "%s %s: the server answered %d redirecting to %s; agentq clients do not follow "
            "redirects (the bearer token and a POST's body would go with them): set the "
            "client's url to the API's own address" % (method, url, status, location or "(no Location)"))
        self.method, self.url, self.status, self.location = method, url, status, location


class ResponseTooLarge(AgentqError):
    """A reply body longer than the client's ``max_reply_bytes``; ``limit``
    is that bound. Not retried: the same reply would come again."""

    def __init__(self, what, limit, option="max_reply_bytes"):
        super().__init__("%s: more than %d bytes, the client's %s (raise it to read this)"
                         % (what, limit, option))
        self.limit = limit


class EventTooLarge(ResponseTooLarge):
    """An event stream line (or event) longer than the client's
    ``max_event_bytes``. Not retried: a reconnect would meet it again."""

    def __init__(self, what, limit):
        super().__init__(what, limit, "max_event_bytes")


class WaitTimeout(AgentqError, TimeoutError):
    """wait() gave up before the task ended; ``task`` is the last view."""

    def __init__(self, task_id, task=None):
        super().__init__("task %r has not ended yet" % (task_id,))
        self.task = task


class TaskFailed(AgentqError):
    """result() of a task that ended without succeeding (dead-lettered):
    ``task_id``, ``state``, ``error_class``, ``reason`` (why it was
    dead-lettered), ``error`` (the last error text) and the whole ``task``."""

    def __init__(self, task):
        self.task = task
        self.task_id = task.get("id")
        self.state = task.get("state")
        self.error_class = task.get("error_class") or None
        self.reason = task.get("reason") or None
        self.error = task.get("error") or None
        super().__init__("task %r %s: %s%s" % (
            self.task_id, self.state, self.error_class or "no error class",
            ": " + self.error if self.error else ""))


class TaskCanceled(AgentqError):
    """result() of a task that was canceled: ``task_id``, ``state``,
    ``reason`` (the cancel's reason, None without one) and the whole
    ``task``."""

    def __init__(self, task):
        self.task = task
        self.task_id = task.get("id")
        self.state = task.get("state")
        self.reason = task.get("cancel_reason") or None
        super().__init__("task %r was canceled%s" % (
            self.task_id, ": " + self.reason if self.reason else ""))


class WebhookVerificationError(AgentqError):
    """verify_webhook() refused a delivery: a header missing or malformed,
    a timestamp outside the tolerance, no signature that matches, or a body
    that is not JSON. Answer it with a 4xx; never act on the body."""


class APIError(AgentqError):
    """An error reply of the API: ``status`` (HTTP), ``code`` (stable),
    ``message`` and the whole JSON ``body``. ``retry_after`` is the
    Retry-After header in seconds when there was one."""

    code = None

    def __init__(self, status, code, message, body=None, retry_after=None):
        super().__init__("%s (%d %s)" % (message, status, code))
        self.status = status
        self.code = code
        self.message = message
        self.body = body if isinstance(body, dict) else {}
        self.retry_after = retry_after


class InvalidRequest(APIError):
    code = "invalid_request"


class InvalidSignal(InvalidRequest):
    """A signal's name (1-128 of A-Z a-z 0-9 . _ : -) or data is not valid
    (400). An InvalidRequest."""

    code = "invalid_signal"


class Unauthorized(APIError):
    code = "unauthorized"


class Forbidden(APIError):
    code = "forbidden"


class NotFound(APIError):
    code = "not_found"


class MethodNotAllowed(APIError):
    code = "method_not_allowed"


class AgentUnavailable(APIError):
    """fail_if_unavailable and the agent's breaker is open; body has
    agent, breaker_key, state, open_until."""

    code = "agent_unavailable"


class BudgetExhausted(APIError):
    """fail_if_unavailable and the task's tenant or agent budget has no room
    left; body has budget, tenant, agent, resets_at (Retry-After too)."""

    code = "budget_exhausted"

    @property
    def budget(self):
        return self.body.get("budget")

    @property
    def resets_at(self):
        return self.body.get("resets_at")


class TaskEnded(APIError):
    """Cancel of (or a signal to) a task that has already ended; ``state``
    says how."""

    code = "task_ended"

    @property
    def state(self):
        return self.body.get("state")


class Conflict(APIError):
    code = "conflict"


class SignalCap(Conflict):
    """The task has as many signals as it may keep (64): no new name is
    accepted (409). A Conflict."""

    code = "signal_cap"


class RequestTooLarge(APIError):
    code = "request_too_large"


class UnsupportedMediaType(APIError):
    code = "unsupported_media_type"


class TooManyRequests(APIError):
    code = "too_many_requests"


class Internal(APIError):
    code = "internal"


class Unavailable(APIError):
    """Redis did not answer (503). An enqueue that got it may have landed."""

    code = "unavailable"


class OverCapacity(Unavailable):
    """The server holds as many waits and event streams as it allows, for
    this client address or in all (503 with Retry-After). An Unavailable:
    it is retried the same way."""

    code = "over_capacity"


ERRORS = {c.code: c for c in (
    InvalidRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed,
    AgentUnavailable, BudgetExhausted, TaskEnded, Conflict, RequestTooLarge,
    InvalidSignal, SignalCap,
    UnsupportedMediaType, TooManyRequests, Internal, Unavailable, OverCapacity)}


def from_reply(status, body, retry_after=None):
    """The typed error for an error reply (an unknown code: APIError)."""
    code = body.get("code") if isinstance(body, dict) else None
    msg = body.get("error") if isinstance(body, dict) else None
    if not msg:
        msg = body if isinstance(body, str) and body else "HTTP %d" % status
    if not code:
        code = {400: "invalid_request", 401: "unauthorized", 403: "forbidden",
                404: "not_found", 405: "method_not_allowed", 413: "request_too_large",
                415: "unsupported_media_type", 429: "too_many_requests",
                500: "internal", 503: "unavailable"}.get(status, "http_%d" % status)
    cls = ERRORS.get(code, APIError)
    return cls(status, code, msg, body, retry_after)
