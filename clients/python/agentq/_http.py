"""HTTP/1.1 on asyncio streams for AsyncClient, standard library only.

A request at a time per connection; a connection whose answer was read to
its end is kept (at most IDLE_MAX, for IDLE_SECS) and reused. Bodies are
framed by Content-Length, chunked encoding or the connection's end, and
read a piece at a time, so an event stream's lines arrive as they are sent.
Nothing runs in a thread: connecting to an IP address never leaves the
event loop, and a host name is resolved (the loop's getaddrinfo, which uses
its default executor) once per RESOLVE_SECS, not per request.
"""

import asyncio
import http.client
import io
import ipaddress
import socket
import ssl
import time
import urllib.parse

IDLE_MAX = 32  # the idle connections a pool keeps
IDLE_SECS = 30.0  # how long it keeps one (serve closes them after 2 minutes)
RESOLVE_SECS = 60.0  # how long a host name's addresses are used
PIECE = 64 << 10  # the most a body read takes at once

# What a connection that failed raises (AsyncClient maps them to
# TransportError).
ERRORS = (OSError, EOFError, ValueError, asyncio.LimitOverrunError, asyncio.TimeoutError,
          http.client.HTTPException)


class Closed(EOFError):
    """The server closed the connection before its answer ended;
    ``partial``: the bytes of the answer's head read before."""

    def __init__(self, what="the server closed the connection before its answer ended", partial=b""):
        super().__init__(what)
        self.partial = partial


class _Stale(Exception):
    """A reused connection the server had closed: nothing was answered."""


class Pool:
    """The connections of one client to its server (url's scheme, host and
    port)."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("the url must be http:// or https:// with a host (got %r)" % (url,))
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.authority = u.netloc.rpartition("@")[2]
        self.ssl = ssl.create_default_context() if u.scheme == "https" else None
        self.idle = []  # [(conn, since)], the newest last
        self.loop = None
        self.addrs, self.resolved = None, 0.0

    def close(self):
        """Closes the idle connections (the pool stays usable)."""
        idle, self.idle = self.idle, []
        for conn, _ in idle:
            conn.close()

    async def request(self, method, target, headers, body, *, replayable):
        """Sends the request and reads its answer's head: the Response,
        whose body is read from it. ``replayable``: the request may be sent
        again on a new connection when a reused one turns out closed."""
        # A request that must not be sent twice never takes a kept-alive
        # connection, which the server may have closed as it was sent.
        conn = self._take() if replayable else None
        if conn is not None:
            try:
                return await conn.exchange(self, method, target, headers, body)
            except _Stale:
                pass  # send it again on a new connection
        conn = await self._connect()
        return await conn.exchange(self, method, target, headers, body)

    def release(self, conn):
        """Keeps a connection whose answer was read to its end."""
        if len(self.idle) < IDLE_MAX and asyncio.get_running_loop() is self.loop:
            self.idle.append((conn, time.monotonic()))
        else:
            conn.close()

    def _take(self):
        loop = asyncio.get_running_loop()
        if loop is not self.loop:
            # Connections belong to the loop that opened them.
            self.close()
            self.loop = loop
        while self.idle:
            conn, since = self.idle.pop()
            if time.monotonic() - since < IDLE_SECS and not conn.reader.at_eof():
                return conn
            conn.close()
        return None

    async def _connect(self):
        last = None
        for addr in await self._addresses():
            try:
                reader, writer = await asyncio.open_connection(
                    addr, self.port, ssl=self.ssl, server_hostname=self.host if self.ssl else None)
            except OSError as e:
                last = e
                continue
            return _Conn(reader, writer)
        raise last

    async def _addresses(self):
        try:
            ipaddress.ip_address(self.host)
            return [self.host]
        except ValueError:
            pass
        if self.addrs is None or time.monotonic() - self.resolved > RESOLVE_SECS:
            infos = await asyncio.get_running_loop().getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            self.addrs = list(dict.fromkeys(info[4][0] for info in infos))
            self.resolved = time.monotonic()
        return self.addrs


class _Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.reused = False

    def close(self):
        try:
            self.writer.close()
        except RuntimeError:
            pass  # its loop is closed: the socket went with it

    async def exchange(self, pool, method, target, headers, body):
        reused, self.reused = self.reused, True
        try:
            self.writer.write(_head(pool.authority, method, target, headers, body))
            if body:
                self.writer.write(body)
            await self.writer.drain()
            status, head = await self._read_head()
            return Response(pool, self, method, status, head)
        except BaseException as e:
            self.close()
            if reused and isinstance(e, (ConnectionError, EOFError)) and not getattr(e, "partial", b""):
                raise _Stale() from e
            raise

    async def _read_head(self):
        while True:
            try:
                raw = await self.reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                raise Closed(partial=e.partial) from None
            line, _, rest = raw.partition(b"\r\n")
            version, _, tail = line.decode("latin-1").partition(" ")
            if not version.startswith("HTTP/1."):
                raise http.client.BadStatusLine(line.decode("latin-1"))
            status = int(tail[:3])
            if not 100 <= status < 200:  # an interim answer: the final one follows
                return status, (version, http.client.parse_headers(io.BytesIO(rest)))


def _head(authority, method, target, headers, body):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: " + authority]
    lines += ["%s: %s" % kv for kv in headers.items()]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append("Content-Length: %d" % len(body or b""))
    if any("\r" in line or "\n" in line for line in lines):
        raise ValueError("a request line or header holds a line break")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Response:
    """An answer whose head was read: ``status``, ``headers`` (an
    http.client.HTTPMessage); its body is read with read() or readline().
    close() drops the connection unless the body was read to its end.
    ``timeout`` bounds each read of an event stream (AsyncClient sets it)."""

    timeout = None

    def __init__(self, pool, conn, method, status, head):
        version, headers = head
        self.pool, self.conn, self.status, self.headers = pool, conn, status, headers
        self.buf = bytearray()
        self.done = False
        self.chunk = 0  # bytes left of the current chunk
        te = (headers.get("Transfer-Encoding") or "").lower()
        conn_hdr = (headers.get("Connection") or "").lower()
        self.keep = version == "HTTP/1.1" and "close" not in conn_hdr
        if method == "HEAD" or status in (204, 304):
            self.mode, self.left = "length", 0
        elif "chunked" in te:
            self.mode, self.left = "chunked", None
        elif headers.get("Content-Length") is not None:
            self.mode, self.left = "length", int(headers.get("Content-Length"))
            if self.left < 0:
                raise http.client.HTTPException("a negative Content-Length")
        else:
            self.mode, self.left, self.keep = "eof", None, False
        if self.left == 0:
            self._finish()

    def close(self):
        if not self.done:
            self.done = True
            self.conn.close()

    async def read(self, limit, too_large):
        """The whole body; too_large() is raised past limit bytes."""
        if self.mode == "length" and self.left > limit:
            self.close()
            raise too_large()
        body = bytearray(self.buf)
        self.buf.clear()
        while True:
            piece = await self._piece()
            if not piece:
                return bytes(body)
            body += piece
            if len(body) > limit:
                self.close()
                raise too_large()

    async def readline(self, n):
        """The next line of the body, with its end of line, at most n bytes
        (a longer line is cut there); b"" at the body's end."""
        while True:
            i = self.buf.find(b"\n", 0, n)
            if i >= 0 or len(self.buf) >= n:
                end = i + 1 if i >= 0 else n
                line = bytes(self.buf[:end])
                del self.buf[:end]
                return line
            piece = await self._piece()
            if not piece:
                line = bytes(self.buf)
                self.buf.clear()
                return line
            self.buf += piece

    async def _piece(self):
        """The next bytes of the body (b"" at its end)."""
        if self.done:
            return b""
        try:
            piece = await (self._chunked() if self.mode == "chunked" else self._plain())
        except asyncio.IncompleteReadError:
            self.close()
            raise Closed() from None
        except BaseException:
            self.close()
            raise
        if not piece:
            self._finish()
        return piece

    async def _plain(self):
        want = PIECE if self.left is None else min(PIECE, self.left)
        if want == 0:
            return b""
        piece = await self.conn.reader.read(want)
        if self.left is not None:
            if not piece:
                raise Closed()
            self.left -= len(piece)
        return piece

    async def _chunked(self):
        r = self.conn.reader
        if self.chunk == 0:
            size = int((await r.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while await r.readuntil(b"\r\n") != b"\r\n":
                    pass  # a trailer
                return b""
            self.chunk = size
        piece = await r.read(min(PIECE, self.chunk))
        if not piece:
            raise Closed()
        self.chunk -= len(piece)
        if self.chunk == 0 and await r.readexactly(2) != b"\r\n":
            raise http.client.HTTPException("a chunk without its CRLF")
        return piece

    def _finish(self):
        self.done = True
        if self.keep:
            self.pool.release(self.conn)
        else:
            self.conn.close()
