"""A small fake of agentq's HTTP API for the unit tests: a real loopback
HTTP server whose replies a test scripts with a function."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: many connections opened at
    # once (the async client's tests open 60) would overflow it, and on a
    # busy machine a dropped handshake is retried by the kernel seconds
    # later.
    request_queue_size = 128


class Fake:
    """Fake(fn): fn(req) -> (status, body[, headers]) or a callable taking
    the handler (to stream). req has method, path, query, headers, body."""

    def __init__(self, fn):
        self.fn = fn
        self.requests = []
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _do(self):
                from urllib.parse import urlsplit, parse_qs
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                u = urlsplit(self.path)
                req = Req(self.command, u.path, {k: v[0] for k, v in parse_qs(u.query).items()},
                          self.headers, json.loads(raw) if raw else None)
                req.client = self.client_address  # (host, port): one per connection
                fake.requests.append(req)
                out = fake.fn(req)
                if callable(out):
                    out(self)
                    return
                status, body = out[0], out[1]
                headers = out[2] if len(out) > 2 else {}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _do

        self.server = _Server(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        # A client that drops a connection (a reply too large, a stream
        # left early) is what a test wants: no traceback.
        self.server.handle_error = lambda request, client_address: None
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Req:
    def __init__(self, method, path, query, headers, body):
        self.method, self.path, self.query, self.headers, self.body = method, path, query, headers, body


def sse(events, close_after=None):
    """A streamer writing events [(seq, name, data)] as SSE; with
    close_after=k it drops the connection after k events (the last one
    cut in half)."""
    def stream(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b": hello\n\n")
        for i, (seq, name, data) in enumerate(events):
            payload = dict(data, seq=seq, event=name)
            msg = ("id: %d\nevent: %s\ndata: %s\n\n" % (seq, name, json.dumps(payload))).encode()
            if close_after is not None and i == close_after:
                h.wfile.write(msg[: len(msg) // 2])
                h.wfile.flush()
                h.close_connection = True
                return
            h.wfile.write(msg)
            h.wfile.flush()
        h.close_connection = True
    return stream
