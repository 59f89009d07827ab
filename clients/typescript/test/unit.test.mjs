// Unit tests of the agentq TypeScript client against a fake server, and of
// the exec-agent helpers with real subprocesses. Run: npm test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import util from "node:util";
import { readFileSync, writeFileSync, mkdtempSync, openSync, readSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as aq from "../dist/index.js";
import { fake, sse } from "./fake.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, "..", "..", "..");
const task = (id, state, extra = {}) => ({ id, agent: "a", action: "", state, attempts: 1, restarts: 0, error_class: "", error: "", history: [], ...extra });

async function withFake(t, fn) {
  const f = await fake(fn);
  t.after(() => f.close());
  return f;
}
const client = (f, o = {}) => new aq.Client({ url: f.url, token: "tok", backoff: 5, ...o });

test("enqueue sends the fields and the token", async (t) => {
  const f = await withFake(t, () => [202, { id: "j1", created: true, duplicate: false, state: "pending" }]);
  const r = await client(f).enqueue({ agent: "llm", params: { q: 1 }, id: "j1", action: "ask", queue: "q", correlation_id: "c", in: 90_000, deadline: "10m", notify: ["hook"], fail_if_unavailable: true, tenant: "team-a", priority: "high" });
  assert.equal(r.id, "j1");
  assert.equal(r.state, aq.State.PENDING);
  const req = f.requests[0];
  assert.equal(req.method, "POST");
  assert.equal(req.path, "/api/v1/tasks");
  assert.equal(req.headers.authorization, "Bearer tok");
  assert.equal(req.headers["content-type"], "application/json");
  assert.deepEqual(req.body, { agent: "llm", params: { q: 1 }, id: "j1", action: "ask", queue: "q", correlation_id: "c", in: "90s", deadline: "10m", notify: ["hook"], fail_if_unavailable: true, tenant: "team-a", priority: "high" });
});

test("the token comes from AGENTQ_API_TOKEN", async (t) => {
  const f = await withFake(t, () => [200, { status: "ok", redis: "ok" }]);
  process.env.AGENTQ_API_TOKEN = "envtok";
  t.after(() => delete process.env.AGENTQ_API_TOKEN);
  await new aq.Client({ url: f.url }).health();
  assert.equal(f.requests[0].headers.authorization, "Bearer envtok");
});

test("typed errors carry the code", async (t) => {
  const replies = {
    "/api/v1/tasks/x/cancel": [409, { code: "task_ended", error: "task x has ended", state: "succeeded" }],
    "/api/v1/tasks/nope": [404, { code: "not_found", error: "no task" }],
    "/api/v1/tasks": [400, { code: "invalid_request", error: "agent: unknown" }],
    "/api/v1/deadletters/d/requeue": [409, { code: "conflict", error: "busy" }],
  };
  const f = await withFake(t, (r) => replies[r.path]);
  const c = client(f);
  await assert.rejects(c.cancel("x", { reason: "bye" }), (e) => e instanceof aq.TaskEndedError && e.status === 409 && e.code === "task_ended" && e.state === "succeeded");
  assert.deepEqual(f.requests.at(-1).body, { reason: "bye" });
  await assert.rejects(c.get("nope"), aq.NotFoundError);
  await assert.rejects(c.enqueue({ agent: "zz" }), (e) => e instanceof aq.InvalidRequestError && /agent: unknown/.test(e.message));
  await assert.rejects(c.requeue("d", { run: 2 }), (e) => e instanceof aq.ConflictError && e instanceof aq.APIError);
  assert.deepEqual(f.requests.at(-1).body, { run: 2 });
  await assert.rejects(c.requeue("d", { run: 2, fresh: true }), aq.ConflictError);
  assert.deepEqual(f.requests.at(-1).body, { run: 2, fresh: true });
});

test("a 503 is retried with the same id", async (t) => {
  const bodies = [];
  const f = await withFake(t, (r) => {
    bodies.push(r.body);
    return bodies.length < 3 ? [503, { code: "unavailable", error: "redis" }] : [200, { id: "j", created: false, duplicate: true, state: "pending" }];
  });
  const r = await client(f).enqueue({ agent: "llm", id: "j" });
  assert.equal(r.duplicate, true);
  assert.equal(bodies.length, 3);
  assert.ok(bodies.every((b) => b.id === "j"));
});

test("an enqueue without an id, a cancel and a mixed batch are not retried", async (t) => {
  const f = await withFake(t, () => [503, { code: "unavailable", error: "redis" }]);
  await assert.rejects(client(f).enqueue({ agent: "llm" }), aq.UnavailableError);
  await assert.rejects(client(f).cancel("x"), aq.UnavailableError);
  await assert.rejects(client(f).enqueueBatch([{ agent: "a", id: "1" }, { agent: "a" }]), aq.UnavailableError);
  assert.equal(f.requests.length, 3);
});

test("a connection error is a TransportError, retried for reads", async (t) => {
  const f = await fake(() => [200, {}]);
  await f.close();
  await assert.rejects(new aq.Client({ url: f.url, retries: 2, backoff: 1 }).get("x"),
    (e) => e instanceof aq.TransportError && /ECONNREFUSED/.test(e.message) && /^GET \/api\/v1\/tasks\/x: /.test(e.message));
});

test("a call times out", async (t) => {
  const f = await withFake(t, () => new Promise(() => {}));
  await assert.rejects(client(f, { timeout: 200, retries: 0 }).get("x"), (e) => e instanceof aq.TransportError && /timed out/.test(e.message));
});

test("wait long-polls until the task ends", async (t) => {
  const waits = [];
  const f = await withFake(t, (r) => {
    waits.push(r.query.wait);
    return waits.length < 3 ? [200, task("w", "active")] : [200, task("w", "succeeded", { result: { ok: 1 } })];
  });
  const got = await client(f).wait("w");
  assert.equal(got.state, aq.State.SUCCEEDED);
  assert.deepEqual(got.result, { ok: 1 });
  assert.deepEqual(waits, ["60s", "60s", "60s"]);
});

test("wait times out with the last view", async (t) => {
  const f = await withFake(t, async (r) => {
    await new Promise((res) => setTimeout(res, 100));
    return [200, task("w", "retrying")];
  });
  await assert.rejects(client(f).wait("w", { timeout: 300 }), (e) => e instanceof aq.WaitTimeoutError && e.task.state === "retrying");
  for (const r of f.requests) if (r.query.wait) assert.ok(/^\d+m?s$/.test(r.query.wait) && parseInt(r.query.wait) <= 300);
});

test("events resume after a drop, without loss or repeats", async (t) => {
  const evs = [[1, "queued", {}], [2, "progress", { data: { pct: 10 } }], [3, "output", { data: "hi" }], [4, "progress", { data: { pct: 90 } }], [5, "succeeded", {}]];
  const lasts = [];
  const f = await withFake(t, (r) => {
    const last = r.headers["last-event-id"];
    lasts.push(last);
    const after = last ? Number(last) : 0;
    return sse(evs.filter((e) => e[0] > after), lasts.length === 1 ? 2 : undefined);
  });
  const got = [];
  for await (const ev of client(f).events("t")) got.push(ev);
  assert.deepEqual(got.map((e) => e.seq), [1, 2, 3, 4, 5]);
  assert.deepEqual(got.map((e) => e.event), ["queued", "progress", "output", "progress", "succeeded"]);
  assert.equal(got[2].data, "hi");
  assert.deepEqual(lasts, [undefined, "2"]);
  assert.equal(f.requests[0].path, "/api/v1/tasks/t/events");
  assert.equal(f.requests[0].headers.accept, "text/event-stream");
});

test("events after a seq; a 404 is typed", async (t) => {
  const f = await withFake(t, (r) => r.path === "/api/v1/tasks/none/events" ? [404, { code: "not_found", error: "no" }] : sse([[8, "task_canceled", { reason: "x" }], [9, "never", {}]]));
  const got = [];
  for await (const ev of client(f).events("t", { after: 7 })) got.push([ev.seq, ev.event, ev.reason]);
  assert.deepEqual(got, [[8, "task_canceled", "x"]]);
  assert.equal(f.requests[0].headers["last-event-id"], "7");
  await assert.rejects(async () => { for await (const _ of client(f).events("none")); }, aq.NotFoundError);
});

test("parseSSE: comments, multi-line data, CRLF, split chunks", async () => {
  const text = ": c\r\nid: 3\r\nevent: output\r\ndata: {\"data\":\r\ndata: 1}\r\n\r\ndata: not json\n\n";
  const bytes = new TextEncoder().encode(text);
  const body = new ReadableStream({ start(c) { for (const b of bytes) c.enqueue(new Uint8Array([b])); c.close(); } });
  const got = [];
  for await (const ev of aq.parseSSE(body)) got.push(ev);
  assert.deepEqual(got, [{ data: 1, event: "output", seq: 3 }, { data: "not json" }]);
});

test("dead letters: query and iteration; ids are escaped", async (t) => {
  const f = await withFake(t, (r) => r.path.startsWith("/api/v1/deadletters") ? [200, { deadletters: [{ id: "d" }], total: 1, limit: 5, offset: 0 }] : [200, task("a/b c", "pending")]);
  const p = await client(f).deadletters({ limit: 5, agent: "llm", class: "timeout" });
  assert.equal(p.deadletters[0].id, "d");
  assert.deepEqual(f.requests[0].query, { limit: "5", agent: "llm", class: "timeout" });
  const ids = [];
  for await (const d of client(f).iterDeadletters()) ids.push(d.id);
  assert.deepEqual(ids, ["d"]);
  await client(f).get("a/b c");
  assert.equal(f.requests.at(-1).rawPath, "/api/v1/tasks/a%2Fb%20c");
});

test("workers: the registry's workers and their tasks", async (t) => {
  const w = { id: "h:1:ab", state: "gone", orphaned: 1, tasks: [{ id: "t", agent: "llm", orphaned: true, recovery_by: "2026-03-01T12:00:00Z" }] };
  const f = await withFake(t, () => [200, { workers: [w] }]);
  const got = await client(f).workers();
  assert.equal(f.requests[0].path, "/api/v1/workers");
  assert.equal(f.requests[0].method, "GET");
  assert.equal(got[0].state, "gone");
  assert.equal(got[0].tasks[0].id, "t");
  assert.equal(got[0].tasks[0].orphaned, true);
});

test("usage: the fleet's totals, grouped, with the window", async (t) => {
  const rep = { by: "tenant", total: { total_tokens: 30, cost_usd: 0.5 }, groups: [{ by: "tenant", key: "acme", total_tokens: 30, cost_usd: 0.5, attempts: 2 }], hours: [{ hour: "2026-03-01T12:00:00Z", total_tokens: 30 }] };
  const f = await withFake(t, () => [200, rep]);
  const got = await client(f).usage({ by: "tenant", since: "2h" });
  assert.equal(f.requests[0].path, "/api/v1/usage");
  assert.equal(f.requests[0].method, "GET");
  assert.deepEqual(f.requests[0].query, { by: "tenant", since: "2h" });
  assert.equal(got.groups[0].key, "acme");
  assert.equal(got.hours[0].total_tokens, 30);
  await client(f).usage();
  assert.deepEqual(f.requests[1].query, {});
});

test("task listings: query, cursor pages; pause and resume a queue", async (t) => {
  const pages = { "": { tasks: [{ id: "a", listed_as: "pending" }], next_cursor: "c1" }, c1: { tasks: [{ id: "b", listed_as: "pending" }], next_cursor: "" } };
  const f = await withFake(t, (r) => r.path === "/api/v1/tasks" ? [200, pages[r.query.cursor ?? ""]]
    : [200, { queue: "a b", paused: r.path.endsWith("/pause"), changed: true }]);
  const p = await client(f).tasks({ queue: "q", state: ["retrying", "deferred"], correlation_id: "o", limit: 5 });
  assert.equal(p.next_cursor, "c1");
  assert.deepEqual(f.requests[0].query, { queue: "q", state: "retrying,deferred", correlation_id: "o", limit: "5" });
  const ids = [];
  for await (const tk of client(f).iterTasks({ agent: "llm" })) ids.push(tk.id);
  assert.deepEqual(ids, ["a", "b"]);
  assert.equal((await client(f).pauseQueue("a b")).paused, true);
  assert.equal(f.requests.at(-1).rawPath, "/api/v1/queues/a%20b/pause");
  assert.equal((await client(f).resumeQueue("a b")).paused, false);
  assert.equal(f.requests.at(-1).method, "POST");
});

test("tenants: each tenant of each queue, or of one queue", async (t) => {
  const tn = { queue: "default", tenant: "acme", pending: 5, pending_by_priority: { normal: 5 }, in_flight: 2, concurrency: 2, weight: 3, capped: true, oldest_waiting: "2026-03-01T12:00:00Z" };
  const f = await withFake(t, () => [200, { tenants: [tn] }]);
  const got = await client(f).tenants();
  assert.equal(f.requests[0].path, "/api/v1/tenants");
  assert.equal(f.requests[0].method, "GET");
  assert.equal(got[0].tenant, "acme");
  assert.equal(got[0].in_flight, 2);
  assert.equal(got[0].capped, true);
  await client(f).tenants({ queue: "other" });
  assert.deepEqual(f.requests[1].query, { queue: "other" });
});

test("schedules", async (t) => {
  const f = await withFake(t, () => [200, { schedules: [{ name: "nightly", cron: "30 1 * * *", last_task_id: "sched:nightly:20261125T003000Z" }] }]);
  const got = await client(f).schedules();
  assert.equal(got[0].name, "nightly");
  assert.equal(got[0].last_task_id, "sched:nightly:20261125T003000Z");
  assert.equal(f.requests[0].method, "GET");
  assert.equal(f.requests[0].path, "/api/v1/schedules");
});

// ---- held to api/openapi.yaml ----

const openapi = readFileSync(join(ROOT, "api", "openapi.yaml"), "utf8");
function block(text, header, indent) {
  const lines = text.split("\n");
  const i = lines.indexOf(" ".repeat(indent) + header);
  assert.ok(i >= 0, `${header} not in openapi.yaml`);
  const out = [];
  for (const l of lines.slice(i + 1)) {
    if (l.trim() && l.length - l.trimStart().length <= indent) break;
    out.push(l);
  }
  return out;
}

// ---- a hostile server: redirects refused, replies and event lines bounded (issue #35) ----

test("redirects are refused, typed, not retried, and the token never leaves", async (t) => {
  const other = await withFake(t, () => [200, { id: "elsewhere", created: true, state: "pending" }]);
  const calls = { enqueue: (c) => c.enqueue({ agent: "llm", id: "j" }), get: (c) => c.get("j"), events: async (c) => { for await (const _ of c.events("j")) { /* none */ } } };
  for (const status of [301, 302, 303, 307, 308]) {
    for (const [name, call] of Object.entries(calls)) {
      const f = await withFake(t, (r) => [status, {}, { Location: other.url + r.path }]);
      const c = new aq.Client({ url: f.url, token: "sekrit-0123456789abcdef", backoff: 5 });
      await assert.rejects(call(c), (e) => {
        assert.ok(e instanceof aq.RedirectError, `${status} ${name}: ${e}`);
        assert.equal(e.status, status);
        assert.ok(e.location.startsWith(other.url), e.location);
        assert.match(e.message, new RegExp(other.url));
        assert.doesNotMatch(e.message, /sekrit/);
        return true;
      });
      assert.equal(f.requests.length, 1, `${status} ${name}: a refused redirect is not retried`);
    }
  }
  assert.deepEqual(other.requests, [], "nothing, the token least of all, went to the other origin");
  for (const [status, headers] of [[300, {}], [302, {}], [304, {}]]) {
    const f = await withFake(t, () => [status, {}, headers]);
    await assert.rejects(client(f).enqueue({ agent: "llm", id: "j" }), (e) => e instanceof aq.RedirectError && e.status === status);
  }
});

test("a reply over maxReplyBytes is a ResponseTooLargeError, not retried", async (t) => {
  const body = JSON.stringify({ id: "t", state: "succeeded", result: "x".repeat(5000) });
  const replies = {
    "content-length": () => [200, JSON.parse(body)],
    streamed: () => (res) => { res.writeHead(200, { "Content-Type": "application/json" }); res.write(body.slice(0, 2500)); res.end(body.slice(2500)); },
    error: () => [503, { code: "unavailable", error: "x".repeat(5000) }],
  };
  for (const [name, fn] of Object.entries(replies)) {
    const f = await withFake(t, fn);
    await assert.rejects(client(f, { maxReplyBytes: 4096 }).get("t"), (e) => e instanceof aq.ResponseTooLargeError && e.limit === 4096 && /maxReplyBytes/.test(e.message), name);
    assert.equal(f.requests.length, 1, `${name}: an oversized reply is not retried`);
    if (name !== "error") assert.equal((await client(f).get("t")).state, "succeeded", "the default bound reads it");
  }
});

// A streamer sending one event-stream line of n bytes, then a terminal event.
const bigLine = (n) => async (res) => {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  res.on("error", () => {});
  res.write("id: 1\nevent: output\ndata: ");
  const block = "x".repeat(65536);
  let closed = false;
  res.once("close", () => { closed = true; res.emit("drain"); });
  for (let i = 0; i < n / block.length && !closed; i++) {
    if (!res.write(block)) await new Promise((r) => res.once("drain", r));
  }
  if (!res.destroyed) res.end("\n\nid: 2\nevent: succeeded\ndata: {}\n\n");
};

test("an event-stream line over maxEventBytes is an EventTooLargeError, once", async (t) => {
  const f = await withFake(t, () => bigLine(4 << 20));
  const read = async (c) => { const got = []; for await (const ev of c.events("t", { timeout: 60_000 })) got.push(ev.event); return got; };
  await assert.rejects(read(client(f)), (e) => e instanceof aq.EventTooLargeError && e.limit === aq.MAX_EVENT_BYTES && /maxEventBytes/.test(e.message));
  assert.equal(f.requests.length, 1, "an oversized line is not retried");
  assert.deepEqual(await read(client(f, { maxEventBytes: 8 << 20 })), ["output", "succeeded"], "under a raised bound the same stream reads");
  const lines = new ReadableStream({ start(c) { for (let i = 0; i < 20; i++) c.enqueue(new TextEncoder().encode(`data: ${"x".repeat(100)}\n`)); c.enqueue(new TextEncoder().encode("\n")); c.close(); } });
  await assert.rejects(async () => { for await (const _ of aq.parseSSE(lines, undefined, 1000)) { /* none */ } }, aq.EventTooLargeError, "an event of many lines is bounded too");
});

test("the token is private: not in console.log, util.inspect, JSON or own keys", () => {
  const c = new aq.Client({ url: "http://127.0.0.1:1", token: "tok-secret-0123456789" });
  for (const shown of [util.inspect(c, { showHidden: true, depth: 10, getters: true }), JSON.stringify(c), String(c), Object.keys(c).join(","), Object.getOwnPropertyNames(c).join(",")]) {
    assert.doesNotMatch(shown, /tok-secret/);
  }
  assert.equal(c.token, undefined);
});

test("every route of api/openapi.yaml has a client method", () => {
  const routes = [];
  let path;
  for (const l of block(openapi, "paths:", 0)) {
    let m = /^  (\/\S+):\s*$/.exec(l);
    if (m) path = m[1];
    m = /^    (get|post|put|patch|delete):\s*$/.exec(l);
    if (m) routes.push(`${m[1].toUpperCase()} ${path}`);
  }
  assert.ok(routes.includes("POST /api/v1/tasks"));
  for (const r of routes) {
    assert.ok(aq.ROUTES[r], `route ${r} has no client method`);
    for (const name of aq.ROUTES[r]) assert.equal(typeof aq.Client.prototype[name], "function", name);
  }
});

test("every TaskRequest field is enqueue's", () => {
  const props = block(block(openapi, "TaskRequest:", 4).join("\n"), "properties:", 6);
  const fields = props.map((l) => /^        ([a-z_]+):/.exec(l)?.[1]).filter(Boolean);
  assert.ok(fields.includes("correlation_id"));
  for (const f of fields) assert.ok(aq.TASK_FIELDS.includes(f), `TaskRequest.${f} missing`);
});

test("the constants cover the API's enums", () => {
  const states = /enum: \[(pending, scheduled[^\]]*succeeded[^\]]*)\]/.exec(openapi)[1].split(", ");
  assert.deepEqual(new Set(states), new Set(Object.values(aq.State)));
  const codes = /enum: \[(invalid_request, [^\]]*)\]/.exec(openapi)[1].split(", ");
  assert.deepEqual(new Set(codes), new Set(Object.keys(aq.ERRORS)));
});

test("one version", () => {
  const v = readFileSync(join(ROOT, "clients", "VERSION"), "utf8").trim();
  assert.equal(aq.VERSION, v);
  assert.equal(JSON.parse(readFileSync(join(HERE, "..", "package.json"), "utf8")).version, v);
});

// ---- agent helpers, real subprocesses ----

const AGENT = `
import { run, AgentError, StepResult } from ${JSON.stringify(new URL("../dist/agent.js", import.meta.url).href)};
class RateLimitError extends Error { constructor(m) { super(m); this.name = "RateLimitError"; this.status = 429; } }
// Shaped like the openai / anthropic SDKs' APIError: .status and .headers (a fetch Headers).
class SDKRateLimitError extends Error {
  constructor(m, headers) { super(m); this.name = "RateLimitError"; this.status = 429; this.headers = headers; }
}
run(async (req) => {
  const mode = req.params?.mode;
  req.progress({ pct: 50 });
  req.output("partial");
  req.usage({ input_tokens: 3, output_tokens: 4 });
  if (mode === "boom") throw new Error("connect ECONNREFUSED 127.0.0.1:443");
  if (mode === "rate") throw new RateLimitError("slow down");
  if (mode === "agent_error") throw new AgentError("bad params", 400);
  if (mode === "sdk_rate") throw new SDKRateLimitError("429 rate limited", new Headers({
    "retry-after-ms": "1500", "x-ratelimit-remaining-requests": "0", authorization: "Bearer sk-test", "set-cookie": "a=b" }));
  if (mode === "sleep") { process.stderr.write("ready\\n"); await new Promise((r) => setTimeout(r, 60000)); }
  if (mode === "steps") {
    const a = await req.step("plan", () => "ran again");
    const b = await req.step("call", async () => new StepResult("c", { total_tokens: 5 }));
    const c = await req.step("sync", () => ["s"]);
    return { a, b, c };
  }
  return { echo: req.params, task: req.task_id };
});
`;

function runAgent(params, { events = true, term = false, steps = undefined } = {}) {
  const d = mkdtempSync(join(tmpdir(), "agentq-ts-"));
  const script = join(d, "agent.mjs");
  writeFileSync(script, AGENT);
  const evFile = join(d, "events");
  writeFileSync(evFile, "");
  const fd = openSync(evFile, "a");
  const env = { PATH: process.env.PATH };
  if (events) env.AGENTQ_EVENTS_FD = "3";
  const p = spawn(process.execPath, [script], { env, stdio: ["pipe", "pipe", "pipe", events ? fd : "ignore"] });
  closeSync(fd);
  p.stdin.end(JSON.stringify({ task_id: "t1", agent: "ts", params, attempt: 1, steps }));
  let out = "", err = "";
  p.stdout.on("data", (c) => (out += c));
  p.stderr.on("data", (c) => {
    err += c;
    if (term && err.includes("ready")) p.kill("SIGTERM");
  });
  return new Promise((resolve) => p.on("close", (code) => {
    const lines = readFileSync(evFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
    resolve({ code, resp: out.trim() ? JSON.parse(out) : null, lines, err });
  }));
}

test("agent: success with events and usage", async () => {
  const { code, resp, lines } = await runAgent({ mode: "echo", n: 1 });
  assert.equal(code, 0);
  assert.deepEqual(resp, { status: "success", code: 0, data: { echo: { mode: "echo", n: 1 }, task: "t1" }, usage: { input_tokens: 3, output_tokens: 4 } });
  assert.deepEqual(lines, [{ type: "progress", data: { pct: 50 } }, { type: "output", data: "partial" }]);
});

test("agent: steps (#37): a recorded step is kept, new ones are written as step lines", async () => {
  const { code, resp, lines } = await runAgent({ mode: "steps" }, { steps: { plan: { p: 1 } } });
  assert.equal(code, 0);
  assert.deepEqual(resp.data, { a: { p: 1 }, b: "c", c: ["s"] });
  assert.deepEqual(lines.slice(2), [
    { type: "step", name: "call", usage: { total_tokens: 5 }, data: "c" },
    { type: "step", name: "sync", data: ["s"] },
  ]);
});

test("agent: no events fd", async () => {
  const { code, resp, lines } = await runAgent({ mode: "echo" }, { events: false });
  assert.deepEqual([code, resp.status, lines], [0, "success", []]);
});

test("agent: errors become error responses", async () => {
  let { resp } = await runAgent({ mode: "boom" });
  assert.deepEqual(resp.status === "error" && [resp.code, resp.error], [0, "Error: connect ECONNREFUSED 127.0.0.1:443"]);
  ({ resp } = await runAgent({ mode: "rate" }));
  assert.deepEqual([resp.code, resp.error], [429, "RateLimitError: slow down"]);
  ({ resp } = await runAgent({ mode: "agent_error" }));
  assert.deepEqual([resp.code, resp.error], [400, "bad params"]);
});

test("agent: an SDK error passes its back-pressure on (real process)", async () => {
  const { resp } = await runAgent({ mode: "sdk_rate" });
  assert.equal(resp.code, 429);
  assert.deepEqual(resp.headers, { "retry-after-ms": "1500", "x-ratelimit-remaining-requests": "0" });
  assert.equal(resp.retry_after, 1.5);
});

// ---- agent helpers: back-pressure from errors shaped like the SDKs' (no SDK installed) ----

const agentLib = await import("../dist/agent.js");

// Shaped like openai's / anthropic's APIError (TypeScript SDKs): .status, .headers.
class APIError extends Error {
  constructor(status, headers, message = `${status} status code`) {
    super(message);
    this.name = status === 429 ? "RateLimitError" : "APIError";
    this.status = status;
    this.headers = headers;
  }
}

test("agent back-pressure: an OpenAI RateLimitError with fetch Headers", () => {
  const resp = agentLib.errorResponse(new APIError(429, new Headers({
    "retry-after-ms": "1500", "Retry-After": "2", "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "1.5s", "x-should-retry": "true",
    authorization: "Bearer sk-secret", "set-cookie": "a=b", "x-request-id": "req_1", "content-type": "application/json",
  })));
  assert.equal(resp.code, 429);
  assert.deepEqual(resp.headers, {
    "retry-after-ms": "1500", "retry-after": "2", "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "1.5s", "x-should-retry": "true",
  });
  assert.equal(resp.retry_after, 1.5, "retry-after-ms first, as the worker reads it");
});

test("agent back-pressure: Anthropic headers as a plain record; Retry-After seconds", () => {
  const resp = agentLib.errorResponse(new APIError(529, {
    "Retry-After": "7", "anthropic-ratelimit-tokens-remaining": "0",
    "anthropic-ratelimit-tokens-reset": "2026-11-28T12:00:30Z", "x-api-key": "sk-ant",
  }));
  assert.equal(resp.code, 529);
  assert.deepEqual(resp.headers, {
    "retry-after": "7", "anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "2026-11-28T12:00:30Z",
  });
  assert.equal(resp.retry_after, 7);
});

test("agent back-pressure: an HTTP date becomes RFC 3339; response.headers is read too", () => {
  const e = new Error("503");
  e.response = { status: 503, headers: new Headers({ "retry-after": "Sat, 28 Nov 2026 12:00:07 GMT" }) };
  const resp = agentLib.errorResponse(e);
  assert.equal(resp.code, 503);
  assert.deepEqual(resp.headers, { "retry-after": "Sat, 28 Nov 2026 12:00:07 GMT" });
  assert.equal(resp.retry_after, "2026-11-28T12:00:07.000Z");
});

test("agent back-pressure: invalid values are left to the worker", () => {
  const resp = agentLib.errorResponse(new APIError(429, { "retry-after": "soon", "retry-after-ms": "Infinity" }));
  assert.deepEqual(resp.headers, { "retry-after": "soon", "retry-after-ms": "Infinity" });
  assert.equal(resp.retry_after, undefined);
  assert.ok(!("retry_after" in resp));
});

test("agent back-pressure: AgentError states its own", () => {
  let resp = agentLib.errorResponse(new agentLib.AgentError("slow down", 429, {
    retryAfter: 3, headers: { "X-RateLimit-Reset-Tokens": "3s", Cookie: "c" },
  }));
  assert.deepEqual(resp, { status: "error", code: 429, error: "slow down", headers: { "x-ratelimit-reset-tokens": "3s" }, retry_after: 3 });
  resp = agentLib.errorResponse(new agentLib.AgentError("later", 503, { retryAfter: new Date("2030-01-01T00:00:00Z") }));
  assert.equal(resp.retry_after, "2030-01-01T00:00:00.000Z");
  assert.ok(!("headers" in resp));
  resp = agentLib.errorResponse(new agentLib.AgentError("bad params", 400));
  assert.deepEqual(resp, { status: "error", code: 400, error: "bad params" });
});

test("agent back-pressure: no response, no back-pressure", () => {
  for (const e of [new Error("connect ECONNREFUSED"), new APIError(500, new Headers({ "content-type": "text/plain" })), "thrown string"]) {
    const resp = agentLib.errorResponse(e);
    assert.ok(!("headers" in resp) && !("retry_after" in resp), JSON.stringify(resp));
  }
});

test("agent back-pressure: the allowlist is the worker's", () => {
  for (const n of ["Retry-After", "retry-after-ms", "X-Should-Retry", "x-ratelimit-limit-requests", "anthropic-ratelimit-requests-reset"]) {
    assert.ok(agentLib.backPressureHeader(n), n);
  }
  for (const n of ["authorization", "x-api-key", "x-ratelimit-", "anthropic-ratelimit-", "retry-after-s", "openai-organization", "x-request-id"]) {
    assert.ok(!agentLib.backPressureHeader(n), n);
  }
});

test("agent: SIGTERM exits 143 cleanly", async () => {
  const { code, resp, err } = await runAgent({ mode: "sleep" }, { term: true });
  assert.equal(code, 143);
  assert.equal(resp, null);
  assert.ok(!/at .*\(/.test(err), err);
});

test("a task carries its usage and each attempt event's (the task JSON's names)", async (t) => {
  const usage = { input_tokens: 3006, output_tokens: 350, cached_tokens: 1920, total_tokens: 3356, cost_usd: 0.008615, priced: true };
  const ev = { event: "succeeded", attempt: 2, usage: { model: "gpt-4o", input_tokens: 2006, output_tokens: 300, cached_tokens: 1920, total_tokens: 2306, cost_usd: 0.005615, priced: true } };
  const f = await withFake(t, () => [200, task("u1", "succeeded", { usage, history: [ev] })]);
  const got = await client(f).get("u1");
  assert.equal(got.usage.cost_usd, 0.008615);
  assert.equal(got.usage.cached_tokens, 1920);
  assert.equal(got.history[0].usage.model, "gpt-4o");
});

test("a 409 budget_exhausted is a BudgetExhaustedError naming the budget and when it resets", () => {
  const e = aq.fromReply(409, { code: "budget_exhausted", error: "budget exhausted",
    budget: 'budget "tenant acme" tokens 50000/1h0m0s', resets_at: "2030-01-01T00:00:00Z" });
  assert.ok(e instanceof aq.BudgetExhaustedError);
  assert.equal(e.budget, 'budget "tenant acme" tokens 50000/1h0m0s');
  assert.equal(e.resetsAt, "2030-01-01T00:00:00Z");
});

// ---- signals and suspends (#37) ----

test("signal: POST /api/v1/tasks/{id}/signals/{name} with the data; retried; typed errors", async (t) => {
  let n = 0;
  const replies = {
    "/api/v1/tasks/gone/signals/a": [404, { code: "not_found", error: "no task gone" }],
    "/api/v1/tasks/done/signals/a": [409, { code: "task_ended", error: "ended", state: "canceled" }],
    "/api/v1/tasks/t/signals/bad%20name": [400, { code: "invalid_signal", error: "bad name" }],
    "/api/v1/tasks/t/signals/many": [409, { code: "signal_cap", error: "64 signals" }],
    "/api/v1/tasks/t/signals/big": [413, { code: "request_too_large", error: "over 64 KiB" }],
  };
  const f = await withFake(t, (r) => {
    if (replies[r.rawPath]) return replies[r.rawPath];
    if (r.rawPath === "/api/v1/tasks/flaky/signals/a" && n++ === 0) return [503, { code: "unavailable", error: "redis" }];
    return [200, { id: decodeURIComponent(r.rawPath.split("/")[4]), name: "approve", state: "pending", resumed: true, duplicate: false }];
  });
  const c = client(f);
  const r = await c.signal("t/1", "approve", { ok: true });
  assert.deepEqual(r, { id: "t/1", name: "approve", state: "pending", resumed: true, duplicate: false });
  let req = f.requests.at(-1);
  assert.deepEqual([req.method, req.rawPath, req.body, req.headers["content-type"]], ["POST", "/api/v1/tasks/t%2F1/signals/approve", { ok: true }, "application/json"]);
  await c.signal("t", "go:2");
  req = f.requests.at(-1);
  assert.deepEqual([req.rawPath, req.body], ["/api/v1/tasks/t/signals/go%3A2", undefined]); // no data: no body (null)
  await c.signal("t", "zero", 0);
  assert.equal(f.requests.at(-1).body, 0);
  assert.equal((await c.signal("flaky", "a", [1])).resumed, true);
  assert.deepEqual(f.requests.slice(-2).map((q) => q.body), [[1], [1]]);
  await assert.rejects(c.signal("gone", "a"), aq.NotFoundError);
  await assert.rejects(c.signal("done", "a"), (e) => e instanceof aq.TaskEndedError && e.state === "canceled");
  await assert.rejects(c.signal("t", "bad name"), (e) => e instanceof aq.InvalidSignalError && e instanceof aq.InvalidRequestError && e.code === "invalid_signal");
  await assert.rejects(c.signal("t", "many"), (e) => e instanceof aq.SignalCapError && e instanceof aq.ConflictError);
  await assert.rejects(c.signal("t", "big", "x"), aq.RequestTooLargeError);
  assert.throws(() => c.signal("t", ""), TypeError);
  assert.equal(aq.State.WAITING, "waiting");
});

const SUSPEND_AGENT = `
import { run, suspend, Suspend } from ${JSON.stringify(new URL("../dist/agent.js", import.meta.url).href)};
run(async (req) => {
  const mode = req.params.mode;
  req.usage({ input_tokens: 2, output_tokens: 1 });
  if (mode === "approve") {
    const draft = await req.step("draft", () => "text");
    if ("approve" in req.signals) return { draft, approved: req.signals.approve, resume: req.resume, kind: req.wait.kind, timed_out: req.wait.timed_out };
    if (req.wait?.timed_out) return { draft, approved: null, resume: req.resume };
    return suspend({ signal: "approve", timeout: 86_400_000 });
  }
  if (mode === "sleep") throw suspend({ sleep: "10m" });
  if (mode === "until") return new Suspend({ until: new Date(Date.UTC(2030, 0, 2, 3, 4, 5)) });
  if (mode === "children") return req.suspend({ children: [{ agent: "llm", params: { k: 1 }, name: "a", deadline: 60_000 }, { agent: "llm", id: "c2" }], mode: "any", timeout: "1h" });
  if (mode === "bad") return suspend({ sleep: "1m", signal: "x" });
  return { resume: req.resume, signals: req.signals, children: req.children };
});
`;

function runSuspendAgent(request) {
  const d = mkdtempSync(join(tmpdir(), "agentq-ts-"));
  const script = join(d, "agent.mjs");
  writeFileSync(script, SUSPEND_AGENT);
  const p = spawn(process.execPath, [script], { env: { PATH: process.env.PATH }, stdio: ["pipe", "pipe", "pipe"] });
  p.stdin.end(JSON.stringify({ task_id: "t1", agent: "ts", attempt: 1, ...request }));
  let out = "", err = "";
  p.stdout.on("data", (c) => (out += c));
  p.stderr.on("data", (c) => (err += c));
  return new Promise((resolve) => p.on("close", (code) => {
    assert.equal(code, 0, err);
    resolve(JSON.parse(out));
  }));
}

test("agent: suspend replies {status: suspend, wait} on stdout, usage kept", async () => {
  const usage = { input_tokens: 2, output_tokens: 1 };
  for (const [mode, wait] of [
    ["approve", { signal: "approve", timeout: "86400s" }],
    ["sleep", { sleep: "10m" }],
    ["until", { until: "2030-01-02T03:04:05.000Z" }],
    ["children", { children: [{ agent: "llm", params: { k: 1 }, name: "a", deadline: "60s" }, { agent: "llm", id: "c2" }], mode: "any", timeout: "1h" }],
  ]) {
    assert.deepEqual(await runSuspendAgent({ params: { mode } }), { status: "suspend", wait, usage }, mode);
  }
  const bad = await runSuspendAgent({ params: { mode: "bad" } });
  assert.equal(bad.status, "error");
  assert.match(bad.error, /exactly one of sleep, until, signal, children/);
});

test("agent: a resumed request's resume, wait, signals and children", async () => {
  let r = await runSuspendAgent({ params: { mode: "approve" }, steps: { draft: "kept" }, resume: 1,
    wait: { kind: "signal", signal: "approve", timed_out: false }, signals: { approve: { ok: true } } });
  assert.deepEqual(r.data, { draft: "kept", approved: { ok: true }, resume: 1, kind: "signal", timed_out: false });
  r = await runSuspendAgent({ params: { mode: "approve" }, steps: { draft: "kept" }, resume: 1, wait: { kind: "signal", signal: "approve", timed_out: true } });
  assert.deepEqual(r.data, { draft: "kept", approved: null, resume: 1 });
  const kids = [{ id: "t1.a", name: "a", state: "succeeded", result: 1 }];
  r = await runSuspendAgent({ params: { mode: "none" }, children: kids });
  assert.deepEqual(r.data, { resume: 0, signals: {}, children: kids });
});

test("result returns a succeeded task's result", async (t) => {
  const f = await withFake(t, () => [200, task("r1", "succeeded", { result: { answer: 42 } })]);
  assert.deepEqual(await client(f).result("r1", { timeout: 5_000 }), { answer: 42 });
  assert.ok(f.requests[0].query.wait, "result long-polls as wait does");
});

test("result of a dead-lettered task throws a TaskFailedError", async (t) => {
  const f = await withFake(t, () => [200, task("r2", "dead_lettered", { error_class: "rate_limited", reason: "retries_exhausted", error: "HTTP 429: slow down" })]);
  await assert.rejects(client(f).result("r2"), (e) => {
    assert.ok(e instanceof aq.TaskFailedError && e instanceof aq.AgentqError);
    assert.equal(e.name, "TaskFailedError");
    assert.deepEqual([e.taskId, e.state, e.errorClass, e.reason, e.error], ["r2", "dead_lettered", "rate_limited", "retries_exhausted", "HTTP 429: slow down"]);
    assert.equal(e.task.id, "r2");
    assert.match(e.message, /rate_limited/);
    return true;
  });
});

test("result of a canceled task throws a TaskCanceledError", async (t) => {
  const f = await withFake(t, () => [200, task("r3", "canceled", { cancel_reason: "changed my mind" })]);
  await assert.rejects(client(f).result("r3"), (e) => {
    assert.ok(e instanceof aq.TaskCanceledError && !(e instanceof aq.TaskFailedError));
    assert.deepEqual([e.taskId, e.state, e.reason], ["r3", "canceled", "changed my mind"]);
    return true;
  });
});

test("result times out like wait", async (t) => {
  const f = await withFake(t, () => [200, task("r4", "active")]);
  await assert.rejects(client(f).result("r4", { timeout: 0 }), (e) => e instanceof aq.WaitTimeoutError && e.task.state === "active");
});

// The Standard Webhooks specification's example, which internal/webhook's
// Sign (the worker's signer) reproduces byte for byte.
const VEC = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", id: "msg_p5jXN8AQM9LWM0D4loKWxJek", ts: 1614265330,
  body: '{"test": 2432232314}', sig: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};
// What internal/webhook's Sign computes, written with node:crypto.
const { createHmac } = await import("node:crypto");
const signAs = (secret, id, ts, body) =>
  "v1," + createHmac("sha256", Buffer.from(secret.slice("whsec_".length), "base64")).update(`${id}.${ts}.`).update(body).digest("base64");
const vecHeaders = (o = {}) => ({ "webhook-id": o.id ?? VEC.id, "webhook-timestamp": String(o.ts ?? VEC.ts), "webhook-signature": o.sig ?? VEC.sig });
const at = (ts) => ({ now: ts * 1000 });

test("verifyWebhook: the known vector", async () => {
  assert.equal(signAs(VEC.secret, VEC.id, VEC.ts, VEC.body), VEC.sig);
  assert.deepEqual(await aq.verifyWebhook(vecHeaders(), VEC.body, VEC.secret, at(VEC.ts + 10)), { test: 2432232314 });
  assert.deepEqual(await aq.verifyWebhook(vecHeaders(), new TextEncoder().encode(VEC.body), VEC.secret, { now: new Date((VEC.ts - 10) * 1000) }), { test: 2432232314 });
});

test("verifyWebhook: a fresh delivery, several signatures, Headers and any case", async () => {
  const body = '{"type":"succeeded","task":{"id":"t1","state":"succeeded"}}';
  const ts = Math.floor(Date.now() / 1000);
  const good = signAs(VEC.secret, "d1", ts, body);
  const rec = { "Webhook-Id": "d1", "WEBHOOK-TIMESTAMP": String(ts), "Webhook-Signature": `v1,bm90IGl0 v2,whatever ${good}` };
  assert.equal((await aq.verifyWebhook(rec, body, VEC.secret)).task.id, "t1");
  assert.equal((await aq.verifyWebhook(new Headers(rec), Buffer.from(body), VEC.secret)).type, "succeeded");
});

test("verifyWebhook: refusals", async () => {
  const refused = (h, o = {}) => assert.rejects(
    aq.verifyWebhook(h, o.body ?? VEC.body, o.secret ?? VEC.secret, { now: VEC.ts * 1000, ...o.opts }), aq.WebhookVerificationError);
  await refused(vecHeaders(), { body: '{"test": 2432232315}' }); // body changed
  await refused(vecHeaders({ id: "msg_other" }));
  await refused(vecHeaders({ ts: VEC.ts + 1 }), { opts: at(VEC.ts + 1) });
  await refused(vecHeaders(), { secret: "whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB" }); // other key
  await refused(vecHeaders({ sig: "v2," + VEC.sig.slice(3) }));
  await refused(vecHeaders({ sig: "" }));
  await refused({ "webhook-id": VEC.id, "webhook-signature": VEC.sig });
  await refused(vecHeaders({ ts: "16142653a0" }));
  await refused(vecHeaders(), { opts: at(VEC.ts + 301) }); // too old
  await refused(vecHeaders(), { opts: at(VEC.ts - 301) }); // too far ahead
  await refused(vecHeaders(), { opts: { ...at(VEC.ts + 11), tolerance: 10_000 } });
  const notJSON = signAs(VEC.secret, VEC.id, VEC.ts, "not json");
  await refused(vecHeaders({ sig: notJSON }), { body: "not json" });
});

test("verifyWebhook: tolerance and secret", async () => {
  assert.equal((await aq.verifyWebhook(vecHeaders(), VEC.body, VEC.secret, { ...at(VEC.ts + 3600), tolerance: 3_600_000 })).test, 2432232314);
  await aq.verifyWebhook(vecHeaders(), VEC.body, VEC.secret.slice("whsec_".length), at(VEC.ts));
  await assert.rejects(aq.verifyWebhook(vecHeaders(), VEC.body, "whsec_!!!", at(VEC.ts)), TypeError);
  await assert.rejects(aq.verifyWebhook(vecHeaders(), { test: 1 }, VEC.secret, at(VEC.ts)), TypeError);
});

test("wait stops on its AbortSignal: it rejects with the signal's reason, no retry", async (t) => {
  const f = await withFake(t, () => new Promise(() => {})); // a long poll that never answers
  const ctl = new AbortController();
  const waiting = client(f, { retries: 3 }).wait("x", { signal: ctl.signal });
  while (f.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
  ctl.abort();
  await assert.rejects(waiting, (e) => e.name === "AbortError");
  assert.equal(f.requests.length, 1);
  const done = new AbortController();
  done.abort();
  await assert.rejects(client(f).result("x", { signal: done.signal }), (e) => e.name === "AbortError");
  assert.equal(f.requests.length, 1, "an aborted signal sends nothing");
});
