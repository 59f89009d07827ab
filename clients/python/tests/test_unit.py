"""Unit tests of the agentq Python client against a fake server, and of the
exec-agent helpers with real subprocesses. Run:
python3 -m unittest discover -s clients/python/tests -p 'test_unit.py'"""

import asyncio
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)
sys.path.insert(0, HERE)

import agentq  # noqa: E402
from agentq import AsyncClient, Client, State  # noqa: E402
from fake import Fake, sse  # noqa: E402


def task(id, state, **kw):
    return dict({"id": id, "agent": "a", "action": "", "state": state, "attempts": 1,
                 "restarts": 0, "error_class": "", "error": "", "history": []}, **kw)


class FakeCase(unittest.TestCase):
    def fake(self, fn):
        f = Fake(fn)
        self.addCleanup(f.close)
        return f

    def client(self, f, token="tok", **kw):
        """The client under test of the Fake f (or a URL)."""
        kw.setdefault("backoff", 0.005)
        return Client(getattr(f, "url", f), token, **kw)


class TestClient(FakeCase):
    def test_enqueue_sends_fields_and_token(self):
        f = self.fake(lambda r: (202, {"id": "j1", "created": True, "duplicate": False, "state": "pending"}))
        r = self.client(f).enqueue("llm", {"q": 1}, id="j1", action="ask", queue="q", correlation_id="c",
                                   in_=90, deadline="10m", notify=["hook"], fail_if_unavailable=True,
                                   tenant="team-a", priority="high")
        self.assertEqual(r.id, "j1")
        self.assertEqual(r["state"], State.PENDING)
        req = f.requests[0]
        self.assertEqual(req.method, "POST")
        self.assertEqual(req.path, "/api/v1/tasks")
        self.assertEqual(req.headers["Authorization"], "Bearer tok")
        self.assertEqual(req.headers["Content-Type"], "application/json")
        self.assertEqual(req.body, {"agent": "llm", "params": {"q": 1}, "id": "j1", "action": "ask",
                                    "queue": "q", "correlation_id": "c", "in": "90s",
                                    "deadline": "10m", "notify": ["hook"], "fail_if_unavailable": True,
                                    "tenant": "team-a", "priority": "high"})

    def test_task_usage_reads_as_attributes(self):
        usage = {"input_tokens": 3006, "output_tokens": 350, "cached_tokens": 1920, "total_tokens": 3356,
                 "cost_usd": 0.008615, "priced": True}
        ev = {"event": "succeeded", "attempt": 2, "usage": {"model": "gpt-4o", "input_tokens": 2006,
                                                         "output_tokens": 300, "total_tokens": 2306}}
        f = self.fake(lambda r: (200, task("u1", "succeeded", usage=usage, history=[ev])))
        got = self.client(f).get("u1")
        self.assertEqual(got.usage.cost_usd, 0.008615)
        self.assertEqual(got.usage["cached_tokens"], 1920)
        self.assertEqual(got.history[0].usage.model, "gpt-4o")

    def test_token_from_environment(self):
        f = self.fake(lambda r: (200, {"status": "ok", "redis": "ok"}))
        os.environ["AGENTQ_API_TOKEN"] = "envtok"
        self.addCleanup(os.environ.pop, "AGENTQ_API_TOKEN")
        Client(f.url).health()
        self.assertEqual(f.requests[0].headers["Authorization"], "Bearer envtok")

    def test_typed_errors_carry_code(self):
        replies = {
            "/api/v1/tasks/x/cancel": (409, {"code": "task_ended", "error": "task x has ended", "state": "succeeded"}),
            "/api/v1/tasks/nope": (404, {"code": "not_found", "error": "no task"}),
            "/api/v1/tasks": (400, {"code": "invalid_request", "error": "agent: unknown"}),
            "/api/v1/deadletters/d/requeue": (409, {"code": "conflict", "error": "busy"}),
        }
        f = self.fake(lambda r: replies[r.path])
        c = self.client(f)
        with self.assertRaises(agentq.TaskEnded) as e:
            c.cancel("x", reason="bye")
        self.assertEqual((e.exception.status, e.exception.code, e.exception.state), (409, "task_ended", "succeeded"))
        self.assertEqual(f.requests[-1].body, {"reason": "bye"})
        with self.assertRaises(agentq.NotFound):
            c.get("nope")
        with self.assertRaises(agentq.InvalidRequest) as e:
            c.enqueue("zz")
        self.assertIn("agent: unknown", str(e.exception))
        with self.assertRaises(agentq.Conflict):
            c.requeue("d", run=2)
        self.assertEqual(f.requests[-1].body, {"run": 2})
        with self.assertRaises(agentq.Conflict):
            c.requeue("d", fresh=True)
        self.assertEqual(f.requests[-1].body, {"fresh": True})
        self.assertTrue(issubclass(agentq.Conflict, agentq.APIError))

    def test_503_retried_with_the_same_id(self):
        n = []

        def fn(r):
            n.append(r.body)
            if len(n) < 3:
                return 503, {"code": "unavailable", "error": "redis"}
            return 200, {"id": "j", "created": False, "duplicate": True, "state": "pending"}
        f = self.fake(fn)
        r = self.client(f).enqueue("llm", id="j")
        self.assertTrue(r.duplicate)
        self.assertEqual(len(n), 3)
        self.assertTrue(all(b["id"] == "j" for b in n))

    def test_enqueue_without_id_is_not_retried(self):
        f = self.fake(lambda r: (503, {"code": "unavailable", "error": "redis"}))
        with self.assertRaises(agentq.Unavailable):
            self.client(f).enqueue("llm")
        self.assertEqual(len(f.requests), 1)
        with self.assertRaises(agentq.Unavailable):
            self.client(f).enqueue_batch([{"agent": "a", "id": "1"}, {"agent": "a"}])
        self.assertEqual(len(f.requests), 2)

    def test_cancel_is_not_retried(self):
        f = self.fake(lambda r: (503, {"code": "unavailable", "error": "redis"}))
        with self.assertRaises(agentq.Unavailable):
            self.client(f).cancel("x")
        self.assertEqual(len(f.requests), 1)

    def test_batch_retried_when_every_task_has_an_id(self):
        n = []

        def fn(r):
            n.append(r.body)
            if len(n) < 2:
                return 503, {"code": "unavailable", "error": "redis"}
            return 202, {"results": [], "created": 2, "duplicates": 0, "failed": 0}
        f = self.fake(fn)
        r = self.client(f).enqueue_batch([{"agent": "a", "id": "1", "in_": 5}, {"agent": "a", "id": "2"}])
        self.assertEqual(r.created, 2)
        self.assertEqual(n[1]["tasks"][0], {"agent": "a", "id": "1", "in": "5s"})

    def test_connection_error_is_typed_and_retried_for_reads(self):
        f = self.fake(lambda r: (200, {}))
        url = f.url
        f.close()
        c = self.client(url, token=None, retries=2, backoff=0.001)
        t0 = time.monotonic()
        with self.assertRaises(agentq.TransportError) as e:
            c.get("x")
        self.assertLess(time.monotonic() - t0, 30)
        self.assertIn("ECONNREFUSED", str(e.exception))
        self.assertIn("GET /api/v1/tasks/x", str(e.exception))

    def test_wait_long_polls_until_ended(self):
        calls = []

        def fn(r):
            calls.append(r.query.get("wait"))
            if len(calls) < 3:
                return 200, task("w", "active")
            return 200, task("w", "succeeded", result={"ok": 1})
        f = self.fake(fn)
        t = self.client(f).wait("w")
        self.assertEqual(t.state, State.SUCCEEDED)
        self.assertEqual(t.result, {"ok": 1})
        self.assertEqual(calls, ["60s", "60s", "60s"])

    def test_wait_timeout(self):
        def fn(r):
            w = r.query.get("wait")
            if w:
                secs = float(w[:-2]) / 1000 if w.endswith("ms") else float(w[:-1])
                time.sleep(min(secs, 0.3))
            return 200, task("w", "retrying")
        f = self.fake(fn)
        with self.assertRaises(agentq.WaitTimeout) as e:
            self.client(f).wait("w", timeout=0.5)
        self.assertEqual(e.exception.task.state, State.RETRYING)
        self.assertIsInstance(e.exception, TimeoutError)
        for r in f.requests:
            self.assertLessEqual(float(re.sub(r"m?s$", "", r.query.get("wait", "0"))), 500)

    def test_events_resume_after_a_drop(self):
        evs = [(1, "queued", {}), (2, "progress", {"data": {"pct": 10}}), (3, "output", {"data": "hi"}),
               (4, "progress", {"data": {"pct": 90}}), (5, "succeeded", {})]
        seen_last = []

        def fn(r):
            last = r.headers.get("Last-Event-ID")
            seen_last.append(last)
            after = int(last) if last else 0
            rest = [e for e in evs if e[0] > after]
            # The first connection drops in the middle of its third event.
            return sse(rest, close_after=2 if len(seen_last) == 1 else None)
        f = self.fake(fn)
        got = list(self.client(f).events("t"))
        self.assertEqual([e.seq for e in got], [1, 2, 3, 4, 5])
        self.assertEqual([e.event for e in got], ["queued", "progress", "output", "progress", "succeeded"])
        self.assertEqual(got[2].data, "hi")
        self.assertEqual(seen_last, [None, "2"])
        self.assertEqual(f.requests[0].path, "/api/v1/tasks/t/events")
        self.assertEqual(f.requests[0].headers["Accept"], "text/event-stream")

    def test_events_arrive_live_over_chunked_encoding(self):
        import threading
        first_seen = threading.Event()

        def stream(h):
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()

            def chunk(b):
                h.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
                h.wfile.flush()
            chunk(b'id: 1\nevent: progress\ndata: {"seq":1,"event":"progress","data":1}\n\n')
            # The second event is sent only once the client has yielded the first.
            first_seen.wait(10)
            chunk(b'id: 2\nevent: succeeded\ndata: {"seq":2,"event":"succeeded"}\n\n')
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        f = self.fake(lambda r: stream)
        got = []
        for ev in self.client(f).events("t", timeout=20):
            got.append(ev.event)
            first_seen.set()
        self.assertEqual(got, ["progress", "succeeded"])
        self.assertEqual(len(f.requests), 1)

    def test_events_timeout_holds_under_keep_alives(self):
        def stream(h):
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Connection", "close")
            h.end_headers()
            try:
                h.wfile.write(b'id: 1\nevent: queued\ndata: {"seq":1,"event":"queued"}\n\n')
                for _ in range(200):  # 20 s of keep-alives, no end
                    h.wfile.write(b": keep-alive\n\n")
                    h.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            h.close_connection = True
        f = self.fake(lambda r: stream)
        got = []
        t0 = time.monotonic()
        with self.assertRaises(agentq.WaitTimeout):
            for ev in self.client(f).events("t", timeout=0.5):
                got.append(ev.seq)
        self.assertEqual(got, [1])
        self.assertLess(time.monotonic() - t0, 10, "the timeout bounds a stream that only keeps alive")

    def test_events_after(self):
        f = self.fake(lambda r: sse([(8, "task_canceled", {"reason": "x"}), (9, "never", {})]))
        got = list(self.client(f).events("t", after=7))
        self.assertEqual([(e.seq, e.event, e.reason) for e in got], [(8, "task_canceled", "x")])
        self.assertEqual(f.requests[0].headers["Last-Event-ID"], "7")

    def test_events_not_found(self):
        f = self.fake(lambda r: (404, {"code": "not_found", "error": "no task"}))
        with self.assertRaises(agentq.NotFound):
            list(self.client(f).events("t"))

    def test_parse_sse(self):
        lines = [b": comment\n", b"id: 3\n", b"event: output\n", b"data: {\"data\":\n", b"data: 1}\n", b"\n",
                 b"data: not json\r\n", b"\r\n"]
        got = list(agentq.parse_sse(lines))
        self.assertEqual(got, [{"data": 1, "event": "output", "seq": 3}, {"data": "not json"}])

    def test_over_capacity_is_unavailable(self):
        # serve's caps on waits and streams answer 503 over_capacity with
        # Retry-After; the client retries it as it retries unavailable.
        e = agentq.errors.from_reply(503, {"code": "over_capacity", "error": "full"}, 1.0)
        self.assertIsInstance(e, agentq.OverCapacity)
        self.assertIsInstance(e, agentq.Unavailable)
        self.assertEqual(e.retry_after, 1.0)

    def test_parse_sse_invalid_utf8_is_replaced(self):
        # A byte that is not UTF-8 used to raise on every reconnect, so the
        # stream could never get past that event.
        lines = [b"id: 1\n", b"data: {\"data\": \"a\xff\xfeb\"}\n", b"\n", b"id: 2\n", b"data: {\"data\": 2}\n", b"\n"]
        got = list(agentq.parse_sse(lines))
        self.assertEqual(got, [{"data": "a\ufffd\ufffdb", "seq": 1}, {"data": 2, "seq": 2}])

    def test_deadletters_query(self):
        f = self.fake(lambda r: (200, {"deadletters": [{"id": "d"}], "total": 1, "limit": 5, "offset": 0}))
        p = self.client(f).deadletters(5, agent="llm", error_class="timeout")
        self.assertEqual(p.deadletters[0].id, "d")
        self.assertEqual(f.requests[0].query, {"limit": "5", "agent": "llm", "class": "timeout"})
        self.assertEqual([d.id for d in self.client(f).iter_deadletters()], ["d"])

    def test_workers(self):
        w = {"id": "h:1:ab", "state": "gone", "orphaned": 1,
             "tasks": [{"id": "t", "agent": "llm", "orphaned": True, "recovery_by": "2026-03-01T12:00:00Z"}]}
        f = self.fake(lambda r: (200, {"workers": [w]}))
        got = self.client(f).workers()
        self.assertEqual(f.requests[0].path, "/api/v1/workers")
        self.assertEqual(f.requests[0].method, "GET")
        self.assertEqual(got[0].state, "gone")
        self.assertEqual(got[0].tasks[0].id, "t")
        self.assertTrue(got[0].tasks[0].orphaned)

    def test_usage(self):
        rep = {"by": "tenant", "total": {"total_tokens": 30, "cost_usd": 0.5},
               "groups": [{"by": "tenant", "key": "acme", "total_tokens": 30, "cost_usd": 0.5, "attempts": 2}],
               "hours": [{"hour": "2026-03-01T12:00:00Z", "total_tokens": 30}]}
        f = self.fake(lambda r: (200, rep))
        got = self.client(f).usage(by="tenant", since="2h")
        self.assertEqual(f.requests[0].path, "/api/v1/usage")
        self.assertEqual(f.requests[0].method, "GET")
        self.assertEqual(f.requests[0].query, {"by": "tenant", "since": "2h"})
        self.assertEqual(got["groups"][0]["key"], "acme")
        self.assertEqual(got["hours"][0]["total_tokens"], 30)
        self.client(f).usage()
        self.assertEqual(f.requests[1].query, {})

    def test_tasks_query_and_pages(self):
        pages = {None: {"tasks": [{"id": "a", "listed_as": "pending"}], "next_cursor": "c1"},
                 "c1": {"tasks": [{"id": "b", "listed_as": "pending"}], "next_cursor": ""}}
        f = self.fake(lambda r: (200, pages[r.query.get("cursor")]))
        p = self.client(f).tasks(queue="q", state=["retrying", "deferred"], correlation_id="o", limit=5)
        self.assertEqual(p["next_cursor"], "c1")
        self.assertEqual(f.requests[0].path, "/api/v1/tasks")
        self.assertEqual(f.requests[0].query, {"queue": "q", "state": "retrying,deferred", "correlation_id": "o", "limit": "5"})
        self.assertEqual([t["id"] for t in self.client(f).iter_tasks(agent="llm")], ["a", "b"])

    def test_pause_resume_queue(self):
        f = self.fake(lambda r: (200, {"queue": "a b", "paused": r.path.endswith("/pause"), "changed": True}))
        self.assertTrue(self.client(f).pause_queue("a b")["paused"])
        self.assertFalse(self.client(f).resume_queue("a b")["paused"])
        self.assertEqual([(r.method, r.path) for r in f.requests],
                         [("POST", "/api/v1/queues/a%20b/pause"), ("POST", "/api/v1/queues/a%20b/resume")])

    def test_tenants(self):
        tn = {"queue": "default", "tenant": "acme", "pending": 5, "pending_by_priority": {"normal": 5},
              "in_flight": 2, "concurrency": 2, "weight": 3, "capped": True, "oldest_waiting": "2026-03-01T12:00:00Z"}
        f = self.fake(lambda r: (200, {"tenants": [tn]}))
        got = self.client(f).tenants()
        self.assertEqual(f.requests[0].path, "/api/v1/tenants")
        self.assertEqual(f.requests[0].method, "GET")
        self.assertEqual(got[0].tenant, "acme")
        self.assertEqual(got[0].in_flight, 2)
        self.assertTrue(got[0].capped)
        self.client(f).tenants(queue="other")
        self.assertEqual(f.requests[1].query, {"queue": "other"})

    def test_schedules(self):
        f = self.fake(lambda r: (200, {"schedules": [{"name": "nightly", "cron": "30 1 * * *", "last_task_id": "sched:nightly:20261125T003000Z"}]}))
        got = self.client(f).schedules()
        self.assertEqual(got[0].name, "nightly")
        self.assertEqual(got[0].last_task_id, "sched:nightly:20261125T003000Z")
        self.assertEqual((f.requests[0].method, f.requests[0].path), ("GET", "/api/v1/schedules"))

    def test_ids_are_escaped(self):
        f = self.fake(lambda r: (200, task("a/b c", "pending")))
        self.client(f).get("a/b c")
        self.assertEqual(f.requests[0].path, "/api/v1/tasks/a%2Fb%20c")

    def test_durations(self):
        import datetime
        self.assertEqual(agentq.go_duration(1.5), "1500ms")
        self.assertEqual(agentq.go_duration(datetime.timedelta(minutes=2)), "120s")
        self.assertEqual(agentq.go_duration("5m"), "5m")


def big_sse_line(n):
    """A streamer sending one event-stream line of n bytes (in 64 KiB
    writes, Connection: close), then a terminal event."""
    def stream(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        try:
            h.wfile.write(b"id: 1\nevent: output\ndata: ")
            block = b"x" * 65536
            for _ in range(n // len(block)):
                h.wfile.write(block)
            h.wfile.write(b'\n\nid: 2\nevent: succeeded\ndata: {}\n\n')
        except OSError:
            pass  # the client went away: what it should do
        h.close_connection = True
    return stream


def streamed(status, body):
    """A streamer answering body without a Content-Length (Connection: close)."""
    def stream(h):
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        try:
            h.wfile.write(body)
        except OSError:
            pass
        h.close_connection = True
    return stream


class TestHostileServer(FakeCase):
    """Redirects are refused, replies and event lines bounded (issue #35)."""

    def test_redirects_are_refused_and_the_token_stays(self):
        other = self.fake(lambda r: (200, {"id": "elsewhere", "created": True, "state": "pending"}))
        for status in (301, 302, 303, 307, 308):
            for name, call in (("enqueue", lambda c: c.enqueue("llm", id="j")),
                               ("get", lambda c: c.get("j")),
                               ("events", lambda c: list(c.events("j")))):
                with self.subTest(status=status, call=name):
                    f = self.fake(lambda r: (status, {}, {"Location": other.url + r.path}))
                    with self.assertRaises(agentq.RedirectRefused) as cm:
                        call(self.client(f, token="sekrit-0123456789abcdef"))
                    self.assertEqual(cm.exception.status, status)
                    self.assertTrue(cm.exception.location.startswith(other.url), cm.exception.location)
                    self.assertIn(other.url, str(cm.exception))
                    self.assertNotIn("sekrit", str(cm.exception))
                    self.assertEqual(len(f.requests), 1, "a refused redirect is not retried")
        self.assertEqual(other.requests, [], "nothing, the token least of all, went to the other origin")

    def test_other_3xx_are_refused(self):
        for status, headers in ((300, {}), (302, {}), (304, {}), (305, {"Location": "http://127.0.0.1:1/"})):
            with self.subTest(status=status):
                f = self.fake(lambda r: (status, {}, headers))
                with self.assertRaises(agentq.RedirectRefused) as cm:
                    self.client(f).enqueue("llm", id="j")
                self.assertEqual(cm.exception.status, status)

    def test_reply_over_max_reply_bytes(self):
        body = json.dumps({"id": "t", "state": "succeeded", "result": "x" * 5000}).encode()
        for name, fn in (("content-length", lambda r: (200, json.loads(body))),
                         ("streamed", lambda r: streamed(200, body)),
                         ("error", lambda r: (503, {"code": "unavailable", "error": "x" * 5000}))):
            with self.subTest(reply=name):
                f = self.fake(fn)
                with self.assertRaises(agentq.ResponseTooLarge) as cm:
                    self.client(f, max_reply_bytes=4096).get("t")
                self.assertEqual(cm.exception.limit, 4096)
                self.assertIn("max_reply_bytes", str(cm.exception))
                self.assertEqual(len(f.requests), 1, "an oversized reply is not retried")
                self.assertEqual(self.client(f).get("t")["state"] if name != "error" else "succeeded",
                                 "succeeded", "the default bound reads it")

    def test_huge_event_line_fails_once(self):
        f = self.fake(lambda r: big_sse_line(16 << 20))
        with self.assertRaises(agentq.EventTooLarge) as cm:
            list(self.client(f).events("t", timeout=60))
        self.assertEqual(cm.exception.limit, agentq.MAX_EVENT_BYTES)
        self.assertIn("max_event_bytes", str(cm.exception))
        self.assertEqual(len(f.requests), 1, "an oversized line is not retried")
        # Under a raised bound the same stream reads.
        got = list(self.client(f, max_event_bytes=32 << 20).events("t", timeout=60))
        self.assertEqual([e.event for e in got], ["output", "succeeded"])

    def test_event_of_many_lines_is_bounded(self):
        lines = [b"data: " + b"x" * 100 + b"\n"] * 20 + [b"\n"]
        with self.assertRaises(agentq.EventTooLarge):
            list(agentq.parse_sse(lines, 1000))
        self.assertEqual(len(list(agentq.parse_sse(lines, 4000))), 1)

    def test_repr_hides_the_token(self):
        for c in (Client("http://127.0.0.1:1", "tok-secret-0123456789"),
                  AsyncClient("http://127.0.0.1:1", "tok-secret-0123456789")):
            self.assertNotIn("tok-secret", repr(c))
            self.assertNotIn("tok-secret", str(c))


class TestResult(FakeCase):
    def test_result_of_a_succeeded_task(self):
        f = self.fake(lambda r: (200, task("r1", "succeeded", result={"answer": 42})))
        self.assertEqual(self.client(f).result("r1", timeout=5), {"answer": 42})
        self.assertTrue(f.requests[0].query.get("wait"), "result long-polls as wait does")

    def test_result_of_a_dead_lettered_task_raises_task_failed(self):
        f = self.fake(lambda r: (200, task("r2", "dead_lettered", error_class="rate_limited",
                                           reason="retries_exhausted", error="HTTP 429: slow down")))
        with self.assertRaises(agentq.TaskFailed) as e:
            self.client(f).result("r2")
        err = e.exception
        self.assertIsInstance(err, agentq.AgentqError)
        self.assertEqual((err.task_id, err.state, err.error_class, err.reason, err.error),
                         ("r2", "dead_lettered", "rate_limited", "retries_exhausted", "HTTP 429: slow down"))
        self.assertEqual(err.task.id, "r2")
        self.assertIn("rate_limited", str(err))

    def test_result_of_a_canceled_task_raises_task_canceled(self):
        f = self.fake(lambda r: (200, task("r3", "canceled", cancel_reason="changed my mind")))
        with self.assertRaises(agentq.TaskCanceled) as e:
            self.client(f).result("r3")
        self.assertEqual((e.exception.task_id, e.exception.state, e.exception.reason),
                         ("r3", "canceled", "changed my mind"))
        self.assertNotIsInstance(e.exception, agentq.TaskFailed)

    def test_result_times_out_like_wait(self):
        f = self.fake(lambda r: (200, task("r4", "active")))
        with self.assertRaises(agentq.WaitTimeout) as e:
            self.client(f).result("r4", timeout=0)
        self.assertEqual(e.exception.task.state, State.ACTIVE)

    def test_async_result(self):
        f = self.fake(lambda r: (200, task("r5", "dead_lettered", error_class="logic_error", error="boom")))

        async def main():
            async with AsyncClient(f.url, "tok") as aq:
                await aq.result("r5", timeout=5)
        with self.assertRaises(agentq.TaskFailed) as e:
            asyncio.run(main())
        self.assertEqual(e.exception.error_class, "logic_error")


# The Standard Webhooks specification's example, which internal/webhook's
# Sign (the worker's signer) reproduces byte for byte.
VEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VEC_ID, VEC_TS, VEC_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
VEC_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def sign(secret, msg_id, ts, body):
    """What internal/webhook's Sign computes, written with the stdlib."""
    import base64
    import hashlib
    import hmac
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, b"%s.%d.%s" % (msg_id.encode(), ts, body), hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


class TestVerifyWebhook(unittest.TestCase):
    def headers(self, sig=VEC_SIG, ts=VEC_TS, msg_id=VEC_ID):
        return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig}

    def test_the_known_vector(self):
        self.assertEqual(sign(VEC_SECRET, VEC_ID, VEC_TS, VEC_BODY), VEC_SIG)
        got = agentq.verify_webhook(self.headers(), VEC_BODY, VEC_SECRET, now=VEC_TS + 10)
        self.assertEqual(got, {"test": 2432232314})

    def test_a_fresh_delivery_with_several_signatures_and_any_header_case(self):
        body = '{"type":"succeeded","task":{"id":"t1","state":"succeeded"}}'
        ts = int(time.time())
        good = sign(VEC_SECRET, "d1", ts, body.encode())
        h = {"Webhook-Id": "d1", "WEBHOOK-TIMESTAMP": str(ts),
             "Webhook-Signature": "v1,bm90IGl0 v2,whatever " + good}
        got = agentq.verify_webhook(h, body, VEC_SECRET)
        self.assertEqual(got.task.id, "t1")
        # http.client's headers (a Message) are read with .get too.
        import email.message
        m = email.message.Message()
        for k, v in h.items():
            m[k] = v
        self.assertEqual(agentq.verify_webhook(m, body.encode(), VEC_SECRET).type, "succeeded")

    def test_refusals(self):
        def refused(headers, body=VEC_BODY, secret=VEC_SECRET, **kw):
            kw.setdefault("now", VEC_TS)
            with self.assertRaises(agentq.WebhookVerificationError):
                agentq.verify_webhook(headers, body, secret, **kw)
        refused(self.headers(), body=b'{"test": 2432232315}')       # body changed
        refused(self.headers(msg_id="msg_other"))                    # id changed
        refused(self.headers(ts=VEC_TS + 1), now=VEC_TS + 1)         # timestamp changed
        refused(self.headers(), secret="whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB")  # other key
        refused(self.headers(sig="v2," + VEC_SIG[3:]))               # not v1
        refused(self.headers(sig=""))
        refused({"webhook-id": VEC_ID, "webhook-signature": VEC_SIG})  # no timestamp
        refused(self.headers(ts="16142653a0"))
        refused(self.headers(ts="1614265330\u00b2"))                 # a digit, not ASCII
        refused(self.headers(), now=VEC_TS + 301)                    # too old
        refused(self.headers(), now=VEC_TS - 301)                    # too far ahead
        refused(self.headers(), now=VEC_TS + 11, tolerance=10)

    def test_tolerance_and_secret(self):
        import datetime
        got = agentq.verify_webhook(self.headers(), VEC_BODY, VEC_SECRET, now=VEC_TS + 3600,
                                    tolerance=datetime.timedelta(hours=1))
        self.assertEqual(got["test"], 2432232314)
        # The prefix is optional; a secret that is not base64 is a ValueError.
        agentq.verify_webhook(self.headers(), VEC_BODY, VEC_SECRET[len("whsec_"):], now=VEC_TS)
        with self.assertRaises(ValueError):
            agentq.verify_webhook(self.headers(), VEC_BODY, "whsec_!!!", now=VEC_TS)

    def test_a_signed_body_that_is_not_json(self):
        sig = sign(VEC_SECRET, VEC_ID, VEC_TS, b"not json")
        with self.assertRaises(agentq.WebhookVerificationError):
            agentq.verify_webhook(self.headers(sig=sig), b"not json", VEC_SECRET, now=VEC_TS)


class TestAsync(FakeCase):
    def test_same_methods(self):
        sync = {m for m in dir(Client) if not m.startswith("_")}
        asyn = {m for m in dir(AsyncClient) if not m.startswith("_")}
        self.assertLessEqual(sync, asyn)

    def test_async_wait_and_events(self):
        evs = [(1, "queued", {}), (2, "succeeded", {})]

        def fn(r):
            if r.path.endswith("/events"):
                return sse(evs)
            if r.method == "POST":
                return 202, {"id": "a1", "created": True, "duplicate": False, "state": "pending"}
            return 200, task("a1", "succeeded", result=7)

        f = self.fake(fn)

        async def main():
            async with AsyncClient(f.url, "tok") as aq:
                r = await aq.enqueue("llm", {"x": 1}, id="a1")
                t = await aq.wait(r.id, timeout=5)
                names = [e.event async for e in aq.events("a1")]
                return t, names
        t, names = asyncio.run(main())
        self.assertEqual(t.result, 7)
        self.assertEqual(names, ["queued", "succeeded"])


class NoThreads(concurrent.futures.ThreadPoolExecutor):
    """A default executor that refuses all work: AsyncClient must never
    need a thread."""

    def submit(self, *a, **kw):
        raise AssertionError("AsyncClient used the event loop's default executor")


def threadless_loop():
    loop = asyncio.new_event_loop()
    loop.set_default_executor(NoThreads(max_workers=1))
    return loop


class Blocking:
    """An AsyncClient whose methods are called as Client's are, each run on
    a loop whose default executor refuses work (an iterator's steps on one
    loop, live), so that Client's tests run against the AsyncClient."""

    def __init__(self, aq):
        self.aq = aq

    def __getattr__(self, name):
        fn = getattr(self.aq, name)

        def call(*a, **kw):
            r = fn(*a, **kw)
            return self._iterate(r) if hasattr(r, "__aiter__") else self._run(r)
        return call

    def _run(self, coro):
        async def main():
            try:
                return await coro
            finally:
                await self.aq.aclose()
        loop = threadless_loop()
        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()

    def _iterate(self, it):
        loop = threadless_loop()
        try:
            while True:
                try:
                    yield loop.run_until_complete(it.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            loop.run_until_complete(it.aclose())
            loop.run_until_complete(self.aq.aclose())
            loop.close()


class OnAsyncio:
    """Runs a FakeCase's tests through AsyncClient (issue #39 item 9)."""

    def client(self, f, token="tok", **kw):
        kw.setdefault("backoff", 0.005)
        return Blocking(AsyncClient(getattr(f, "url", f), token, **kw))


class TestClientOnAsyncio(OnAsyncio, TestClient):
    pass


class TestHostileServerOnAsyncio(OnAsyncio, TestHostileServer):
    pass


class TestResultOnAsyncio(OnAsyncio, TestResult):
    pass


class TestAsyncTransport(FakeCase):
    """AsyncClient's own HTTP/1.1 on asyncio streams: no thread, waits that
    do not queue behind each other, kept-alive connections, timeouts."""

    def run_threadless(self, main):
        loop = threadless_loop()
        try:
            return loop.run_until_complete(main())
        finally:
            loop.close()

    def test_many_waits_at_once_without_a_thread(self):
        # The fake answers no wait until all n are open: waits run in a
        # thread pool (6 threads on 2 cores) never get there.
        n = 60
        import threading
        barrier = threading.Barrier(n, timeout=60)  # a deadline, not a timing

        def fn(r):
            if r.query.get("wait"):
                barrier.wait()
            return 200, task(r.path.rsplit("/", 1)[1], "succeeded", result=1)
        f = self.fake(fn)

        async def main():
            async with AsyncClient(f.url, "tok") as aq:
                return await asyncio.gather(*(aq.wait("t%d" % i, timeout=90) for i in range(n)))
        got = self.run_threadless(main)
        self.assertEqual(sorted(t.id for t in got), sorted("t%d" % i for i in range(n)))

    def test_a_host_name_is_resolved_once(self):
        f = self.fake(lambda r: (200, {"status": "ok", "redis": "ok"}))
        port = f.url.rsplit(":", 1)[1]
        calls = []

        class Counting(concurrent.futures.ThreadPoolExecutor):
            def submit(self, fn, *a, **kw):
                calls.append(fn)
                return super().submit(fn, *a, **kw)

        async def main():
            async with AsyncClient("http://localhost:" + port, "tok") as aq:
                for _ in range(5):
                    await aq.health()
                    await aq.aclose()  # a new connection each time
        loop = asyncio.new_event_loop()
        loop.set_default_executor(Counting(max_workers=1))
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()
        self.assertEqual(len(calls), 1, "getaddrinfo once, not per connection")

    def test_connections_are_kept_alive(self):
        f = self.fake(lambda r: (200, task("k", "active")) if r.method == "GET" else
                      (200, {"id": "k", "state": "canceled"}))

        async def main():
            async with AsyncClient(f.url, "tok") as aq:
                for _ in range(5):
                    await aq.get("k")
                await asyncio.gather(*(aq.get("k") for _ in range(5)))
                idle = len(aq._pool.idle)
                for _ in range(2):
                    await aq.cancel("k")
                return idle
        idle = self.run_threadless(main)
        self.assertEqual(len(f.requests), 12)
        self.assertEqual(len({r.client for r in f.requests[:5]}), 1, "one connection for calls in turn")
        self.assertEqual(idle, 5)
        reused = {r.client for r in f.requests[:10]}
        self.assertEqual(len({r.client for r in f.requests[10:]} - reused), 2,
                         "a call never retried (cancel) takes a new connection each time")

    def test_a_closed_kept_alive_connection_is_replaced(self):
        f = self.fake(lambda r: (200, task("k", "active")))

        async def main():
            async with AsyncClient(f.url, "tok") as aq:
                await aq.get("k")
                conn, _ = aq._pool.idle[0]
                conn.writer.transport.abort()  # as if the server had closed it unseen
                conn.reader.feed_data(b"")  # not at EOF: the pool takes it
                return await aq.get("k")
        self.assertEqual(self.run_threadless(main).id, "k")

    def test_a_call_times_out(self):
        import threading
        release = threading.Event()
        self.addCleanup(release.set)

        def fn(r):
            release.wait(10)
            return 200, task("s", "active")
        f = self.fake(fn)

        async def main():
            async with AsyncClient(f.url, "tok", timeout=0.3, retries=0) as aq:
                await aq.get("s")
        with self.assertRaises(agentq.TransportError) as e:
            self.run_threadless(main)
        self.assertIn("timed out", str(e.exception))

    def test_events_arrive_live_and_a_broken_loop_ends_the_stream(self):
        import threading
        first_seen = threading.Event()
        self.addCleanup(first_seen.set)

        def stream(h):
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for piece in (b": keep-alive\n\nid: 1\nevent: ou", b'tput\ndata: {"seq":1,"event":"output","data":1}\n\n'):
                h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))  # an event cut across chunks
            h.wfile.flush()
            first_seen.wait(10)
            try:
                h.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
        f = self.fake(lambda r: stream)

        async def main():
            async with AsyncClient(f.url, "tok") as aq:
                it = aq.events("t", timeout=20)
                got = [await it.__anext__()]
                first_seen.set()
                await it.aclose()  # leaves the stream before its end: its connection closes
                return got, len(aq._pool.idle)
        got, idle = self.run_threadless(main)
        self.assertEqual([(e.seq, e.event, e.data) for e in got], [(1, "output", 1)])
        self.assertEqual(idle, 0)

    def test_https_url_and_bad_urls(self):
        aq = AsyncClient("https://agentq.example:8443", "tok")
        self.assertEqual((aq._pool.host, aq._pool.port, aq._pool.ssl is not None), ("agentq.example", 8443, True))
        with self.assertRaises(ValueError):
            AsyncClient("ftp://x")


def openapi():
    with open(os.path.join(ROOT, "api", "openapi.yaml")) as fh:
        return fh.read()


def yaml_block(text, header, indent):
    """The lines under `header` (at `indent` spaces) until the next line at
    that indent or less."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line == " " * indent + header:
            out = []
            for l2 in lines[i + 1:]:
                if l2.strip() and len(l2) - len(l2.lstrip()) <= indent:
                    break
                out.append(l2)
            return out
    raise AssertionError("%s not found in openapi.yaml" % header)


class TestOpenAPI(unittest.TestCase):
    """Every route and field api/openapi.yaml documents is reachable from
    the client: a route added to the API without its method fails here."""

    def test_every_route_has_a_method(self):
        doc = openapi()
        routes = set()
        path = None
        for line in yaml_block(doc, "paths:", 0):
            m = re.match(r"^  (/\S+):\s*$", line)
            if m:
                path = m.group(1)
            m = re.match(r"^    (get|post|put|patch|delete):\s*$", line)
            if m:
                routes.add((m.group(1).upper(), path))
        self.assertIn(("POST", "/api/v1/tasks"), routes)
        for r in sorted(routes):
            self.assertIn(r, agentq.ROUTES, "route %s %s has no client method" % r)
            for name in agentq.ROUTES[r]:
                self.assertTrue(callable(getattr(Client, name, None)), name)
                self.assertTrue(callable(getattr(AsyncClient, name, None)), name)

    def test_every_task_field_is_an_enqueue_argument(self):
        import inspect
        props = yaml_block(openapi(), "TaskRequest:", 4)
        fields = re.findall(r"^        ([a-z_]+):", "\n".join(yaml_block("\n".join(props), "properties:", 6)), re.M)
        self.assertIn("correlation_id", fields)
        params = set(inspect.signature(Client.enqueue).parameters)
        for f in fields:
            self.assertIn(f, agentq.TASK_FIELDS)
            self.assertIn("in_" if f == "in" else f, params, "enqueue lacks %s" % f)

    def test_constants_cover_the_enums(self):
        doc = openapi()
        states = re.search(r"enum: \[(pending, scheduled[^\]]*succeeded[^\]]*)\]", doc).group(1).split(", ")
        self.assertEqual(set(states), {v for k, v in vars(State).items() if k.isupper() and isinstance(v, str)})
        codes = re.search(r"enum: \[(invalid_request, [^\]]*)\]", doc).group(1).split(", ")
        self.assertEqual(set(codes), set(agentq.errors.ERRORS))

    def test_one_version(self):
        with open(os.path.join(ROOT, "clients", "VERSION")) as fh:
            v = fh.read().strip()
        self.assertEqual(agentq.__version__, v)
        with open(os.path.join(PKG, "pyproject.toml")) as fh:
            self.assertIn('version = "%s"' % v, fh.read())
        with open(os.path.join(ROOT, "clients", "typescript", "package.json")) as fh:
            self.assertEqual(json.load(fh)["version"], v)


class TestPackaging(unittest.TestCase):
    def test_the_stdlib_backend_builds_a_wheel(self):
        import importlib.util
        import zipfile
        spec = importlib.util.spec_from_file_location("agentq_build", os.path.join(PKG, "_build", "agentq_build.py"))
        backend = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(backend)
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(d, ignore_errors=True))
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        name = backend.build_wheel(d)
        self.assertEqual(name, "agentq-%s-py3-none-any.whl" % agentq.__version__)
        with zipfile.ZipFile(os.path.join(d, name)) as z:
            names = set(z.namelist())
            meta = z.read("agentq-%s.dist-info/METADATA" % agentq.__version__).decode()
        for f in ("agentq/__init__.py", "agentq/client.py", "agentq/aio.py", "agentq/agent.py", "agentq/errors.py",
                  "agentq/_types.py", "agentq/webhook.py", "agentq/py.typed", "agentq-%s.dist-info/RECORD" % agentq.__version__):
            self.assertIn(f, names)
        self.assertIn("Requires-Python: >=3.9", meta)
        self.assertTrue(backend.build_sdist(d).endswith(".tar.gz"))


AGENT = r'''
import sys, time
sys.path.insert(0, %r)
from agentq.agent import run, AgentError

class RateLimitError(Exception):
    status_code = 429

class Headers:  # shaped like httpx.Headers
    def __init__(self, d):
        self.d = d
    def items(self):
        return list(self.d.items())

class Response:
    def __init__(self, status_code, headers):
        self.status_code, self.headers = status_code, Headers(headers)

class SDKRateLimitError(Exception):  # shaped like openai.RateLimitError
    def __init__(self, message, response):
        super().__init__(message)
        self.response, self.status_code = response, response.status_code

def handle(req):
    mode = req.params.get("mode")
    req.progress({"pct": 50})
    req.output("partial")
    req.usage(input_tokens=3, output_tokens=4)
    if mode == "boom":
        raise ConnectionRefusedError("connect: connection refused")
    if mode == "rate":
        raise RateLimitError("slow down")
    if mode == "agent_error":
        raise AgentError("bad params", 400)
    if mode == "sdk_rate":
        raise SDKRateLimitError("Error code: 429", Response(429, {
            "retry-after-ms": "1500", "x-ratelimit-remaining-requests": "0",
            "authorization": "Bearer sk-test", "set-cookie": "a=b"}))
    if mode == "sleep":
        print("ready", file=sys.stderr, flush=True)
        time.sleep(60)
    return {"echo": req.params, "task": req.task_id}

run(handle)
'''


class TestAgentHelpers(unittest.TestCase):
    def agent(self, params, events=True, term=False):
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(d, ignore_errors=True))
        script = os.path.join(d, "agent.py")
        with open(script, "w") as fh:
            fh.write(AGENT % PKG)
        r, w = os.pipe()
        env = {"PATH": os.environ.get("PATH", "")}
        if events:
            env["AGENTQ_EVENTS_FD"] = str(w)
        p = subprocess.Popen([sys.executable, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, pass_fds=(w,) if events else ())
        os.close(w)
        p.stdin.write(json.dumps({"task_id": "t1", "agent": "py", "params": params, "attempt": 1}).encode())
        p.stdin.close()
        if term:
            p.stderr.readline()
            p.send_signal(signal.SIGTERM)
        out = p.stdout.read()
        err = p.stderr.read()
        code = p.wait(timeout=30)
        with os.fdopen(r, "rb") as fh:
            lines = [json.loads(l) for l in fh.read().splitlines()]
        p.stdout.close()
        p.stderr.close()
        return code, json.loads(out) if out.strip() else None, lines, err.decode()

    def test_success_with_events_and_usage(self):
        code, resp, lines, _ = self.agent({"mode": "echo", "n": 1})
        self.assertEqual(code, 0)
        self.assertEqual(resp, {"status": "success", "code": 0, "data": {"echo": {"mode": "echo", "n": 1}, "task": "t1"},
                                "usage": {"input_tokens": 3, "output_tokens": 4}})
        self.assertEqual(lines, [{"type": "progress", "data": {"pct": 50}}, {"type": "output", "data": "partial"}])

    def test_without_events_fd(self):
        code, resp, lines, _ = self.agent({"mode": "echo"}, events=False)
        self.assertEqual((code, resp["status"], lines), (0, "success", []))

    def test_exceptions_become_error_responses(self):
        _, resp, _, _ = self.agent({"mode": "boom"})
        self.assertEqual(resp["status"], "error")
        self.assertEqual(resp["code"], 0)
        self.assertEqual(resp["error"], "ConnectionRefusedError: connect: connection refused")
        _, resp, _, _ = self.agent({"mode": "rate"})
        self.assertEqual((resp["code"], resp["error"]), (429, "__main__.RateLimitError: slow down"))
        _, resp, _, _ = self.agent({"mode": "agent_error"})
        self.assertEqual((resp["code"], resp["error"]), (400, "bad params"))

    def test_sdk_exception_passes_back_pressure_on(self):
        """A real agent process: an exception shaped like openai's
        RateLimitError becomes a reply with its code, its back-pressure
        headers (no other) and the wait they ask for."""
        _, resp, _, _ = self.agent({"mode": "sdk_rate"})
        self.assertEqual(resp["code"], 429)
        self.assertEqual(resp["headers"], {"retry-after-ms": "1500", "x-ratelimit-remaining-requests": "0"})
        self.assertEqual(resp["retry_after"], 1.5)

    def test_sigterm_exits_cleanly(self):
        code, resp, _, err = self.agent({"mode": "sleep"}, term=True)
        self.assertEqual(code, 143)
        self.assertIsNone(resp)
        self.assertNotIn("Traceback", err)



class _Headers:
    """Shaped like httpx.Headers: items() gives (name, value) pairs, names
    in any case."""

    def __init__(self, pairs):
        self.pairs = pairs

    def items(self):
        return list(self.pairs)


class _HTTPResponse:
    def __init__(self, status_code, headers):
        self.status_code = status_code
        self.headers = _Headers(headers)


class APIStatusError(Exception):
    """Shaped like openai's / anthropic's APIStatusError: .status_code and
    .response (an httpx.Response)."""

    def __init__(self, message, *, response):
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code


class APIError(Exception):
    """Shaped like the TypeScript SDKs' APIError seen from Python: .status
    and .headers (a plain mapping)."""

    def __init__(self, status, headers):
        super().__init__("%d status code" % status)
        self.status = status
        self.headers = headers


class TestAgentBackPressure(unittest.TestCase):
    """The helper fills code, headers and retry_after from an exception
    that carries an HTTP response, duck-typed (no SDK installed)."""

    def reply(self, exc):
        from agentq.agent import error_response
        return error_response(exc)

    def test_openai_rate_limit_error(self):
        resp = self.reply(APIStatusError("Error code: 429 - rate limited", response=_HTTPResponse(429, [
            ("retry-after-ms", "1500"), ("Retry-After", "2"), ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "1.5s"), ("x-should-retry", "true"),
            ("authorization", "Bearer sk-secret"), ("set-cookie", "a=b"), ("x-request-id", "req_1"),
            ("content-type", "application/json")])))
        self.assertEqual(resp["code"], 429)
        self.assertEqual(resp["headers"], {
            "retry-after-ms": "1500", "retry-after": "2", "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1.5s", "x-should-retry": "true"})
        self.assertEqual(resp["retry_after"], 1.5, "retry-after-ms first, as the worker reads it")
        json.dumps(resp)  # the reply is JSON

    def test_anthropic_headers_and_retry_after_seconds(self):
        resp = self.reply(APIStatusError("overloaded", response=_HTTPResponse(529, [
            ("retry-after", "7"), ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", "2026-11-28T12:00:30Z"), ("x-api-key", "sk-ant")])))
        self.assertEqual(resp["code"], 529)
        self.assertEqual(resp["headers"], {"retry-after": "7", "anthropic-ratelimit-tokens-remaining": "0",
                                           "anthropic-ratelimit-tokens-reset": "2026-11-28T12:00:30Z"})
        self.assertEqual(resp["retry_after"], 7.0)

    def test_http_date_becomes_rfc3339(self):
        resp = self.reply(APIError(503, {"Retry-After": "Sat, 28 Nov 2026 12:00:07 GMT"}))
        self.assertEqual(resp["code"], 503)
        self.assertEqual(resp["headers"], {"retry-after": "Sat, 28 Nov 2026 12:00:07 GMT"})
        self.assertEqual(resp["retry_after"], "2026-11-28T12:00:07+00:00")

    def test_invalid_values_are_left_to_the_worker(self):
        resp = self.reply(APIError(429, {"retry-after": "soon", "retry-after-ms": "inf"}))
        self.assertEqual(resp["headers"], {"retry-after": "soon", "retry-after-ms": "inf"})
        self.assertNotIn("retry_after", resp)
        json.loads(json.dumps(resp, allow_nan=False))

    def test_agent_error_states_its_own(self):
        import datetime
        from agentq.agent import AgentError
        resp = self.reply(AgentError("slow down", 429, retry_after=datetime.timedelta(seconds=3),
                                     headers={"X-RateLimit-Reset-Tokens": "3s", "Cookie": "c"}))
        self.assertEqual(resp, {"status": "error", "code": 429, "error": "slow down",
                                "headers": {"x-ratelimit-reset-tokens": "3s"}, "retry_after": 3.0})
        resp = self.reply(AgentError("later", 503, retry_after=datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)))
        self.assertEqual(resp["retry_after"], "2030-01-01T00:00:00+00:00")
        self.assertNotIn("headers", resp)

    def test_no_response_no_back_pressure(self):
        for exc in (ConnectionRefusedError("refused"), ValueError("x"),
                    APIStatusError("e", response=_HTTPResponse(500, [("content-type", "text/plain")]))):
            resp = self.reply(exc)
            self.assertNotIn("headers", resp)
            self.assertNotIn("retry_after", resp)

    def test_allowlist_matches_the_worker(self):
        from agentq.agent import back_pressure_header
        for name in ("Retry-After", "retry-after-ms", "X-Should-Retry", "x-ratelimit-limit-requests",
                     "anthropic-ratelimit-requests-reset"):
            self.assertTrue(back_pressure_header(name), name)
        for name in ("authorization", "x-api-key", "x-ratelimit-", "anthropic-ratelimit-", "retry-after-s",
                     "openai-organization", "x-request-id"):
            self.assertFalse(back_pressure_header(name), name)


class BudgetErrorTest(unittest.TestCase):
    def test_budget_exhausted_is_typed(self):
        """A 409 budget_exhausted is a BudgetExhausted naming the budget and
        when it resets."""
        from agentq.errors import from_reply
        e = from_reply(409, {"code": "budget_exhausted", "error": "budget exhausted",
                             "budget": 'budget "tenant acme" tokens 50000/1h0m0s',
                             "resets_at": "2030-01-01T00:00:00Z"})
        self.assertIsInstance(e, agentq.BudgetExhausted)
        self.assertEqual(e.budget, 'budget "tenant acme" tokens 50000/1h0m0s')
        self.assertEqual(e.resets_at, "2030-01-01T00:00:00Z")


if __name__ == "__main__":
    unittest.main()


class TestAgentSteps(unittest.TestCase):
    """Request.step (#37): a recorded step is returned without running its
    function; a new one runs and is written as a step line, sync or async."""

    def setUp(self):
        import agentq.agent as agentmod
        self.mod = agentmod
        self.r, w = os.pipe()
        self.saved = agentmod._fd
        agentmod._fd = w
        self.w = w

        def restore():
            agentmod._fd = self.saved
            os.close(self.w)
            os.close(self.r)
        self.addCleanup(restore)

    def lines(self):
        os.set_blocking(self.r, False)
        try:
            data = os.read(self.r, 1 << 20)
        except BlockingIOError:
            data = b""
        return [json.loads(l) for l in data.splitlines()]

    def test_sync_and_async(self):
        req = self.mod.Request(agentq._types.Result.wrap({"task_id": "t", "steps": {"plan": {"p": 1}}}))
        calls = []

        def fn(v):
            def f():
                calls.append(v)
                return v
            return f
        self.assertEqual(req.step("plan", fn("again")), {"p": 1})
        self.assertEqual(req.step("call", lambda: self.mod.StepResult("c", usage={"total_tokens": 5})), "c")

        async def afn():
            calls.append("a")
            return ["a"]
        self.assertEqual(asyncio.run(req.step("async", afn)), ["a"])

        async def never():
            calls.append("never")
        self.assertEqual(asyncio.run(req.step("plan", never)), {"p": 1})
        self.assertEqual(calls, ["a"])
        self.assertEqual(self.lines(), [
            {"type": "step", "name": "call", "usage": {"total_tokens": 5}, "data": "c"},
            {"type": "step", "name": "async", "data": ["a"]},
        ])


class TestSignal(FakeCase):
    """Client.signal (#37): POST /api/v1/tasks/{id}/signals/{name} with the
    data as the body; typed errors; retried (a retry is a duplicate)."""

    def test_signal_sends_the_data_and_reads_the_result(self):
        f = self.fake(lambda r: (200, {"id": "t/1", "name": "approve", "state": "pending",
                                       "resumed": True, "duplicate": False}))
        c = self.client(f)
        r = c.signal("t/1", "approve", {"ok": True, "by": "ana"})
        self.assertEqual(r, {"id": "t/1", "name": "approve", "state": "pending", "resumed": True, "duplicate": False})
        self.assertTrue(r.resumed)
        req = f.requests[0]
        self.assertEqual((req.method, req.path), ("POST", "/api/v1/tasks/t%2F1/signals/approve"))
        self.assertEqual(req.body, {"ok": True, "by": "ana"})
        self.assertEqual(req.headers["Content-Type"], "application/json")
        c.signal("t", "go:2")
        self.assertIsNone(f.requests[1].body)  # no data: no body (null)
        self.assertEqual(f.requests[1].path, "/api/v1/tasks/t/signals/go%3A2")
        c.signal("t", "zero", 0)
        self.assertEqual(f.requests[2].body, 0)
        with self.assertRaises(ValueError):
            c.signal("t", "")

    def test_signal_errors_are_typed(self):
        replies = {
            "/api/v1/tasks/gone/signals/a": (404, {"code": "not_found", "error": "no task gone"}),
            "/api/v1/tasks/done/signals/a": (409, {"code": "task_ended", "error": "ended", "state": "succeeded"}),
            "/api/v1/tasks/t/signals/bad%20name": (400, {"code": "invalid_signal", "error": "bad name"}),
            "/api/v1/tasks/t/signals/many": (409, {"code": "signal_cap", "error": "64 signals"}),
            "/api/v1/tasks/t/signals/big": (413, {"code": "request_too_large", "error": "over 64 KiB"}),
        }
        f = self.fake(lambda r: replies[r.path])
        c = self.client(f)
        self.assertRaises(agentq.NotFound, c.signal, "gone", "a")
        with self.assertRaises(agentq.TaskEnded) as cm:
            c.signal("done", "a")
        self.assertEqual(cm.exception.state, "succeeded")
        with self.assertRaises(agentq.InvalidSignal) as cm:
            c.signal("t", "bad name")
        self.assertIsInstance(cm.exception, agentq.InvalidRequest)
        with self.assertRaises(agentq.SignalCap) as cm:
            c.signal("t", "many")
        self.assertIsInstance(cm.exception, agentq.Conflict)
        self.assertRaises(agentq.RequestTooLarge, c.signal, "t", "big", "x" * 10)
        self.assertEqual(len(f.requests), 5)  # none retried

    def test_signal_is_retried_on_503(self):
        n = []

        def fn(r):
            n.append(1)
            if len(n) == 1:
                return 503, {"code": "unavailable", "error": "redis"}
            return 200, {"id": "t", "name": "a", "state": "pending", "resumed": False, "duplicate": True}
        f = self.fake(fn)
        self.assertTrue(self.client(f).signal("t", "a", [1]).duplicate)
        self.assertEqual([r.body for r in f.requests], [[1], [1]])

    def test_async_signal(self):
        f = self.fake(lambda r: (200, {"id": "t", "name": "a", "state": "waiting", "resumed": False, "duplicate": False}))

        async def main():
            async with AsyncClient(f.url, "tok") as aq:
                return await aq.signal("t", "a", {"x": 1})
        self.assertEqual(asyncio.run(main()).state, State.WAITING)
        self.assertEqual(f.requests[0].body, {"x": 1})


class TestSignalOnAsyncio(OnAsyncio, TestSignal):
    pass


SUSPEND_AGENT = r'''
import sys, datetime
sys.path.insert(0, %r)
from agentq.agent import run, suspend, Suspend

def handle(req):
    mode = req.params["mode"]
    req.usage(input_tokens=2, output_tokens=1)
    if mode == "approve":
        draft = req.step("draft", lambda: "text")
        if "approve" in req.signals:
            return {"draft": draft, "approved": req.signals["approve"], "resume": req.resume,
                    "by": req.wait.kind, "timed_out": req.wait.timed_out}
        if req.wait and req.wait.timed_out:
            return {"draft": draft, "approved": None, "resume": req.resume}
        suspend(signal="approve", timeout=86400)
    if mode == "sleep":
        suspend(sleep="10m")
    if mode == "until":
        return Suspend(until=datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc))
    if mode == "children":
        req.suspend(children=[{"agent": "llm", "params": {"k": 1}, "name": "a", "deadline": 60},
                              {"agent": "llm", "id": "c2"}], mode="any", timeout=3600)
    if mode == "bad":
        suspend(sleep="1m", signal="x")
    return req.children

run(handle)
'''


class TestAgentSuspend(unittest.TestCase):
    """The helper's suspend (#37), in a real subprocess: the stdout
    ActionResponse is {"status":"suspend","wait":...} (usage kept); the
    request's resume, wait, signals and children are read."""

    def agent(self, request):
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(d, ignore_errors=True))
        script = os.path.join(d, "agent.py")
        with open(script, "w") as fh:
            fh.write(SUSPEND_AGENT % PKG)
        p = subprocess.run([sys.executable, script], input=json.dumps(dict({"task_id": "t1", "attempt": 1}, **request)).encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PATH": os.environ.get("PATH", "")},
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return json.loads(p.stdout)

    def test_suspend_replies(self):
        usage = {"input_tokens": 2, "output_tokens": 1}
        for params, wait in (
            ({"mode": "approve"}, {"signal": "approve", "timeout": "86400s"}),
            ({"mode": "sleep"}, {"sleep": "10m"}),
            ({"mode": "until"}, {"until": "2030-01-02T03:04:05+00:00"}),
            ({"mode": "children"}, {"children": [{"agent": "llm", "params": {"k": 1}, "name": "a", "deadline": "60s"},
                                                 {"agent": "llm", "id": "c2"}], "mode": "any", "timeout": "3600s"}),
        ):
            self.assertEqual(self.agent({"params": params}), {"status": "suspend", "wait": wait, "usage": usage}, params)

    def test_a_broad_except_does_not_swallow_a_suspend(self):
        from agentq.agent import handle_request, suspend

        def handle(req):
            try:
                suspend(sleep=60)
            except Exception:  # noqa: BLE001 -- what an agent's logging wrapper does
                return "swallowed"
        self.assertEqual(handle_request(handle, "{}"), {"status": "suspend", "wait": {"sleep": "60s"}})

    def test_child_spec_refuses_in(self):
        from agentq.agent import wait_spec
        for bad in ({"agent": "x", "in_": 5}, {"agent": "x", "fail_if_unavailable": True}):
            with self.assertRaisesRegex(ValueError, "child 1: .* is not supported for a child"):
                wait_spec(children=[bad])

    def test_invalid_wait_is_an_error(self):
        resp = self.agent({"params": {"mode": "bad"}})
        self.assertEqual(resp["status"], "error")
        self.assertIn("exactly one of sleep, until, signal, children", resp["error"])

    def test_resumed_request(self):
        resp = self.agent({"params": {"mode": "approve"}, "steps": {"draft": "kept"}, "resume": 1,
                           "wait": {"kind": "signal", "signal": "approve", "timed_out": False},
                           "signals": {"approve": {"ok": True}}})
        self.assertEqual(resp["data"], {"draft": "kept", "approved": {"ok": True}, "resume": 1,
                                        "by": "signal", "timed_out": False})
        resp = self.agent({"params": {"mode": "approve"}, "steps": {"draft": "kept"}, "resume": 1,
                           "wait": {"kind": "signal", "signal": "approve", "timed_out": True}})
        self.assertEqual(resp["data"], {"draft": "kept", "approved": None, "resume": 1})
        kids = [{"id": "t1.a", "name": "a", "state": "succeeded", "result": 1}]
        self.assertEqual(self.agent({"params": {"mode": "none"}, "children": kids})["data"], kids)
        self.assertEqual(self.agent({"params": {"mode": "none"}})["data"], [])
