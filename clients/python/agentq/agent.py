"""Helpers for writing an exec agent in Python: the worker starts the program,
writes the ActionRequest on its stdin and reads one ActionResponse on its
stdout (docs/agents.md). ::

    from agentq.agent import run

    def handle(req):
        req.progress({"step": "fetching"})
        req.output("partial text")
        req.usage(input_tokens=812, output_tokens=40)
        plan = req.step("plan", lambda: call_model("plan"))  # skipped on a retry
        return {"answer": 42, "plan": plan}

    run(handle)

A handler may also end its attempt by waiting, holding no worker while it
waits (docs/agents.md#suspend-wait-without-holding-a-worker)::

    def handle(req):
        draft = req.step("draft", lambda: call_model("draft"))
        if "approve" not in req.signals:
            if req.wait and req.wait.timed_out:
                return {"draft": draft, "approved": False}
            suspend(signal="approve", timeout="24h")  # raises Suspend
        return {"draft": draft, "approved": req.signals["approve"]}

``run`` reads the request, calls the handler and writes its return value as
``{"status": "success", "data": ...}``. An exception becomes ``{"status":
"error", "code": C, "error": "Type: message"}``: C is the exception's HTTP
status when it carries one (``status_code``/``status``, as the OpenAI,
Anthropic and httpx exceptions do, or AgentError's ``code``), else 0 and the
worker's classifier reads the text (``TimeoutError``, ``ConnectionRefusedError``,
"rate limit", ...). When the exception carries the HTTP response (the OpenAI
and Anthropic SDKs' ``APIStatusError`` — ``RateLimitError`` among them —,
httpx's and requests' ``HTTPStatusError``/``HTTPError``: ``.response.headers``,
or ``.headers``), the reply also gets the response's back-pressure headers
(``headers``: Retry-After, retry-after-ms, x-should-retry, x-ratelimit-*,
anthropic-ratelimit-*; no other header leaves the agent) and the wait they
ask for (``retry_after``, seconds), so that the worker waits as long as the
provider asked, as for an HTTP agent (docs/agents.md). No SDK is imported:
the exception is read by its attributes. SIGTERM (a cancel, a timeout, the
worker's shutdown) raises Terminated in the handler; ``run`` then exits 143
without a traceback.
"""

import asyncio
import datetime
import email.utils
import inspect
import json
import math
import os
import signal
import sys
import threading

from ._types import Result
from .client import go_duration, task_spec

__all__ = ["run", "Request", "AgentError", "Terminated", "progress", "output",
           "emit", "handle_request", "StepResult", "Suspend", "suspend", "wait_spec"]


class AgentError(Exception):
    """A failure with an explicit code, read like an HTTP status by the
    classifier (400 invalid_request, 429 rate_limited, 501 not_supported,
    503 provider_error, 504 timeout, ...). ``retry_after`` (seconds, a
    timedelta, or an aware datetime) is how long the backend asked to wait
    before the next call, ``headers`` the backend reply's headers (only the
    back-pressure ones are sent)."""

    def __init__(self, message, code=0, *, retry_after=None, headers=None):
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after
        self.headers = headers


def _until(v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            raise ValueError("suspend: until needs a datetime with a time zone")
        return v.isoformat()
    if isinstance(v, str) and v:
        return v
    raise TypeError("suspend: until is a datetime or an RFC 3339 string, not %r" % (v,))


def wait_spec(sleep=None, until=None, signal=None, timeout=None, children=None, mode=None):
    """The wire JSON of a wait (the ``wait`` of a suspend reply): exactly one
    of ``sleep`` (seconds, a timedelta or a Go duration string such as
    "10m"), ``until`` (a datetime with a time zone, or RFC 3339 text),
    ``signal`` (a name, with an optional ``timeout``) or ``children`` (task
    specs as enqueue_batch takes them, with an optional ``name``; ``in``
    and ``fail_if_unavailable`` are refused; with ``mode`` "all" or "any"
    and an optional ``timeout``). Anything else is ValueError."""
    kinds = [k for k, v in (("sleep", sleep), ("until", until), ("signal", signal),
                            ("children", children)) if v is not None]
    if len(kinds) != 1:
        raise ValueError("suspend: give exactly one of sleep, until, signal, children (got %s)"
                         % (", ".join(kinds) or "none"))
    if timeout is not None and kinds[0] not in ("signal", "children"):
        raise ValueError("suspend: timeout goes with signal or children, not %s" % kinds[0])
    if mode is not None and kinds[0] != "children":
        raise ValueError("suspend: mode goes with children")
    if sleep is not None:
        return {"sleep": go_duration(sleep)}
    if until is not None:
        return {"until": _until(until)}
    w = {}
    if signal is not None:
        if not isinstance(signal, str) or not signal:
            raise ValueError("suspend: a signal name is required")
        w["signal"] = signal
    else:
        w["children"] = [task_spec(c) for c in children]
        for i, c in enumerate(w["children"], 1):
            refused = [k for k in ("in", "fail_if_unavailable") if k in c]
            if refused:
                raise ValueError("suspend: child %d: %s is not supported for a child" % (i, refused[0]))
        if mode is not None:
            if mode not in ("all", "any"):
                raise ValueError("suspend: mode is \"all\" or \"any\", not %r" % (mode,))
            w["mode"] = mode
    if timeout is not None:
        w["timeout"] = go_duration(timeout)
    return w


class Suspend(BaseException):
    """Ends the attempt with ``{"status": "suspend", "wait": ...}``: the task
    waits (state ``waiting``, no worker held) and runs again when the wait
    ends, with ``req.resume``, ``req.wait`` (``timed_out``), ``req.signals``
    and ``req.children`` telling what happened. Raise it (or return it)
    from the handler; ``suspend(...)`` raises one. The arguments are
    wait_spec's. A BaseException, as Terminated is: a handler's ``except
    Exception`` (logging, a fallback) does not swallow the suspend."""

    def __init__(self, **wait):
        self.wait = wait_spec(**wait)
        super().__init__("suspend: %s" % json.dumps(self.wait, separators=(",", ":")))


def suspend(*, sleep=None, until=None, signal=None, timeout=None, children=None, mode=None):
    """Suspend the task: raises Suspend, which ``run`` turns into the
    attempt's suspend reply. ``suspend(sleep="10m")``, ``suspend(until=dt)``,
    ``suspend(signal="approve", timeout="24h")``, ``suspend(children=[...],
    mode="all", timeout="1h")``. Steps recorded before it are kept."""
    raise Suspend(sleep=sleep, until=until, signal=signal, timeout=timeout, children=children, mode=mode)


class Terminated(BaseException):
    """Raised in the handler when the worker sends SIGTERM."""


_lock = threading.Lock()
_fd = None


def _events_fd():
    global _fd
    if _fd is None:
        try:
            _fd = int(os.environ.get("AGENTQ_EVENTS_FD", ""))
        except ValueError:
            _fd = -1
    return _fd


def emit(type, data, **more):
    """Write one live event ``{"type": type, "data": data}`` (and the members
    ``more``) to the fd named by AGENTQ_EVENTS_FD (a no-op when unset: run
    outside agentq, or a worker without live events). Returns whether it was
    written."""
    fd = _events_fd()
    if fd < 0:
        return False
    ev = {"type": type}
    ev.update(more)
    ev["data"] = data
    line = (json.dumps(ev, separators=(",", ":")) + "\n").encode()
    with _lock:
        try:
            while line:
                n = os.write(fd, line)
                line = line[n:]
        except OSError:
            return False
    return True


def progress(data):
    """A progress event (any JSON value) the task's callers see live."""
    return emit("progress", data)


def output(data):
    """A piece of partial output (text or any JSON value)."""
    return emit("output", data)


class StepResult:
    """What a step's function may return to report the step's usage with its
    data (``usage``: a number of tokens or a usage object, as
    Request.usage's)."""

    def __init__(self, data, usage=None):
        self.data = data
        self.usage = usage


def _record_step(name, v):
    usage = None
    if isinstance(v, StepResult):
        v, usage = v.data, v.usage
    more = {"name": name}
    if usage is not None:
        more["usage"] = usage
    emit("step", v, **more)
    return v


class Request(Result):
    """The ActionRequest (task_id, agent, action, params, correlation_id,
    attempt, restart, traceparent, steps, resume, wait, signals, children)
    with the helpers of the call."""

    @property
    def resume(self):
        """How many times the task has resumed from a wait (0 before the
        first resume; ``attempt`` counts from 1 again in every run)."""
        return self.get("resume") or 0

    @property
    def wait(self):
        """The wait that ended before this run (``kind``, ``timed_out``,
        ``signal``, ...), on every attempt of the resumed run; None on a
        task that has not resumed."""
        return self.get("wait")

    @property
    def signals(self):
        """Every signal the task has received so far: {name: data}."""
        return self.get("signals") or Result()

    @property
    def children(self):
        """The children of the last children wait, in spawn order: each
        ``id``, ``name``, ``state``, ``result``, ``error_class``,
        ``error`` (an empty list when none)."""
        return self.get("children") or []

    def suspend(self, **wait):
        """The module's suspend(...): raises Suspend."""
        suspend(**wait)

    def progress(self, data):
        return progress(data)

    def output(self, data):
        return output(data)

    def step(self, name, fn):
        """Run the step ``name``: when the task recorded it already (the
        request's ``steps``, from an earlier attempt), return its data without
        calling ``fn``; otherwise call ``fn()`` and record its result (return
        a StepResult to report the step's usage) as a step
        (``{"type":"step",...}`` on AGENTQ_EVENTS_FD), then return it.
        An async ``fn`` makes ``step`` return an awaitable: ``await
        req.step(name, afn)``. The worker records the step before the
        attempt's outcome; a later attempt skips it (docs/agents.md)."""
        done = self.get("steps") or {}
        is_async = asyncio.iscoroutinefunction(fn)
        if name in done:
            data = done[name]
            if is_async:
                async def kept():
                    return data
                return kept()
            return data
        v = fn()
        if inspect.isawaitable(v):
            async def recorded():
                return _record_step(name, await v)
            return recorded()
        return _record_step(name, v)

    def usage(self, total_tokens=None, *, input_tokens=None, output_tokens=None, **more):
        """Report the tokens the call used (the ActionResponse's ``usage``), on
        success or error: ``input_tokens`` (cached ones included),
        ``output_tokens``, and in ``more`` ``cached_tokens`` and ``model``
        (the worker prices it by its ``pricing``); a provider's usage object
        as it came may be passed as keywords too."""
        u = {k: v for k, v in (("total_tokens", total_tokens), ("input_tokens", input_tokens),
                               ("output_tokens", output_tokens)) if v is not None}
        u.update(more)
        self._usage = u


def _status_of(exc):
    for attr in ("code", "status_code", "status", "http_status"):
        v = getattr(exc, attr, None)
        if isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 599:
            return v
    resp = getattr(exc, "response", None)
    v = getattr(resp, "status_code", None)
    if isinstance(v, int) and 100 <= v <= 599:
        return v
    return 0


# The back-pressure headers the worker reads (Go: resilience.BackPressureHeader);
# an ActionResponse's headers keep only these.
_BACK_PRESSURE_NAMES = ("retry-after", "retry-after-ms", "x-should-retry")
_BACK_PRESSURE_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def back_pressure_header(name):
    """Whether the reply header ``name`` (any case) is one the worker reads
    for back-pressure: Retry-After, retry-after-ms, x-should-retry,
    x-ratelimit-* or anthropic-ratelimit-*."""
    n = name.lower()
    return n in _BACK_PRESSURE_NAMES or any(
        n.startswith(p) and len(n) > len(p) for p in _BACK_PRESSURE_PREFIXES)


def _header_items(h):
    """(name, value) pairs of a headers object: httpx.Headers, requests'
    CaseInsensitiveDict, aiohttp's CIMultiDict, email.message.Message (urllib),
    a dict, or a list of pairs; [] for anything else."""
    if h is None or isinstance(h, (str, bytes)):
        return []
    try:
        items = h.items() if callable(getattr(h, "items", None)) else h
        return [(k, v) for k, v in items]
    except (TypeError, ValueError):
        return []


def _text(v):
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return v if isinstance(v, str) else None


def headers_of(exc):
    """The back-pressure headers ({lower-case name: value}) of the HTTP
    response ``exc`` carries (``exc.response.headers``, else
    ``exc.headers``); {} when it carries none."""
    resp = getattr(exc, "response", None)
    for h in (getattr(resp, "headers", None), getattr(exc, "headers", None)):
        out = {}
        for k, v in _header_items(h):
            k, v = _text(k), _text(v)
            if k is not None and v is not None and back_pressure_header(k):
                out[k.lower()] = v
        if out:
            return out
    return {}


def _seconds(v):
    """A retry_after for the wire: seconds (a finite number ≥ 0, from a
    number, numeric text or a timedelta), or RFC 3339 text (from an aware
    datetime); None for anything else."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            return None
    if isinstance(v, (int, float)):
        return v if math.isfinite(v) and v >= 0 else None
    if isinstance(v, datetime.timedelta):
        return max(v.total_seconds(), 0)
    if isinstance(v, datetime.datetime):
        return v.isoformat() if v.tzinfo is not None else None
    return None


def retry_after_of(exc, headers):
    """How long the backend asked to wait, for the reply's retry_after:
    the exception's own ``retry_after`` when it has one (AgentError's, or
    an SDK's), else the headers' retry-after-ms, else their Retry-After
    (seconds, or an HTTP date as RFC 3339); None when nothing says."""
    own = _seconds(getattr(exc, "retry_after", None))
    if own is not None:
        return own
    ms = _seconds(headers.get("retry-after-ms", ""))
    if ms is not None:
        return ms / 1000
    ra = headers.get("retry-after", "")
    secs = _seconds(ra)
    if secs is not None:
        return secs
    try:
        return _seconds(email.utils.parsedate_to_datetime(ra.strip()))
    except (TypeError, ValueError, IndexError):
        return None


def error_response(exc):
    """The ActionResponse of a failure: its code, error text and, when the
    exception carries an HTTP response, the response's back-pressure
    (``headers``, ``retry_after``)."""
    name = type(exc).__name__
    mod = type(exc).__module__
    if mod not in ("builtins", __name__):
        name = mod.split(".")[0] + "." + name
    text = str(exc)
    resp = {"status": "error", "code": _status_of(exc),
            "error": name if not text else ("%s: %s" % (name, text) if not isinstance(exc, AgentError) else text)}
    headers = headers_of(exc)
    if headers:
        resp["headers"] = headers
    ra = retry_after_of(exc, headers)
    if ra is not None:
        resp["retry_after"] = ra
    return resp


def handle_request(handler, raw):
    """The ActionResponse (a dict) for the request JSON ``raw``."""
    try:
        v = json.loads(raw or "{}")
        req = Request(Result.wrap(v) if isinstance(v, dict) else {})
    except ValueError as e:
        return {"status": "error", "code": 400, "error": "agentq.agent: the ActionRequest is not JSON: %s" % e}
    try:
        data = handler(req)
        if isinstance(data, Suspend):
            raise data
        resp = {"status": "success", "code": 0, "data": data}
    except Suspend as s:
        resp = {"status": "suspend", "wait": s.wait}
    except Exception as e:  # noqa: BLE001 -- every failure is reported
        resp = error_response(e)
    u = getattr(req, "_usage", None)
    if u:
        resp["usage"] = u
    return resp


def _on_term(signum, frame):
    raise Terminated()


def run(handler, *, stdin=None, stdout=None):
    """Run ``handler(request)`` as an exec agent and exit: 0 once the
    ActionResponse is written, 143 on SIGTERM."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    try:
        signal.signal(signal.SIGTERM, _on_term)
    except ValueError:
        pass  # not the main thread
    try:
        raw = stdin.read()
        resp = handle_request(handler, raw)
        try:
            text = json.dumps(resp, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            text = json.dumps({"status": "error", "code": 0,
                               "error": "agentq.agent: the handler's result is not JSON: %s" % e})
        stdout.write(text + "\n")
        stdout.flush()
    except Terminated:
        try:
            sys.stderr.write("agentq.agent: terminated (SIGTERM)\n")
            sys.stderr.flush()
        finally:
            os._exit(143)
    sys.exit(0)
