"""Named constants of agentq's HTTP API and the dict type results come in."""


class Result(dict):
    """A JSON object of the API, as a dict with the API's field names, whose
    keys are also readable as attributes: ``task["state"] == task.state``.
    A missing key reads as None."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            if name.startswith("__"):
                raise AttributeError(name)
            return None

    @classmethod
    def wrap(cls, v):
        if isinstance(v, dict) and not isinstance(v, cls):
            return cls((k, cls.wrap(x)) for k, x in v.items())
        if isinstance(v, list):
            return [cls.wrap(x) for x in v]
        return v


class State:
    """A task's state (the task JSON's ``state``)."""

    PENDING = "pending"
    SCHEDULED = "scheduled"
    ACTIVE = "active"
    RETRYING = "retrying"
    DEFERRED = "deferred"
    RESTARTING = "restarting"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    DEAD_LETTERED = "dead_lettered"
    CANCELED = "canceled"
    ENDED = frozenset({SUCCEEDED, DEAD_LETTERED, CANCELED})


class Priority:
    """A task's priority (``priority``): it orders a tenant's own tasks."""

    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class ErrorClass:
    """The classifier's error classes (``error_class``)."""

    NETWORK_TRANSIENT = "network_transient"
    NETWORK_PERMANENT = "network_permanent"
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    PROVIDER_ERROR = "provider_error"
    CONTEXT_LENGTH = "context_length"
    INVALID_REQUEST = "invalid_request"
    NOT_SUPPORTED = "not_supported"
    LOGIC_ERROR = "logic_error"
    CANCELED = "canceled"


class ClassifiedBy:
    """What decided a failure's class (``classified_by``), strongest first."""

    RULE = "rule"
    STRUCTURE = "structure"
    STATUS = "status"
    TEXT = "text"
    MODEL = "model"
    DEFAULT = "default"


class WaitKind:
    """What a suspended task waits for (a wait's ``kind``)."""

    SLEEP = "sleep"
    UNTIL = "until"
    SIGNAL = "signal"
    CHILDREN = "children"


class WaitingFor:
    """What holds a waiting task (the task JSON's ``waiting_for``; absent
    when nothing does). ``waiting_detail`` says which one, as text, and
    ``next_attempt_at`` (RFC 3339) when its next attempt or run is due."""

    BUDGET = "budget"
    BREAKER = "breaker"
    LIMIT = "limit"
    TENANT_CAP = "tenant_cap"
    QUEUE_PAUSED = "queue_paused"
    SIGNAL = "signal"
    CHILDREN = "children"
    SLEEP = "sleep"
    RETRY = "retry"
    RESTART = "restart"
    SCHEDULE = "schedule"


class ResumedBy:
    """What resumed a waiting task (the ``resumed`` event's ``by``)."""

    TIMER = "timer"
    SIGNAL = "signal"
    TIMEOUT = "timeout"
    CHILDREN = "children"


class Reason:
    """Why a task was dead-lettered (a dead letter's ``reason``)."""

    NOT_RETRYABLE = "not_retryable"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    RESTARTS_EXHAUSTED = "restarts_exhausted"
    RESTART_NOT_ENABLED = "restart_not_enabled"
    RESTART_QUEUE_FULL = "restart_queue_full"
    INVALID_PAYLOAD = "invalid_payload"
    UNKNOWN_AGENT = "unknown_agent"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    BUDGET_EXHAUSTED = "budget_exhausted"


class Event:
    """Event names (an event's ``event``; the SSE ``event:`` field)."""

    QUEUED = "queued"
    SCHEDULED = "scheduled"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRYING = "retrying"
    DEFERRED = "deferred"
    RESTARTING = "restarting"
    DEAD_LETTERED = "dead_lettered"
    REQUEUED = "requeued"
    INTERRUPTED = "interrupted"
    TASK_CANCELED = "task_canceled"
    PROGRESS = "progress"
    OUTPUT = "output"
    OUTPUT_TRUNCATED = "output_truncated"
    HISTORY_ELIDED = "history_elided"
    STEP = "step"
    WAITING = "waiting"
    RESUMED = "resumed"
    SIGNAL = "signal"
    # The events that end a task's stream.
    TERMINAL = frozenset({SUCCEEDED, DEAD_LETTERED, TASK_CANCELED})
