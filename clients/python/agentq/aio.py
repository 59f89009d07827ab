"""AsyncClient: the Client's methods as coroutines, for asyncio.

Standard library only: each call runs the synchronous client in the default
executor (asyncio.to_thread), so it never blocks the event loop; events()
is an async iterator over the same resumable stream.
"""

import asyncio
import functools

from .client import Client

_DONE = object()


class AsyncClient:
    """The asyncio twin of Client (same constructor, same methods, awaited):

        async with AsyncClient(url, token) as aq:
            r = await aq.enqueue("llm", {"q": 1}, id="job-1")
            task = await aq.wait(r["id"], timeout=300)
            async for ev in aq.events("job-1"): ...
    """

    def __init__(self, url=None, token=None, **kw):
        self.sync = Client(url, token, **kw)
        self.url = self.sync.url

    def __repr__(self):
        return "AsyncClient(%r)" % (self.url,)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None

    async def aclose(self):
        return None

    async def _run(self, fn, *a, **kw):
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(fn, *a, **kw))

    async def enqueue(self, agent, params=None, **kw):
        return await self._run(self.sync.enqueue, agent, params, **kw)

    async def enqueue_batch(self, tasks, **kw):
        return await self._run(self.sync.enqueue_batch, tasks, **kw)

    async def get(self, id):
        return await self._run(self.sync.get, id)

    async def wait(self, id, timeout=None):
        return await self._run(self.sync.wait, id, timeout)

    async def result(self, id, timeout=None):
        return await self._run(self.sync.result, id, timeout)

    async def events(self, id, after=None, *, timeout=None):
        it = self.sync.events(id, after, timeout=timeout)
        try:
            while True:
                ev = await self._run(next, it, _DONE)
                if ev is _DONE:
                    return
                yield ev
        finally:
            await self._run(it.close)

    async def cancel(self, id, reason=None):
        return await self._run(self.sync.cancel, id, reason)

    async def signal(self, id, name, data=None):
        return await self._run(self.sync.signal, id, name, data)

    async def deadletters(self, limit=None, offset=None, **kw):
        return await self._run(self.sync.deadletters, limit, offset, **kw)

    async def iter_deadletters(self, **kw):
        it = self.sync.iter_deadletters(**kw)
        while True:
            d = await self._run(next, it, _DONE)
            if d is _DONE:
                return
            yield d

    async def tasks(self, **kw):
        return await self._run(self.sync.tasks, **kw)

    async def iter_tasks(self, **kw):
        it = self.sync.iter_tasks(**kw)
        while True:
            t = await self._run(next, it, _DONE)
            if t is _DONE:
                return
            yield t

    async def pause_queue(self, name):
        return await self._run(self.sync.pause_queue, name)

    async def resume_queue(self, name):
        return await self._run(self.sync.resume_queue, name)

    async def requeue(self, id, run=None, *, fresh=None):
        return await self._run(self.sync.requeue, id, run, fresh=fresh)

    async def agents(self):
        return await self._run(self.sync.agents)

    async def workers(self):
        return await self._run(self.sync.workers)

    async def tenants(self, queue=None):
        return await self._run(self.sync.tenants, queue)

    async def schedules(self):
        return await self._run(self.sync.schedules)

    async def usage(self, by=None, since=None):
        return await self._run(self.sync.usage, by, since)

    async def health(self):
        return await self._run(self.sync.health)

    async def openapi(self):
        return await self._run(self.sync.openapi)
