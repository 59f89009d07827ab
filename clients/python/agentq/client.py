"""The synchronous client of agentq's HTTP API (standard library only)."""

import datetime
import http.client
import json
import os
import random
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


def _error_body(e, method, limit, what):
    """The body of the error reply e (an HTTPError), at most limit bytes;
    RedirectRefused for a 3xx the redirect handler passed on (300, 304, a
    redirect without a Location)."""
    with e:
        if 300 <= e.code < 400:
            raise errors.RedirectRefused(method, e.filename, e.code, e.headers.get("Location"))
        return _read(e, limit, what)


def _lines(resp, limit, what):
    """The lines of resp, each at most limit bytes (EventTooLarge past it)."""
    while True:
        line = resp.readline(limit + 2)
        if not line:
            return
        if len(line.rstrip(b"\r\n")) > limit:
            raise errors.EventTooLarge(what + ": an event-stream line", limit)
        yield line


def _retry_after(headers):
    try:
        return float(headers.get("Retry-After"))
    except (TypeError, ValueError):
        return None


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

    # ---- transport ----

    def _open(self, method, path, query=None, body=None, headers=None, timeout=None):
        url = self.url + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        return _OPENER.open(req, timeout=timeout or self.timeout)

    def _once(self, method, path, query=None, body=None, timeout=None):
        what = "%s %s" % (method, path)
        try:
            with self._open(method, path, query, body, timeout=timeout) as resp:
                raw = _read(resp, self.max_reply_bytes, what)
                status, headers = resp.status, resp.headers
        except urllib.error.HTTPError as e:
            raw = _error_body(e, method, self.max_reply_bytes, what)
            status, headers = e.code, e.headers
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
            raise errors.TransportError("%s: %s" % (what, getattr(e, "reason", e))) from e
        ctype = (headers.get("Content-Type") or "") if headers else ""
        if "json" in ctype:
            try:
                parsed = json.loads(raw or b"null")
            except ValueError:
                parsed = raw.decode("utf-8", "replace")
        else:
            parsed = raw.decode("utf-8", "replace")
        if status >= 400:
            raise errors.from_reply(status, parsed, _retry_after(headers))
        return _Reply(status, headers, Result.wrap(parsed))

    def _pause(self, attempt, err=None):
        d = self.backoff * (2 ** attempt)
        ra = getattr(err, "retry_after", None)
        if ra:
            d = max(d, min(ra, 30.0))
        time.sleep(min(d, 10.0) * (0.5 + random.random() / 2))

    def _call(self, method, path, query=None, body=None, *, idempotent=False, timeout=None):
        attempt = 0
        while True:
            try:
                return self._once(method, path, query, body, timeout)
            except (errors.TransportError, errors.Unavailable) as e:
                if not idempotent or attempt >= self.retries:
                    raise
                self._pause(attempt, e)
                attempt += 1

    @staticmethod
    def _path(fmt, id):
        if not id:
            raise ValueError("an id is required")
        return fmt % urllib.parse.quote(str(id), safe="")

    # ---- tasks ----

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
        return self._call("POST", "/api/v1/tasks", body=body, idempotent=bool(id)).body

    def enqueue_batch(self, tasks, *, fail_if_unavailable=None):
        """Enqueue a batch (at most 1000): each task a dict of TaskRequest
        fields (or a task_request(...)). Returns ``{"results", "created",
        "duplicates", "failed"}``. Retried like enqueue when every task has
        an id."""
        tasks = [task_spec(t) for t in tasks]
        body = {"tasks": tasks}
        if fail_if_unavailable is not None:
            body["fail_if_unavailable"] = fail_if_unavailable
        return self._call("POST", "/api/v1/tasks", body=body,
                          idempotent=all(t.get("id") for t in tasks)).body

    def get(self, id):
        """The task JSON (state; what holds it while it waits, ``waiting_for``,
        ``waiting_detail``, ``next_attempt_at``; attempts, history, result
        once succeeded)."""
        return self._call("GET", self._path("/api/v1/tasks/%s", id), idempotent=True).body

    def _get_wait(self, id, secs):
        q = {"wait": go_duration(secs)} if secs > 0 else None
        return self._call("GET", self._path("/api/v1/tasks/%s", id), q,
                          idempotent=True, timeout=self.timeout + secs).body

    def wait(self, id, timeout=None):
        """Wait for the task to end (succeeded, dead_lettered, canceled) and
        return its JSON (``result``, ``error_class``, ``error``, ``reason``).
        Long-polls ``?wait=`` (at most 60 s a call) until then; ``timeout``
        (seconds, None: no limit) raises WaitTimeout carrying the last view."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT if end is None else min(MAX_WAIT, end - time.monotonic())
            left = max(0.0, float(int(left * 1000)) / 1000)
            t0 = time.monotonic()
            task = self._get_wait(id, left)
            if task.get("state") in State.ENDED:
                return task
            if end is not None and time.monotonic() >= end:
                raise errors.WaitTimeout(id, task)
            if time.monotonic() - t0 < min(left, 1.0) * 0.9:
                # A server without long polls answered at once: poll gently.
                time.sleep(min(0.5, max(0.0, left)))

    def result(self, id, timeout=None):
        """Wait for the task to end (as wait does) and return its
        ``result``. A dead-lettered task raises TaskFailed (``error_class``,
        ``reason``, ``error``, ``task_id``, ``state``), a canceled one
        TaskCanceled; ``timeout`` raises WaitTimeout as wait does."""
        task = self.wait(id, timeout)
        return task_result(task)

    def events(self, id, after=None, *, timeout=None):
        """Iterate the task's events, oldest first: each a dict with its
        ``event`` name and ``seq`` (``data`` for progress and output). Ends
        after the terminal event (succeeded, dead_lettered, task_canceled).
        A dropped connection is resumed after the last event seen
        (Last-Event-ID), so no event is lost or repeated. ``after`` starts
        after that seq; ``timeout`` (seconds) bounds the whole stream
        (WaitTimeout)."""
        return _events(self, id, after, timeout)

    def cancel(self, id, reason=None):
        """Cancel the task. Returns ``{"id", "state", "previous_state",
        "removed", "stopping", "reason"}``; TaskEnded (``.state``) when it has
        already ended. Not retried (a retry could meet its own cancel)."""
        body = {"reason": reason} if reason is not None else None
        return self._call("POST", self._path("/api/v1/tasks/%s/cancel", id), body=body).body

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
        return self._call("POST", path, body=data, idempotent=True).body

    # ---- task listings, queues ----

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
        return self._call("GET", "/api/v1/tasks", q, idempotent=True).body

    def iter_tasks(self, *, page=100, **filters):
        """Every task the filters (those of ``tasks``) select, page by page."""
        cursor = None
        while True:
            p = self.tasks(limit=page, cursor=cursor, **filters)
            for t in p["tasks"]:
                yield t
            cursor = p["next_cursor"]
            if not cursor:
                return

    def pause_queue(self, name):
        """Pause a queue (its tasks are held, none starts): ``{"queue",
        "paused", "changed"}``; NotFound for an unknown queue."""
        return self._call("POST", self._path("/api/v1/queues/%s/pause", name), idempotent=True).body

    def resume_queue(self, name):
        """Resume a paused queue: ``{"queue", "paused", "changed"}``."""
        return self._call("POST", self._path("/api/v1/queues/%s/resume", name), idempotent=True).body

    # ---- dead letters, agents ----

    def deadletters(self, limit=None, offset=None, *, agent=None, error_class=None):
        """A page of dead letters, newest first: ``{"deadletters", "total",
        "limit", "offset"}``."""
        q = {"limit": limit, "offset": offset, "agent": agent, "class": error_class}
        return self._call("GET", "/api/v1/deadletters", q, idempotent=True).body

    def iter_deadletters(self, *, agent=None, error_class=None, page=100):
        """Every dead letter the filters select, page by page."""
        offset = 0
        while True:
            p = self.deadletters(page, offset, agent=agent, error_class=error_class)
            for d in p["deadletters"]:
                yield d
            offset += len(p["deadletters"])
            if not p["deadletters"] or offset >= p["total"]:
                return

    def requeue(self, id, run=None, *, fresh=None):
        """Requeue a dead letter as a fresh run: ``{"id", "state",
        "deadletter"}``. ``run``: the run the caller saw (another is
        Conflict). ``fresh=True`` deletes the steps the task recorded first
        (they are kept otherwise, and the new run skips their work). Not
        retried."""
        body = {k: v for k, v in (("run", run), ("fresh", fresh)) if v is not None} or None
        return self._call("POST", self._path("/api/v1/deadletters/%s/requeue", id), body=body).body

    def agents(self):
        """The configured agents with their breaker (a list)."""
        return self._call("GET", "/api/v1/agents", idempotent=True).body["agents"]

    def workers(self):
        """The worker processes of the registry (a list, live ones first):
        ``id``, ``host``, ``pid``, ``version``, ``queues``, ``concurrency``,
        ``started``, ``last_heartbeat``, ``state`` (``alive`` or ``gone``),
        ``tasks`` in flight (a gone worker's ``orphaned`` ones with
        ``recovery_from``/``recovery_by``)."""
        return self._call("GET", "/api/v1/workers", idempotent=True).body["workers"]

    def tenants(self, queue=None):
        """The tenants of each queue (of ``queue`` only, when given), by
        queue then tenant (a list): ``queue``, ``tenant`` (``""`` is the
        default tenant), ``pending`` (and ``pending_by_priority``),
        ``in_flight``, ``concurrency`` (its cap, 0 = none), ``weight``,
        ``capped`` and ``oldest_waiting`` (RFC 3339, absent when none
        waits)."""
        return self._call("GET", "/api/v1/tenants", {"queue": queue}, idempotent=True).body["tenants"]

    def schedules(self):
        """The configured schedules (a list): ``name``, ``cron``,
        ``timezone``, ``agent``, ``next_fire``, ``last_fire``,
        ``last_task_id`` and ``last_task_state``."""
        return self._call("GET", "/api/v1/schedules", idempotent=True).body["schedules"]

    def usage(self, by=None, since=None):
        """The fleet's token usage and cost over the window ``since`` (a
        duration such as ``"24h"``; default 24h), grouped ``by`` agent
        (default), tenant or model: ``{"by", "from", "to", "total",
        "groups", "hours"}``; each group has ``key``, ``input_tokens``,
        ``output_tokens``, ``cached_tokens``, ``total_tokens``,
        ``cost_usd`` and ``attempts``; ``hours`` are the per-hour totals."""
        q = {"by": by, "since": since}
        return self._call("GET", "/api/v1/usage", q, idempotent=True).body

    def health(self):
        """``{"status": "ok", "redis": "ok"}``; Unavailable when Redis does not answer."""
        return self._call("GET", "/healthz", idempotent=True).body

    def openapi(self):
        """The API's OpenAPI document (YAML text)."""
        return self._call("GET", "/api/v1/openapi.yaml", idempotent=True).body


def _events(client, id, after, timeout):
    path = client._path("/api/v1/tasks/%s/events", id)
    end = None if timeout is None else time.monotonic() + timeout
    last = after
    failures = 0
    while True:
        headers = {"Accept": "text/event-stream"}
        if last is not None:
            headers["Last-Event-ID"] = str(last)
        read_timeout = 90.0
        if end is not None:
            left = end - time.monotonic()
            if left <= 0:
                raise errors.WaitTimeout(id)
            read_timeout = min(read_timeout, left)
        try:
            resp = client._open("GET", path, headers=headers, timeout=read_timeout)
        except urllib.error.HTTPError as e:
            raw = _error_body(e, "GET", client.max_reply_bytes, "GET " + path)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            err = errors.from_reply(e.code, body, _retry_after(e.headers))
            if not isinstance(err, errors.Unavailable) or failures >= client.retries:
                raise err from None
            client._pause(failures, err)
            failures += 1
            continue
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
            if failures >= client.retries:
                raise errors.TransportError("GET %s: %s" % (path, getattr(e, "reason", e))) from e
            client._pause(failures)
            failures += 1
            continue
        progressed = False
        try:
            lines = _lines(resp, client.max_event_bytes, "GET " + path)
            for ev in parse_sse(lines, client.max_event_bytes):
                progressed = True
                failures = 0
                if ev.get("seq") is not None:
                    last = ev["seq"]
                yield ev
                if ev.get("event") in Event.TERMINAL:
                    return
        except (OSError, ValueError, http.client.HTTPException):
            pass  # dropped: resume after the last event seen
        finally:
            resp.close()
        if end is not None and time.monotonic() >= end:
            raise errors.WaitTimeout(id)
        if not progressed:
            if failures >= client.retries + 4:
                raise errors.TransportError("GET %s: the stream keeps ending without events" % path)
            client._pause(min(failures, 4))
            failures += 1


def parse_sse(lines, max_event_bytes=None):
    """Parse Server-Sent Events from an iterable of byte (or str) lines:
    yields each event's JSON data with ``event`` (the SSE event name, or
    the data's own) and ``seq`` (from ``id:``) filled in. An event whose
    data lines together pass max_event_bytes (None: no bound) is
    EventTooLarge."""
    name, data, eid, size = None, [], None, 0
    for raw in lines:
        # "replace": a byte that is not UTF-8 must never wedge the stream
        # (a strict decode failed on the same event after every reconnect).
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if line == "":
            if data:
                yield _sse_event(name, "\n".join(data), eid)
            name, data, eid, size = None, [], None, 0
            continue
        size += len(raw)
        if max_event_bytes is not None and size > max_event_bytes:
            raise errors.EventTooLarge("an event", max_event_bytes)
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            eid = value


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
