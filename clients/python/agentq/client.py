"""The synchronous client of agentq's HTTP API (standard library only)."""

import asyncio
import datetime
import errno
import functools
import http.client
import json
import os
import random
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

from . import errors
from ._types import Event, Result, State

DEFAULT_URL = "http://127.0.0.1:8080"
MAX_WAIT = 60.0  # the longest ?wait= the API accepts, in seconds
# The default bound of a reply body: the API's largest replies are a task
# with its result (an agent's output is at most 4 MiB, up to 6 times that
# once JSON-escaped) and its history, or a page of them.
MAX_REPLY_BYTES = 64 << 20
# The default bound of one event-stream line (and of one event's data): an
# event's live data is at most 64 KiB and its error text 8 KiB (escaped).
MAX_EVENT_BYTES = 1 << 20

# Every route of the API and the client method that serves it
# (tests/test_unit.py holds this table to api/openapi.yaml).
ROUTES = {
    ("POST", "/api/v1/tasks"): ("enqueue", "enqueue_batch"),
    ("GET", "/api/v1/tasks"): ("tasks", "iter_tasks"),
    ("GET", "/api/v1/tasks/{id}"): ("get", "wait", "result"),
    ("GET", "/api/v1/tasks/{id}/events"): ("events",),
    ("POST", "/api/v1/tasks/{id}/cancel"): ("cancel",),
    ("POST", "/api/v1/tasks/{id}/signals/{name}"): ("signal",),
    ("GET", "/api/v1/agents"): ("agents",),
    ("GET", "/api/v1/workers"): ("workers",),
    ("GET", "/api/v1/tenants"): ("tenants",),
    ("GET", "/api/v1/schedules"): ("schedules",),
    ("GET", "/api/v1/usage"): ("usage",),
    ("GET", "/api/v1/deadletters"): ("deadletters",),
    ("POST", "/api/v1/deadletters/{id}/requeue"): ("requeue",),
    ("POST", "/api/v1/queues/{name}/pause"): ("pause_queue",),
    ("POST", "/api/v1/queues/{name}/resume"): ("resume_queue",),
    ("GET", "/api/v1/openapi.yaml"): ("openapi",),
    ("GET", "/healthz"): ("health",),
    # Prometheus scrapes it (docs/http-api.md, "Metrics"): no client method.
    ("GET", "/metrics"): (),
}

# The fields of a task (TaskRequest), as enqueue's keyword arguments name
# them: "in" is a keyword of Python, so its argument is in_.
TASK_FIELDS = ("id", "agent", "action", "params", "correlation_id", "queue",
               "in", "deadline", "notify", "fail_if_unavailable", "tenant",
               "priority", "max_tokens", "max_cost_usd")


def go_duration(v):
    """A Go duration string from seconds (int, float), a timedelta or a
    string (passed as is)."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, datetime.timedelta):
        v = v.total_seconds()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("a duration is seconds, a timedelta or a Go duration string, not %r" % (v,))
    ms = int(round(v * 1000))
    return "%dms" % ms if ms % 1000 else "%ds" % (ms // 1000)


def _deadline(v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            raise ValueError("deadline: a datetime needs a time zone")
        return v.isoformat()
    return go_duration(v)


def task_request(agent, params=None, *, id=None, action=None, queue=None,
                 correlation_id=None, in_=None, deadline=None, notify=None,
                 fail_if_unavailable=None, tenant=None, priority=None,
                 max_tokens=None, max_cost_usd=None):
    """The JSON of one task (TaskRequest); unset fields are left out."""
    t = {"agent": agent}
    for k, v in (("id", id), ("action", action), ("params", params),
                 ("correlation_id", correlation_id), ("queue", queue),
                 ("in", go_duration(in_)), ("deadline", _deadline(deadline)),
                 ("notify", list(notify) if notify is not None else None),
                 ("fail_if_unavailable", fail_if_unavailable),
                 ("tenant", tenant), ("priority", priority),
                 ("max_tokens", max_tokens), ("max_cost_usd", max_cost_usd)):
        if v is not None:
            t[k] = v
    return t


def task_spec(t):
    """The JSON of a task given as a dict of TaskRequest fields (or a
    task_request(...)): ``in_`` named ``in``, ``in`` and ``deadline``
    converted as enqueue converts them."""
    t = dict(t)
    if "in_" in t:
        t["in"] = t.pop("in_")
    if "in" in t:
        t["in"] = go_duration(t["in"])
    if "deadline" in t:
        t["deadline"] = _deadline(t["deadline"])
    return t


def task_result(task):
    """The ``result`` of an ended task's JSON; TaskCanceled when it was
    canceled, TaskFailed when it ended any other way than succeeded."""
    state = task.get("state")
    if state == State.SUCCEEDED:
        return task.get("result")
    if state == State.CANCELED:
        raise errors.TaskCanceled(task)
    raise errors.TaskFailed(task)


class _Reply:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body


# ---- the steps of a method ----
#
# Each method of the API is written once, as a generator of steps that
# does no I/O itself: Client runs the steps with blocking I/O (urllib),
# AsyncClient (aio.py) on asyncio streams, so the two clients cannot differ
# in what they send, retry, wait for or raise. A step is one of:
#   _Req    one try of a request; the generator is sent its _Reply, or the
#           try's error (an AgentqError) is thrown into it. With stream set,
#           it is sent the open response, to read with _Line steps.
#   _Line   one line of an open stream (at most limit bytes; b"" at its
#           end); a dropped connection is thrown in as TransportError.
#   a float a pause of that many seconds.
#   _Item   a value handed to the caller of an iterating method.
# A generator's return value is its method's.


class _Req:
    __slots__ = ("method", "path", "query", "body", "headers", "idempotent", "timeout", "stream")

    def __init__(self, method, path, query=None, body=None, *, headers=None, idempotent=False,
                 timeout=None, stream=False):
        self.method, self.path, self.query, self.body = method, path, query, body
        self.headers, self.idempotent, self.timeout, self.stream = headers, idempotent, timeout, stream

    @property
    def what(self):
        return "%s %s" % (self.method, self.path)


class _Line:
    __slots__ = ("resp", "limit")

    def __init__(self, resp, limit):
        self.resp, self.limit = resp, limit


class _Item:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _op(fn):
    """A method written as a generator of steps (above): Client's method
    runs them with blocking I/O; ``method.op`` is the generator function
    AsyncClient runs on asyncio."""
    @functools.wraps(fn)
    def method(self, *a, **kw):
        return self._advance(fn(self, *a, **kw)).value
    method.op = fn
    return method


def _iter_op(fn):
    """An iterating method written as a generator of steps (above): Client's
    method is an iterator of its _Items."""
    @functools.wraps(fn)
    def method(self, *a, **kw):
        gen = fn(self, *a, **kw)
        try:
            while True:
                step = self._advance(gen)
                if not isinstance(step, _Item):
                    return
                yield step.value
        finally:
            gen.close()  # a stream left early closes its connection now
    method.op = fn
    return method


# ---- replies and errors, for both clients ----

def _transport_error(what, e):
    """The TransportError of a request that got no HTTP answer, naming its
    cause: the errno names of a refused or reset connection (ECONNREFUSED,
    ECONNRESET, …), "timed out" for a timeout."""
    cause = getattr(e, "reason", e)
    if isinstance(cause, (socket.timeout, asyncio.TimeoutError)):
        text = "timed out"
    else:
        text = str(cause) or type(cause).__name__
        codes = []
        for n in [getattr(cause, "errno", None)] + [int(m) for m in re.findall(r"\[Errno (\d+)\]", text)]:
            name = errno.errorcode.get(n) if isinstance(n, int) else None
            if name and name not in codes:
                codes.append(name)
        if codes:
            text = "%s: %s" % (", ".join(codes), text)
    err = errors.TransportError("%s: %s" % (what, text))
    err.__cause__ = e
    return err


def _parse(headers, raw):
    """A reply body: its JSON when the reply says it is JSON, else text."""
    ctype = (headers.get("Content-Type") or "") if headers else ""
    if "json" in ctype:
        try:
            return json.loads(raw or b"null")
        except ValueError:
            pass
    return raw.decode("utf-8", "replace")


def _answer(method, url, status, headers, raw):
    """The _Reply of an HTTP answer, or the error it is: RedirectRefused
    for a 3xx (never followed), the typed APIError for a 4xx or 5xx."""
    if 300 <= status < 400:
        raise errors.RedirectRefused(method, url, status, headers.get("Location"))
    parsed = _parse(headers, raw)
    if status >= 400:
        raise errors.from_reply(status, parsed, _retry_after(headers))
    return _Reply(status, headers, Result.wrap(parsed))


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Fails every redirect with RedirectRefused instead of following it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        fp.close()
        raise errors.RedirectRefused(req.get_method(), req.full_url, code, newurl)


_OPENER = urllib.request.build_opener(_RefuseRedirects)


def _read(resp, limit, what):
    """The body of resp, at most limit bytes (ResponseTooLarge past it)."""
    try:
        n = int(resp.headers.get("Content-Length"))
    except (TypeError, ValueError):
        n = -1
    raw = resp.read(limit + 1) if n <= limit else None
    if raw is None or len(raw) > limit:
        raise errors.ResponseTooLarge(what, limit)
    return raw


def _error_body(e, limit, what):
    """The body of the error reply e (an HTTPError), at most limit bytes
    (none read for a 3xx the redirect handler passed on: 300, 304, a
    redirect without a Location)."""
    with e:
        return b"" if 300 <= e.code < 400 else _read(e, limit, what)


def _retry_after(headers):
    try:
        return float(headers.get("Retry-After"))
    except (TypeError, ValueError):
        return None


_TRANSPORT = (urllib.error.URLError, OSError, ValueError, http.client.HTTPException)


class Client:
    """A client of agentq's HTTP API.

    ``url`` defaults to $AGENTQ_URL or http://127.0.0.1:8080, ``token`` to
    $AGENTQ_API_TOKEN. ``timeout`` bounds every call (seconds; a wait adds
    its long poll). Idempotent calls (reads, and an enqueue whose tasks all
    have an id) are retried ``retries`` times with exponential backoff from
    ``backoff`` seconds on a connection error and on 503 ``unavailable``;
    the others are never retried.

    A redirect is never followed (RedirectRefused: the token would go with
    it, and a POST would become a GET). A reply body longer than
    ``max_reply_bytes`` (default MAX_REPLY_BYTES, 64 MiB) is
    ResponseTooLarge, an event-stream line or event longer than
    ``max_event_bytes`` (default MAX_EVENT_BYTES, 1 MiB) EventTooLarge;
    neither is retried.
    """

    def __init__(self, url=None, token=None, *, timeout=10.0, retries=4, backoff=0.2,
                 max_reply_bytes=MAX_REPLY_BYTES, max_event_bytes=MAX_EVENT_BYTES):
        self.url = (url or os.environ.get("AGENTQ_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("AGENTQ_API_TOKEN") or None
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_reply_bytes = max_reply_bytes
        self.max_event_bytes = max_event_bytes

    def __repr__(self):
        return "Client(%r)" % (self.url,)

    # ---- requests, for both clients ----

    def _prepare(self, req):
        """The URL, body bytes (None: no body) and headers of req."""
        url = self.url + req.path
        if req.query:
            q = {k: v for k, v in req.query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        data = None if req.body is None else json.dumps(req.body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        headers.update(req.headers or {})
        return url, data, headers

    def _attempts(self, req):
        """The steps of req retried as the client retries (see Client): a
        connection error or 503 of an idempotent request, with backoff."""
        attempt = 0
        while True:
            try:
                return (yield req)
            except (errors.TransportError, errors.Unavailable) as e:
                if not req.idempotent or attempt >= self.retries:
                    raise
                yield self._backoff(attempt, e)
                attempt += 1

    def _backoff(self, attempt, err=None):
        """The pause before try attempt+1: exponential from backoff, at least
        the reply's Retry-After (up to 30 s), at most 10 s, jittered."""
        d = self.backoff * (2 ** attempt)
        ra = getattr(err, "retry_after", None)
        if ra:
            d = max(d, min(ra, 30.0))
        return min(d, 10.0) * (0.5 + random.random() / 2)

    def _request(self, method, path, query=None, body=None, *, idempotent=False, timeout=None):
        """The steps of one call: its _Reply's body."""
        reply = yield from self._attempts(_Req(method, path, query, body, idempotent=idempotent, timeout=timeout))
        return reply.body

    # ---- blocking I/O ----

    def _advance(self, gen):
        """Runs gen's steps with blocking I/O up to its next _Item (returned)
        or its end (its StopIteration returned: .value is its value)."""
        value, send = None, gen.send
        while True:
            try:
                step = send(value)
            except StopIteration as stop:
                return stop
            if isinstance(step, _Item):
                return step
            value, send = None, gen.send
            try:
                value = self._perform(step)
            except errors.AgentqError as e:
                value, send = e, gen.throw

    def _perform(self, step):
        if isinstance(step, _Line):
            try:
                return step.resp.readline(step.limit)
            except _TRANSPORT as e:
                raise _transport_error("reading the event stream", e) from e
        if not isinstance(step, _Req):
            time.sleep(step)
            return None
        return self._open_stream(step) if step.stream else self._once(step)

    def _open(self, req):
        url, data, headers = self._prepare(req)
        r = urllib.request.Request(url, data=data, method=req.method, headers=headers)
        return _OPENER.open(r, timeout=req.timeout or self.timeout)

    def _once(self, req):
        """One try of req: its _Reply, or the typed error."""
        try:
            with self._open(req) as resp:
                raw = _read(resp, self.max_reply_bytes, req.what)
                status, headers = resp.status, resp.headers
        except urllib.error.HTTPError as e:
            raw = _error_body(e, self.max_reply_bytes, req.what)
            status, headers = e.code, e.headers
        except _TRANSPORT as e:
            raise _transport_error(req.what, e) from e
        return _answer(req.method, self.url + req.path, status, headers, raw)

    def _open_stream(self, req):
        """req's open response (to read lines of), or the typed error."""
        try:
            return self._open(req)
        except urllib.error.HTTPError as e:
            raw = _error_body(e, self.max_reply_bytes, req.what)
            _answer(req.method, self.url + req.path, e.code, e.headers, raw)
            raise errors.TransportError("%s: HTTP %d" % (req.what, e.code)) from e
        except _TRANSPORT as e:
            raise _transport_error(req.what, e) from e

    @staticmethod
    def _path(fmt, id):
        if not id:
            raise ValueError("an id is required")
        return fmt % urllib.parse.quote(str(id), safe="")

    # ---- tasks ----

    @_op
    def enqueue(self, agent, params=None, *, id=None, action=None, queue=None,
                correlation_id=None, in_=None, deadline=None, notify=None,
                fail_if_unavailable=None, tenant=None, priority=None,
                max_tokens=None, max_cost_usd=None):
        """Enqueue one task. Returns ``{"id", "created", "duplicate",
        "state"}`` (and the existing ``task`` when ``duplicate``).

        With an ``id`` the call is retried on a connection error or 503:
        a try whose write landed makes the next one answer ``duplicate``, so
        the task is created once. Without one, it is never retried (each try
        would create a new task)."""
        body = task_request(agent, params, id=id, action=action, queue=queue,
                            correlation_id=correlation_id, in_=in_, deadline=deadline,
                            notify=notify, fail_if_unavailable=fail_if_unavailable,
                            tenant=tenant, priority=priority, max_tokens=max_tokens,
                            max_cost_usd=max_cost_usd)
        return (yield from self._request("POST", "/api/v1/tasks", body=body, idempotent=bool(id)))

    @_op
    def enqueue_batch(self, tasks, *, fail_if_unavailable=None):
        """Enqueue a batch (at most 1000): each task a dict of TaskRequest
        fields (or a task_request(...)). Returns ``{"results", "created",
        "duplicates", "failed"}``. Retried like enqueue when every task has
        an id."""
        tasks = [task_spec(t) for t in tasks]
        body = {"tasks": tasks}
        if fail_if_unavailable is not None:
            body["fail_if_unavailable"] = fail_if_unavailable
        return (yield from self._request("POST", "/api/v1/tasks", body=body,
                                         idempotent=all(t.get("id") for t in tasks)))

    @_op
    def get(self, id):
        """The task JSON (state; what holds it while it waits, ``waiting_for``,
        ``waiting_detail``, ``next_attempt_at``; attempts, history, result
        once succeeded)."""
        return (yield from self._request("GET", self._path("/api/v1/tasks/%s", id), idempotent=True))

    @_op
    def wait(self, id, timeout=None):
        """Wait for the task to end (succeeded, dead_lettered, canceled) and
        return its JSON (``result``, ``error_class``, ``error``, ``reason``).
        Long-polls ``?wait=`` (at most 60 s a call) until then; ``timeout``
        (seconds, None: no limit) raises WaitTimeout carrying the last view."""
        path = self._path("/api/v1/tasks/%s", id)
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT if end is None else min(MAX_WAIT, end - time.monotonic())
            left = max(0.0, float(int(left * 1000)) / 1000)
            t0 = time.monotonic()
            q = {"wait": go_duration(left)} if left > 0 else None
            task = yield from self._request("GET", path, q, idempotent=True, timeout=self.timeout + left)
            if task.get("state") in State.ENDED:
                return task
            if end is not None and time.monotonic() >= end:
                raise errors.WaitTimeout(id, task)
            if time.monotonic() - t0 < min(left, 1.0) * 0.9:
                # A server without long polls answered at once: poll gently.
                yield min(0.5, max(0.0, left))

    @_op
    def result(self, id, timeout=None):
        """Wait for the task to end (as wait does) and return its
        ``result``. A dead-lettered task raises TaskFailed (``error_class``,
        ``reason``, ``error``, ``task_id``, ``state``), a canceled one
        TaskCanceled; ``timeout`` raises WaitTimeout as wait does."""
        task = yield from Client.wait.op(self, id, timeout)
        return task_result(task)

    @_iter_op
    def events(self, id, after=None, *, timeout=None):
        """Iterate the task's events, oldest first: each a dict with its
        ``event`` name and ``seq`` (``data`` for progress and output). Ends
        after the terminal event (succeeded, dead_lettered, task_canceled).
        A dropped connection is resumed after the last event seen
        (Last-Event-ID), so no event is lost or repeated. ``after`` starts
        after that seq; ``timeout`` (seconds) bounds the whole stream
        (WaitTimeout)."""
        s = _EventStream(self, id, after, timeout)
        while True:
            try:
                resp = yield s.request()
            except (errors.TransportError, errors.Unavailable) as e:
                yield s.refused(e)
                continue
            try:
                while True:
                    ev = s.read((yield _Line(resp, self.max_event_bytes + 2)))
                    if ev is not None:
                        yield _Item(ev)
                        if ev.get("event") in Event.TERMINAL:
                            return
            except errors.TransportError:
                pass  # dropped: resume after the last event seen
            finally:
                resp.close()
            yield s.ended()

    @_op
    def cancel(self, id, reason=None):
        """Cancel the task. Returns ``{"id", "state", "previous_state",
        "removed", "stopping", "reason"}``; TaskEnded (``.state``) when it has
        already ended. Not retried (a retry could meet its own cancel)."""
        body = {"reason": reason} if reason is not None else None
        return (yield from self._request("POST", self._path("/api/v1/tasks/%s/cancel", id), body=body))

    @_op
    def signal(self, id, name, data=None):
        """Send the signal ``name`` (1-128 of A-Z a-z 0-9 . _ : -) with
        ``data`` (any JSON value, at most 64 KiB; None: null) to the task.
        Returns ``{"id", "name", "state", "resumed", "duplicate"}``:
        ``resumed`` when the task was waiting for this signal and now runs,
        ``duplicate`` when the task already had a signal of that name (the
        first is kept; use a new name per wait, e.g. "approve-2"). A signal
        the task is not waiting for yet is kept until it waits for it.
        NotFound (no such task), TaskEnded (``.state``), InvalidSignal (a bad
        name or data), SignalCap (the task has 64 signals) and
        RequestTooLarge (data over 64 KiB) are typed. Retried on a
        connection error or 503: a try that landed makes the next one a
        duplicate, which still resumes a task waiting for it."""
        if not name:
            raise ValueError("a signal name is required")
        path = self._path("/api/v1/tasks/%s", id) + "/signals/" + urllib.parse.quote(str(name), safe="")
        return (yield from self._request("POST", path, body=data, idempotent=True))

    # ---- task listings, queues ----

    @_op
    def tasks(self, *, queue=None, state=None, agent=None, tenant=None, correlation_id=None,
              limit=None, cursor=None):
        """A page of waiting and running tasks: ``{"tasks", "next_cursor"}``.
        ``state``: a state or a list of them (pending, active, scheduled,
        retrying, deferred, restarting, waiting). Each task is its record without
        history, with ``listed_as``. Pass ``next_cursor`` as ``cursor`` for
        the next page; ``""`` when the listing is complete (a page may be
        short, even empty, before that)."""
        if isinstance(state, (list, tuple)):
            state = ",".join(state)
        q = {"queue": queue, "state": state, "agent": agent, "tenant": tenant,
             "correlation_id": correlation_id, "limit": limit, "cursor": cursor}
        return (yield from self._request("GET", "/api/v1/tasks", q, idempotent=True))

    @_iter_op
    def iter_tasks(self, *, page=100, **filters):
        """Every task the filters (those of ``tasks``) select, page by page."""
        cursor = None
        while True:
            p = yield from Client.tasks.op(self, limit=page, cursor=cursor, **filters)
            for t in p["tasks"]:
                yield _Item(t)
            cursor = p["next_cursor"]
            if not cursor:
                return

    @_op
    def pause_queue(self, name):
        """Pause a queue (its tasks are held, none starts): ``{"queue",
        "paused", "changed"}``; NotFound for an unknown queue."""
        return (yield from self._request("POST", self._path("/api/v1/queues/%s/pause", name), idempotent=True))

    @_op
    def resume_queue(self, name):
        """Resume a paused queue: ``{"queue", "paused", "changed"}``."""
        return (yield from self._request("POST", self._path("/api/v1/queues/%s/resume", name), idempotent=True))

    # ---- dead letters, agents ----

    @_op
    def deadletters(self, limit=None, offset=None, *, agent=None, error_class=None):
        """A page of dead letters, newest first: ``{"deadletters", "total",
        "limit", "offset"}``."""
        q = {"limit": limit, "offset": offset, "agent": agent, "class": error_class}
        return (yield from self._request("GET", "/api/v1/deadletters", q, idempotent=True))

    @_iter_op
    def iter_deadletters(self, *, agent=None, error_class=None, page=100):
        """Every dead letter the filters select, page by page."""
        offset = 0
        while True:
            p = yield from Client.deadletters.op(self, page, offset, agent=agent, error_class=error_class)
            for d in p["deadletters"]:
                yield _Item(d)
            offset += len(p["deadletters"])
            if not p["deadletters"] or offset >= p["total"]:
                return

    @_op
    def requeue(self, id, run=None, *, fresh=None):
        """Requeue a dead letter as a fresh run: ``{"id", "state",
        "deadletter"}``. ``run``: the run the caller saw (another is
        Conflict). ``fresh=True`` deletes the steps the task recorded first
        (they are kept otherwise, and the new run skips their work). Not
        retried."""
        body = {k: v for k, v in (("run", run), ("fresh", fresh)) if v is not None} or None
        return (yield from self._request("POST", self._path("/api/v1/deadletters/%s/requeue", id), body=body))

    @_op
    def agents(self):
        """The configured agents with their breaker (a list)."""
        return (yield from self._request("GET", "/api/v1/agents", idempotent=True))["agents"]

    @_op
    def workers(self):
        """The worker processes of the registry (a list, live ones first):
        ``id``, ``host``, ``pid``, ``version``, ``queues``, ``concurrency``,
        ``started``, ``last_heartbeat``, ``state`` (``alive`` or ``gone``),
        ``tasks`` in flight (a gone worker's ``orphaned`` ones with
        ``recovery_from``/``recovery_by``)."""
        return (yield from self._request("GET", "/api/v1/workers", idempotent=True))["workers"]

    @_op
    def tenants(self, queue=None):
        """The tenants of each queue (of ``queue`` only, when given), by
        queue then tenant (a list): ``queue``, ``tenant`` (``""`` is the
        default tenant), ``pending`` (and ``pending_by_priority``),
        ``in_flight``, ``concurrency`` (its cap, 0 = none), ``weight``,
        ``capped`` and ``oldest_waiting`` (RFC 3339, absent when none
        waits)."""
        return (yield from self._request("GET", "/api/v1/tenants", {"queue": queue}, idempotent=True))["tenants"]

    @_op
    def schedules(self):
        """The configured schedules (a list): ``name``, ``cron``,
        ``timezone``, ``agent``, ``next_fire``, ``last_fire``,
        ``last_task_id`` and ``last_task_state``."""
        return (yield from self._request("GET", "/api/v1/schedules", idempotent=True))["schedules"]

    @_op
    def usage(self, by=None, since=None):
        """The fleet's token usage and cost over the window ``since`` (a
        duration such as ``"24h"``; default 24h), grouped ``by`` agent
        (default), tenant or model: ``{"by", "from", "to", "total",
        "groups", "hours"}``; each group has ``key``, ``input_tokens``,
        ``output_tokens``, ``cached_tokens``, ``total_tokens``,
        ``cost_usd`` and ``attempts``; ``hours`` are the per-hour totals."""
        q = {"by": by, "since": since}
        return (yield from self._request("GET", "/api/v1/usage", q, idempotent=True))

    @_op
    def health(self):
        """``{"status": "ok", "redis": "ok"}``; Unavailable when Redis does not answer."""
        return (yield from self._request("GET", "/healthz", idempotent=True))

    @_op
    def openapi(self):
        """The API's OpenAPI document (YAML text)."""
        return (yield from self._request("GET", "/api/v1/openapi.yaml", idempotent=True))


class _EventStream:
    """What events() decides, for both clients: each connection's request
    (Last-Event-ID: the last event seen), its events, when to try again
    (connection errors and 503s, with backoff) and when to give up."""

    def __init__(self, client, id, after, timeout):
        self.client = client
        self.id = id
        self.path = client._path("/api/v1/tasks/%s/events", id)
        self.end = None if timeout is None else time.monotonic() + timeout
        self.last = after
        self.failures = 0
        self.parser = None
        self.progressed = False

    def request(self):
        """The next connection's request (its timeout bounds each read);
        WaitTimeout once the stream's timeout has passed."""
        headers = {"Accept": "text/event-stream"}
        if self.last is not None:
            headers["Last-Event-ID"] = str(self.last)
        read_timeout = 90.0
        if self.end is not None:
            left = self.end - time.monotonic()
            if left <= 0:
                raise errors.WaitTimeout(self.id)
            read_timeout = min(read_timeout, left)
        self.parser = _SSEParser(self.client.max_event_bytes)
        self.progressed = False
        return _Req("GET", self.path, headers=headers, timeout=read_timeout, stream=True)

    def refused(self, err):
        """The pause before trying again after a connection that failed
        (a TransportError or Unavailable), or err once retries are spent."""
        if self.failures >= self.client.retries:
            raise err
        self.failures += 1
        return self.client._backoff(self.failures - 1, err)

    def read(self, line):
        """The event line completes (None: none; TransportError at the
        stream's end, EventTooLarge for a line too long)."""
        if not line:
            raise errors.TransportError("GET %s: the stream ended" % self.path)
        if self.end is not None and time.monotonic() >= self.end:
            raise errors.WaitTimeout(self.id)  # keep-alive comments never let a read time out
        if len(line.rstrip(b"\r\n")) > self.client.max_event_bytes:
            raise errors.EventTooLarge("GET %s: an event-stream line" % self.path, self.client.max_event_bytes)
        ev = self.parser.feed(line)
        if ev is not None:
            self.progressed = True
            self.failures = 0
            if ev.get("seq") is not None:
                self.last = ev["seq"]
        return ev

    def ended(self):
        """The pause before resuming a stream that ended before its
        terminal event; WaitTimeout past the timeout, TransportError when
        streams keep ending without an event."""
        if self.end is not None and time.monotonic() >= self.end:
            raise errors.WaitTimeout(self.id)
        if self.progressed:
            return 0.0
        if self.failures >= self.client.retries + 4:
            raise errors.TransportError("GET %s: the stream keeps ending without events" % self.path)
        self.failures += 1
        return self.client._backoff(min(self.failures - 1, 4))


class _SSEParser:
    """Server-Sent Events, a line at a time (see parse_sse)."""

    def __init__(self, max_event_bytes=None):
        self.max = max_event_bytes
        self.name, self.data, self.eid, self.size = None, [], None, 0

    def feed(self, raw):
        """The event the line raw (bytes or str) completes, or None."""
        # "replace": a byte that is not UTF-8 must never wedge the stream
        # (a strict decode failed on the same event after every reconnect).
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if line == "":
            ev = _sse_event(self.name, "\n".join(self.data), self.eid) if self.data else None
            self.name, self.data, self.eid, self.size = None, [], None, 0
            return ev
        self.size += len(raw)
        if self.max is not None and self.size > self.max:
            raise errors.EventTooLarge("an event", self.max)
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self.name = value
        elif field == "data":
            self.data.append(value)
        elif field == "id":
            self.eid = value
        return None


def parse_sse(lines, max_event_bytes=None):
    """Parse Server-Sent Events from an iterable of byte (or str) lines:
    yields each event's JSON data with ``event`` (the SSE event name, or
    the data's own) and ``seq`` (from ``id:``) filled in. An event whose
    data lines together pass max_event_bytes (None: no bound) is
    EventTooLarge."""
    p = _SSEParser(max_event_bytes)
    for raw in lines:
        ev = p.feed(raw)
        if ev is not None:
            yield ev


def _sse_event(name, data, eid):
    try:
        v = json.loads(data)
    except ValueError:
        v = {"data": data}
    if not isinstance(v, dict):
        v = {"data": v}
    if name and not v.get("event"):
        v["event"] = name
    if eid is not None and v.get("seq") is None:
        try:
            v["seq"] = int(eid)
        except ValueError:
            pass
    return Result.wrap(v)
