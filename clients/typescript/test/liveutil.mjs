// Helpers of the live tests: a TCP proxy that drops an event stream, and a
// raw Redis CLIENT PAUSE.
import net from "node:net";

const EVENT = /(?:^|\n)data:[^\n]*\n\n/g;

// A loopback proxy to the API that cuts the first /events connection after
// `events` complete events (rewriting Host, which the API checks).
export async function dropProxy(upstream, events = 2) {
  const [host, port] = [upstream.slice(0, upstream.lastIndexOf(":")), Number(upstream.slice(upstream.lastIndexOf(":") + 1))];
  const p = { eventRequests: [], dropped: 0 };
  const server = net.createServer((c) => {
    let head = Buffer.alloc(0);
    const onData = (b) => {
      head = Buffer.concat([head, b]);
      const i = head.indexOf("\r\n\r\n");
      if (i < 0) return;
      c.off("data", onData);
      c.pause();
      const lines = head.subarray(0, i).toString("latin1").split("\r\n").map((l) => (/^host:/i.test(l) ? `Host: ${upstream}` : l));
      const rest = head.subarray(i + 4);
      let cut = false;
      if (lines[0].includes("/events")) {
        p.eventRequests.push(lines.join("\r\n"));
        cut = p.eventRequests.length === 1;
      }
      const u = net.connect(port, host, () => {
        u.write(Buffer.concat([Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1"), rest]));
        c.pipe(u);
        c.resume();
      });
      let seen = "";
      u.on("data", (b) => {
        if (!cut) return c.write(b);
        seen += b.toString("latin1");
        const ms = [...seen.matchAll(EVENT)];
        if (ms.length >= events) {
          const end = ms[events - 1].index + ms[events - 1][0].length;
          c.write(b.subarray(0, b.length - (seen.length - end)));
          cut = false;
          p.dropped++;
          c.destroy();
          u.destroy();
          return;
        }
        c.write(b);
      });
      u.on("end", () => c.end());
      u.on("error", () => c.destroy());
      c.on("error", () => u.destroy());
      c.on("close", () => u.destroy());
    };
    c.on("data", onData);
    c.on("error", () => {});
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  p.url = `http://127.0.0.1:${server.address().port}`;
  p.close = () => new Promise((r) => server.close(() => r()));
  return p;
}

// CLIENT PAUSE ms ALL on the Redis at addr ("host:port").
export function redisPause(addr, ms) {
  const i = addr.lastIndexOf(":");
  const args = ["CLIENT", "PAUSE", String(ms), "ALL"];
  const cmd = `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("");
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(addr.slice(i + 1)), addr.slice(0, i), () => s.write(cmd));
    s.once("data", (b) => {
      s.destroy();
      b.toString().startsWith("+OK") ? resolve() : reject(new Error(`CLIENT PAUSE: ${b}`));
    });
    s.once("error", reject);
  });
}
