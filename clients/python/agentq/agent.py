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

``run`` reads the request, calls the handler and writes its return value as
``{"status": "success", "data": ...}``. An exception becomes ``{"status":
"error", "code": C, "error": "Type: message"}``: C is the exception's HTTP
status when it carries one (``status_code``/``status``, as the OpenAI,
Anthropic and httpx exceptions do, or AgentError's ``code``), else 0 and the
worker's classifier reads the text (``TimeoutError``, ``ConnectionRefusedError``,
"rate limit", ...). SIGTERM (a cancel, a timeout, the worker's shutdown)
raises Terminated in the handler; ``run`` then exits 143 without a traceback.
"""

import asyncio
import inspect
import json
import os
import signal
import sys
import threading

from ._types import Result

__all__ = ["run", "Request", "AgentError", "Terminated", "progress", "output",
           "emit", "handle_request", "StepResult"]


class AgentError(Exception):
    """A failure with an explicit code, read like an HTTP status by the
    classifier (400 invalid_request, 429 rate_limited, 501 not_supported,
    503 provider_error, 504 timeout, ...)."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code


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
    attempt, restart, traceparent) with the helpers of the call."""

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


def error_response(exc):
    """The ActionResponse of a failure."""
    name = type(exc).__name__
    mod = type(exc).__module__
    if mod not in ("builtins", __name__):
        name = mod.split(".")[0] + "." + name
    text = str(exc)
    return {"status": "error", "code": _status_of(exc),
            "error": name if not text else ("%s: %s" % (name, text) if not isinstance(exc, AgentError) else text)}


def handle_request(handler, raw):
    """The ActionResponse (a dict) for the request JSON ``raw``."""
    try:
        v = json.loads(raw or "{}")
        req = Request(Result.wrap(v) if isinstance(v, dict) else {})
    except ValueError as e:
        return {"status": "error", "code": 400, "error": "agentq.agent: the ActionRequest is not JSON: %s" % e}
    try:
        data = handler(req)
        resp = {"status": "success", "code": 0, "data": data}
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
