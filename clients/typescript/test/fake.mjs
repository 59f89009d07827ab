// A small fake of agentq's HTTP API for the unit tests: a real loopback
// HTTP server whose replies a test scripts with a function.
import http from "node:http";

export async function fake(fn) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const raw = Buffer.concat(chunks).toString();
    const u = new URL(req.url, "http://x");
    const r = { method: req.method, path: u.pathname, rawPath: req.url.split("?")[0], query: Object.fromEntries(u.searchParams), headers: req.headers, body: raw ? JSON.parse(raw) : undefined };
    requests.push(r);
    const out = await fn(r);
    if (typeof out === "function") return out(res);
    const [status, body, headers = {}] = out;
    res.writeHead(status, { "Content-Type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url, requests, server,
    close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
  };
}

// A streamer writing events [[seq, name, data]] as SSE; with closeAfter=k
// it drops the connection in the middle of the k-th event.
export function sse(events, closeAfter) {
  return (res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write(": hello\n\n");
    for (const [i, [seq, name, data]] of events.entries()) {
      const msg = `id: ${seq}\nevent: ${name}\ndata: ${JSON.stringify({ ...data, seq, event: name })}\n\n`;
      if (closeAfter !== undefined && i === closeAfter) {
        res.write(msg.slice(0, msg.length >> 1));
        setTimeout(() => res.destroy(), 20);
        return;
      }
      res.write(msg);
    }
    res.end();
  };
}
