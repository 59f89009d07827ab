"""Helpers of the live tests: a TCP proxy that drops an event stream, and a
raw Redis CLIENT PAUSE (standard library only)."""

import re
import socket
import threading

_EVENT = re.compile(rb"(?:^|\n)data:[^\n]*\n\n")


class DropProxy:
    """A loopback proxy to the API that cuts the first /events connection
    after `events` complete events (rewriting Host, which the API checks)."""

    def __init__(self, upstream, events=2):
        self.upstream = upstream  # "127.0.0.1:port"
        self.events = events
        self.event_requests = []  # the request heads of /events connections
        self.dropped = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.sock.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(c,), daemon=True).start()

    def _conn(self, c):
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(65536)
            if not b:
                c.close()
                return
            head += b
        head, rest = head.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        lines = [b"Host: " + self.upstream.encode() if l.lower().startswith(b"host:") else l for l in lines]
        head = b"\r\n".join(lines)
        cut = False
        if b"/events" in lines[0]:
            self.event_requests.append(head.decode())
            cut = len(self.event_requests) == 1
        host, port = self.upstream.rsplit(":", 1)
        u = socket.create_connection((host, int(port)))
        u.sendall(head + b"\r\n\r\n" + rest)
        threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
        self._pump(u, c, cut)

    def _pump(self, src, dst, cut):
        seen = b""
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if cut:
                    seen += b
                    ms = list(_EVENT.finditer(seen))
                    if len(ms) >= self.events:
                        dst.sendall(b[: len(b) - (len(seen) - ms[self.events - 1].end())])
                        self.dropped += 1
                        break
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def redis_pause(addr, ms):
    """CLIENT PAUSE ms ALL on the Redis at addr ("host:port")."""
    host, port = addr.rsplit(":", 1)
    args = [b"CLIENT", b"PAUSE", str(ms).encode(), b"ALL"]
    cmd = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(cmd)
        reply = s.recv(64)
    if not reply.startswith(b"+OK"):
        raise RuntimeError("CLIENT PAUSE: %r" % reply)
