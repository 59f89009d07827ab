"""AsyncClient: the Client's methods as coroutines, for asyncio.

Truly asynchronous, standard library only: its own HTTP/1.1 on asyncio
streams (agentq._http), no thread. Each method runs the very steps the
Client's runs (client.py writes each method once, without I/O), so both
send, retry, wait for and raise the same; events() is an async iterator
over the same resumable stream.
"""

import asyncio
import urllib.parse

from . import _http, errors
from .client import Client, _answer, _Item, _Line, _Req, _transport_error


class AsyncClient:
    """The asyncio twin of Client (same constructor, same methods, awaited):

        async with AsyncClient(url, token) as aq:
            r = await aq.enqueue("llm", {"q": 1}, id="job-1")
            task = await aq.wait(r["id"], timeout=300)
            async for ev in aq.events("job-1"): ...

    A call waits on the event loop, never in a thread: a thousand waits and
    event streams at once are a thousand sockets. Connections are kept
    alive and reused; aclose() (or leaving ``async with``) closes the idle
    ones.
    """

    def __init__(self, url=None, token=None, **kw):
        self.sync = Client(url, token, **kw)
        self.url = self.sync.url
        self._pool = _http.Pool(self.url)

    def __repr__(self):
        return "AsyncClient(%r)" % (self.url,)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    async def aclose(self):
        """Closes the idle connections (the client stays usable)."""
        self._pool.close()

    # ---- the steps of Client's methods, on asyncio ----

    async def _advance(self, gen):
        """Runs gen's steps (see client.py) up to its next _Item (returned)
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
                value = await self._perform(step)
            except errors.AgentqError as e:
                value, send = e, gen.throw

    async def _drive(self, gen):
        return (await self._advance(gen)).value

    async def _each(self, gen):
        try:
            while True:
                step = await self._advance(gen)
                if not isinstance(step, _Item):
                    return
                yield step.value
        finally:
            gen.close()

    async def _perform(self, step):
        if isinstance(step, _Line):
            try:
                return await asyncio.wait_for(step.resp.readline(step.limit), step.resp.timeout)
            except _http.ERRORS as e:
                raise _transport_error("reading the event stream", e) from e
        if not isinstance(step, _Req):
            await asyncio.sleep(step)
            return None
        return await (self._open_stream(step) if step.stream else self._once(step))

    async def _send(self, req):
        """Sends req: the answer's Response (its head read)."""
        url, data, headers = self.sync._prepare(req)
        u = urllib.parse.urlsplit(url)
        target = (u.path or "/") + ("?" + u.query if u.query else "")
        return await self._pool.request(req.method, target, headers, data, replayable=req.idempotent)

    async def _body(self, req, resp):
        """resp's body (none for a 3xx, never followed), at most
        max_reply_bytes (ResponseTooLarge past it)."""
        try:
            if 300 <= resp.status < 400:
                return b""
            too_large = lambda: errors.ResponseTooLarge(req.what, self.sync.max_reply_bytes)  # noqa: E731
            return await resp.read(self.sync.max_reply_bytes, too_large)
        finally:
            resp.close()

    async def _exchange(self, req):
        resp = await self._send(req)
        return resp, await self._body(req, resp)

    async def _once(self, req):
        """One try of req: its _Reply, or the typed error."""
        try:
            resp, raw = await asyncio.wait_for(self._exchange(req), req.timeout or self.sync.timeout)
        except _http.ERRORS as e:
            raise _transport_error(req.what, e) from e
        return _answer(req.method, self.url + req.path, resp.status, resp.headers, raw)

    async def _open_stream(self, req):
        """req's open Response (to read lines of), or the typed error."""
        try:
            resp = await asyncio.wait_for(self._send(req), req.timeout)
            if resp.status < 300:
                resp.timeout = req.timeout
                return resp
            raw = await asyncio.wait_for(self._body(req, resp), req.timeout)
        except _http.ERRORS as e:
            raise _transport_error(req.what, e) from e
        _answer(req.method, self.url + req.path, resp.status, resp.headers, raw)
        raise errors.TransportError("%s: HTTP %d" % (req.what, resp.status))

    # ---- the methods (each is Client's: see its docstring) ----

    async def enqueue(self, agent, params=None, **kw):
        """Client.enqueue, awaited."""
        return await self._drive(Client.enqueue.op(self.sync, agent, params, **kw))

    async def enqueue_batch(self, tasks, **kw):
        """Client.enqueue_batch, awaited."""
        return await self._drive(Client.enqueue_batch.op(self.sync, tasks, **kw))

    async def get(self, id):
        """Client.get, awaited."""
        return await self._drive(Client.get.op(self.sync, id))

    async def wait(self, id, timeout=None):
        """Client.wait, awaited: a long poll holds a socket, not a thread."""
        return await self._drive(Client.wait.op(self.sync, id, timeout))

    async def result(self, id, timeout=None):
        """Client.result, awaited."""
        return await self._drive(Client.result.op(self.sync, id, timeout))

    def events(self, id, after=None, *, timeout=None):
        """Client.events as an async iterator (``async for``)."""
        return self._each(Client.events.op(self.sync, id, after, timeout=timeout))

    async def cancel(self, id, reason=None):
        """Client.cancel, awaited."""
        return await self._drive(Client.cancel.op(self.sync, id, reason))

    async def signal(self, id, name, data=None):
        """Client.signal, awaited."""
        return await self._drive(Client.signal.op(self.sync, id, name, data))

    async def deadletters(self, limit=None, offset=None, **kw):
        """Client.deadletters, awaited."""
        return await self._drive(Client.deadletters.op(self.sync, limit, offset, **kw))

    def iter_deadletters(self, **kw):
        """Client.iter_deadletters as an async iterator."""
        return self._each(Client.iter_deadletters.op(self.sync, **kw))

    async def tasks(self, **kw):
        """Client.tasks, awaited."""
        return await self._drive(Client.tasks.op(self.sync, **kw))

    def iter_tasks(self, **kw):
        """Client.iter_tasks as an async iterator."""
        return self._each(Client.iter_tasks.op(self.sync, **kw))

    async def pause_queue(self, name):
        """Client.pause_queue, awaited."""
        return await self._drive(Client.pause_queue.op(self.sync, name))

    async def resume_queue(self, name):
        """Client.resume_queue, awaited."""
        return await self._drive(Client.resume_queue.op(self.sync, name))

    async def requeue(self, id, run=None, *, fresh=None):
        """Client.requeue, awaited."""
        return await self._drive(Client.requeue.op(self.sync, id, run, fresh=fresh))

    async def agents(self):
        """Client.agents, awaited."""
        return await self._drive(Client.agents.op(self.sync))

    async def workers(self):
        """Client.workers, awaited."""
        return await self._drive(Client.workers.op(self.sync))

    async def tenants(self, queue=None):
        """Client.tenants, awaited."""
        return await self._drive(Client.tenants.op(self.sync, queue))

    async def schedules(self):
        """Client.schedules, awaited."""
        return await self._drive(Client.schedules.op(self.sync))

    async def usage(self, by=None, since=None):
        """Client.usage, awaited."""
        return await self._drive(Client.usage.op(self.sync, by, since))

    async def health(self):
        """Client.health, awaited."""
        return await self._drive(Client.health.op(self.sync))

    async def openapi(self):
        """Client.openapi, awaited."""
        return await self._drive(Client.openapi.op(self.sync))
