// The client of agentq's HTTP API: the platform's fetch, no dependencies.

import {
  AgentqError, APIError, RedirectError, ResponseTooLargeError, TransportError, UnavailableError, WaitTimeoutError, fromReply,
  TaskCanceledError, TaskFailedError,
} from "./errors.js";
import { parseSSE } from "./sse.js";
import {
  ENDED_STATES, State, TERMINAL_EVENTS,
  type Agent, type BatchResponse, type CancelResponse, type DeadLetter, type DeadLetterPage,
  type Duration, type EnqueueResponse, type ListedTask, type PauseResult, type RequeueResponse, type Schedule, type SignalResult, type Task,
  type TaskEvent, type TaskFilter, type TaskPage, type TaskRequest, type Tenant, type UsageReport, type Worker,
} from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:8080";
/** The longest `?wait=` the API accepts, in milliseconds. */
export const MAX_WAIT_MS = 60_000;
/** The default bound of a reply body: the API's largest replies are a task
 * with its result (an agent's output is at most 4 MiB, up to 6 times that
 * once JSON-escaped) and its history, or a page of them. */
export const MAX_REPLY_BYTES = 64 << 20;
/** The default bound of one event-stream line (and of one event's data):
 * an event's live data is at most 64 KiB and its error text 8 KiB. */
export const MAX_EVENT_BYTES = 1 << 20;

/** Every route of the API and the client methods that serve it (the tests
 * hold this table to api/openapi.yaml). */
export const ROUTES: Record<string, readonly string[]> = {
  "POST /api/v1/tasks": ["enqueue", "enqueueBatch"],
  "GET /api/v1/tasks": ["tasks", "iterTasks"],
  "GET /api/v1/tasks/{id}": ["get", "wait", "result"],
  "GET /api/v1/tasks/{id}/events": ["events"],
  "POST /api/v1/tasks/{id}/cancel": ["cancel"],
  "POST /api/v1/tasks/{id}/signals/{name}": ["signal"],
  "GET /api/v1/agents": ["agents"],
  "GET /api/v1/workers": ["workers"],
  "GET /api/v1/tenants": ["tenants"],
  "GET /api/v1/schedules": ["schedules"],
  "GET /api/v1/usage": ["usage"],
  "GET /api/v1/deadletters": ["deadletters"],
  "POST /api/v1/deadletters/{id}/requeue": ["requeue"],
  "POST /api/v1/queues/{name}/pause": ["pauseQueue"],
  "POST /api/v1/queues/{name}/resume": ["resumeQueue"],
  "GET /api/v1/openapi.yaml": ["openapi"],
  "GET /healthz": ["health"],
  // Prometheus scrapes it (docs/http-api.md, "Metrics"): no client method.
  "GET /metrics": [],
};

/** The fields of TaskRequest, as the API names them. */
export const TASK_FIELDS: readonly (keyof TaskRequest)[] = [
  "id", "agent", "action", "params", "correlation_id", "queue", "in", "deadline", "notify",
  "fail_if_unavailable", "tenant", "priority", "max_tokens", "max_cost_usd",
];

export interface ClientOptions {
  /** Default: $AGENTQ_URL, else http://127.0.0.1:8080. */
  url?: string;
  /** Bearer token. Default: $AGENTQ_API_TOKEN. */
  token?: string;
  /** Bound of every call, in ms (a wait adds its long poll). Default 10 s. */
  timeout?: number;
  /** Retries of idempotent calls on a connection error or 503. Default 4. */
  retries?: number;
  /** First backoff between retries, in ms (doubling). Default 200. */
  backoff?: number;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** Bound of a reply body in bytes (past it: ResponseTooLargeError, not retried). Default MAX_REPLY_BYTES, 64 MiB. */
  maxReplyBytes?: number;
  /** Bound of an event-stream line or event in bytes (past it: EventTooLargeError, not retried). Default MAX_EVENT_BYTES, 1 MiB. */
  maxEventBytes?: number;
}

interface CallOptions {
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  idempotent?: boolean;
  timeout?: number;
  /** Aborts the call: it rejects with the signal's reason, not retried. */
  signal?: AbortSignal;
}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name] || undefined;
}

/** A Go duration string from milliseconds (strings pass as they are). */
export function goDuration(v: Duration): string {
  if (typeof v === "string") return v;
  if (!Number.isFinite(v) || v < 0) throw new TypeError(`a duration is a Go duration string or non-negative milliseconds, not ${v}`);
  const ms = Math.round(v);
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** The JSON of one task: durations as Go durations, a Date deadline as RFC 3339, unset fields left out. */
export function taskRequest(t: TaskRequest): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(t)) {
    if (v === undefined || v === null) continue;
    if (k === "in") out[k] = goDuration(v as Duration);
    else if (k === "deadline") out[k] = v instanceof Date ? v.toISOString() : goDuration(v as Duration);
    else out[k] = v;
  }
  return out;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * transportCause names why a call got no answer: fetch says only "fetch
 * failed", the cause is below it (an error with a `code` such as
 * ECONNREFUSED, or an AggregateError of one per address tried).
 */
function transportCause(e: unknown): string {
  const parts: string[] = [];
  for (let cur: unknown = e, depth = 0; cur && depth < 5; depth++) {
    const err = cur as { message?: string; code?: string; errors?: unknown[]; cause?: unknown };
    const inner = err.errors?.find((x) => (x as { code?: string })?.code) as { code?: string; message?: string } | undefined;
    const code = err.code ?? inner?.code;
    if (code) return `${code}: ${inner?.message || err.message || code}`;
    if (err.message && !parts.includes(err.message)) parts.push(err.message);
    cur = err.cause;
  }
  return parts.join(": ") || String(e);
}

function retryAfter(h: Headers): number | undefined {
  const v = Number(h.get("retry-after"));
  return Number.isFinite(v) && v > 0 ? v : undefined;
}

/** The body of resp as text, at most limit bytes (ResponseTooLargeError past it). */
async function readText(resp: Response, limit: number, what: string): Promise<string> {
  if (Number(resp.headers.get("content-length") ?? 0) > limit) {
    await resp.body?.cancel().catch(() => {});
    throw new ResponseTooLargeError(what, limit);
  }
  if (!resp.body) return "";
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let n = 0;
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text + dec.decode();
      n += value.length;
      if (n > limit) throw new ResponseTooLargeError(what, limit);
      text += dec.decode(value, { stream: true });
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** The body of resp: its JSON, or its text (at most limit bytes). */
async function readBody(resp: Response, limit: number, what: string): Promise<unknown> {
  const text = await readText(resp, limit, what);
  if ((resp.headers.get("content-type") ?? "").includes("json")) {
    try {
      return JSON.parse(text || "null");
    } catch {
      return text;
    }
  }
  return text;
}

/** The `result` of an ended task's JSON; a TaskCanceledError when it was
 * canceled, a TaskFailedError when it ended any other way than succeeded. */
export function taskResult<T = unknown>(task: Task<T>): T {
  if (task.state === State.SUCCEEDED) return task.result as T;
  if (task.state === State.CANCELED) throw new TaskCanceledError(task);
  throw new TaskFailedError(task);
}

/**
 * A client of agentq's HTTP API.
 *
 * ```ts
 * const aq = new Client({ url: "http://127.0.0.1:8080", token });
 * const r = await aq.enqueue({ agent: "llm", params: { q: 1 }, id: "job-1" });
 * const task = await aq.wait(r.id, { timeout: 300_000 });
 * ```
 *
 * Idempotent calls (reads, and an enqueue whose tasks all have an id) are
 * retried on a connection error and on 503 with exponential backoff; the
 * others are never retried. A redirect is never followed (RedirectError:
 * the token would go with it, and a POST would become a GET); a reply body
 * past `maxReplyBytes` or an event-stream line past `maxEventBytes` is an
 * error, not retried. The token is a private field: neither
 * `console.log(client)` nor `JSON.stringify(client)` shows it.
 */
export class Client {
  readonly url: string;
  readonly #token?: string;
  readonly timeout: number;
  readonly retries: number;
  readonly backoff: number;
  readonly maxReplyBytes: number;
  readonly maxEventBytes: number;
  private readonly fetch: typeof fetch;

  constructor(opts: ClientOptions | string = {}) {
    const o = typeof opts === "string" ? { url: opts } : opts;
    this.url = (o.url ?? env("AGENTQ_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    this.#token = o.token ?? env("AGENTQ_API_TOKEN");
    this.timeout = o.timeout ?? 10_000;
    this.retries = o.retries ?? 4;
    this.backoff = o.backoff ?? 200;
    this.maxReplyBytes = o.maxReplyBytes ?? MAX_REPLY_BYTES;
    this.maxEventBytes = o.maxEventBytes ?? MAX_EVENT_BYTES;
    const f = o.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("agentq: no fetch in this runtime (Node >= 18 has one)");
    this.fetch = f;
  }

  private headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { Accept: "application/json", ...extra };
    if (this.#token) h.Authorization = `Bearer ${this.#token}`;
    return h;
  }

  /** fetch that never follows a redirect: a 3xx (or, in a browser, an
   * opaque redirect) is a RedirectError naming its Location. */
  private async fetchHere(method: string, url: string, init: RequestInit): Promise<Response> {
    const resp = await this.fetch(url, { ...init, method, redirect: "manual" });
    if (resp.type === "opaqueredirect" || (resp.status >= 300 && resp.status < 400)) {
      await resp.body?.cancel().catch(() => {});
      throw new RedirectError(method, url, resp.status, resp.headers.get("location") ?? undefined);
    }
    return resp;
  }

  private href(path: string, query?: CallOptions["query"]): string {
    let u = this.url + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) u += `?${s}`;
    }
    return u;
  }

  private async once<T>(method: string, path: string, o: CallOptions): Promise<T> {
    o.signal?.throwIfAborted();
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), o.timeout ?? this.timeout);
    const onAbort = () => ctl.abort();
    o.signal?.addEventListener("abort", onAbort, { once: true });
    let resp: Response;
    let body: unknown;
    try {
      const init: RequestInit = { signal: ctl.signal, headers: this.headers(o.body !== undefined ? { "Content-Type": "application/json" } : undefined) };
      if (o.body !== undefined) init.body = JSON.stringify(o.body);
      resp = await this.fetchHere(method, this.href(path, o.query), init);
      body = await readBody(resp, this.maxReplyBytes, `${method} ${path}`);
    } catch (e) {
      if (e instanceof AgentqError) throw e;
      o.signal?.throwIfAborted();
      throw new TransportError(`${method} ${path}: ${ctl.signal.aborted ? "timed out" : transportCause(e)}`, { cause: e });
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
    }
    if (resp.status >= 400) throw fromReply(resp.status, body, retryAfter(resp.headers));
    return body as T;
  }

  /** @internal */
  async pause(attempt: number, err?: unknown): Promise<void> {
    let d = this.backoff * 2 ** attempt;
    const ra = err instanceof APIError ? err.retryAfter : undefined;
    if (ra) d = Math.max(d, Math.min(ra * 1000, 30_000));
    await sleep(Math.min(d, 10_000) * (0.5 + Math.random() / 2));
  }

  private async call<T>(method: string, path: string, o: CallOptions = {}): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(method, path, o);
      } catch (e) {
        const retryable = e instanceof TransportError || e instanceof UnavailableError;
        if (!retryable || !o.idempotent || attempt >= this.retries) throw e;
        await this.pause(attempt, e);
      }
    }
  }

  private static path(fmt: string, id: string): string {
    if (!id) throw new TypeError("agentq: an id is required");
    return fmt.replace("{id}", encodeURIComponent(id));
  }

  /**
   * Enqueue one task: `{id, created, duplicate, state}` (and the existing
   * `task` when `duplicate`). With an `id` it is retried on a connection
   * error or 503 — a try whose write landed makes the next one answer
   * `duplicate`, so the task is created once; without one it is never
   * retried.
   */
  enqueue(task: TaskRequest): Promise<EnqueueResponse> {
    return this.call("POST", "/api/v1/tasks", { body: taskRequest(task), idempotent: !!task.id });
  }

  /** Enqueue a batch (at most 1000); retried like enqueue when every task has an id. */
  enqueueBatch(tasks: TaskRequest[], opts: { fail_if_unavailable?: boolean } = {}): Promise<BatchResponse> {
    const body: Record<string, unknown> = { tasks: tasks.map(taskRequest) };
    if (opts.fail_if_unavailable !== undefined) body.fail_if_unavailable = opts.fail_if_unavailable;
    return this.call("POST", "/api/v1/tasks", { body, idempotent: tasks.every((t) => !!t.id) });
  }

  /** The task JSON (state, attempts, history, `result` once succeeded). */
  get(id: string): Promise<Task> {
    return this.call("GET", Client.path("/api/v1/tasks/{id}", id), { idempotent: true });
  }

  /**
   * Wait for the task to end (succeeded, dead_lettered, canceled) and
   * return its JSON (`result`, `error_class`, `error`, `reason`). Long-polls
   * `?wait=` (at most 60 s a call); `timeout` (ms, default none) throws a
   * WaitTimeoutError carrying the last view; `signal` stops the wait: it
   * rejects with the signal's reason (an AbortError) and the task is left
   * as it is.
   */
  async wait<T = unknown>(id: string, opts: { timeout?: number; signal?: AbortSignal } = {}): Promise<Task<T>> {
    const end = opts.timeout === undefined ? undefined : Date.now() + opts.timeout;
    for (;;) {
      const left = Math.max(0, Math.floor(end === undefined ? MAX_WAIT_MS : Math.min(MAX_WAIT_MS, end - Date.now())));
      const t0 = Date.now();
      const task = await this.call<Task<T>>("GET", Client.path("/api/v1/tasks/{id}", id), {
        query: left > 0 ? { wait: goDuration(left) } : undefined,
        idempotent: true,
        timeout: this.timeout + left,
        signal: opts.signal,
      });
      if (ENDED_STATES.includes(task.state)) return task;
      if (end !== undefined && Date.now() >= end) throw new WaitTimeoutError(id, task);
      // A server without long polls answered at once: poll gently.
      if (Date.now() - t0 < Math.min(left, 1000) * 0.9) await sleep(Math.min(500, left));
      opts.signal?.throwIfAborted();
    }
  }

  /**
   * Wait for the task to end (as `wait` does) and return its `result`. A
   * dead-lettered task throws a TaskFailedError (`errorClass`, `reason`,
   * `error`, `taskId`, `state`), a canceled one a TaskCanceledError;
   * `timeout` (ms) throws a WaitTimeoutError as `wait` does. `T` only types
   * the result (it is not checked); `signal` stops it as it stops `wait`.
   */
  async result<T = unknown>(id: string, opts: { timeout?: number; signal?: AbortSignal } = {}): Promise<T> {
    return taskResult(await this.wait<T>(id, opts));
  }

  /**
   * The task's events, oldest first, as an async iterable: each with its
   * `event` name and `seq` (`data` for progress and output). Ends after the
   * terminal event (succeeded, dead_lettered, task_canceled). A dropped
   * connection is resumed after the last event seen (Last-Event-ID): no
   * event is lost or repeated. `after` starts after that seq; `timeout`
   * (ms) bounds the whole stream; `signal` stops it.
   */
  async *events(id: string, opts: { after?: number; timeout?: number; signal?: AbortSignal } = {}): AsyncGenerator<TaskEvent, void, undefined> {
    const path = Client.path("/api/v1/tasks/{id}/events", id);
    const end = opts.timeout === undefined ? undefined : Date.now() + opts.timeout;
    let last = opts.after;
    let failures = 0;
    for (;;) {
      if (opts.signal?.aborted) return;
      if (end !== undefined && Date.now() >= end) throw new WaitTimeoutError(id);
      const ctl = new AbortController();
      const onAbort = () => ctl.abort();
      opts.signal?.addEventListener("abort", onAbort);
      // An idle stream (no byte for 90 s, keep-alives included) is reconnected;
      // the overall timeout aborts too.
      let idle: ReturnType<typeof setTimeout> | undefined;
      const arm = () => {
        clearTimeout(idle);
        const left = end === undefined ? 90_000 : Math.min(90_000, end - Date.now());
        idle = setTimeout(() => ctl.abort(), Math.max(1, left));
      };
      arm();
      let progressed = false;
      try {
        let resp: Response;
        try {
          const h: Record<string, string> = { Accept: "text/event-stream" };
          if (last !== undefined) h["Last-Event-ID"] = String(last);
          resp = await this.fetchHere("GET", this.href(path), { headers: this.headers(h), signal: ctl.signal });
        } catch (e) {
          if (e instanceof AgentqError) throw e;
          if (opts.signal?.aborted) return;
          if (failures >= this.retries) throw new TransportError(`GET ${path}: ${transportCause(e)}`, { cause: e });
          await this.pause(failures++);
          continue;
        }
        if (resp.status >= 400 || !resp.body) {
          const err = fromReply(resp.status, await readBody(resp, this.maxReplyBytes, `GET ${path}`).catch(() => ""), retryAfter(resp.headers));
          if (!(err instanceof UnavailableError) || failures >= this.retries) throw err;
          await this.pause(failures++, err);
          continue;
        }
        try {
          for await (const ev of parseSSE(resp.body, arm, this.maxEventBytes)) {
            progressed = true;
            failures = 0;
            if (typeof ev.seq === "number") last = ev.seq;
            yield ev;
            if (TERMINAL_EVENTS.includes(ev.event)) return;
          }
        } catch (e) {
          if (e instanceof AgentqError) throw e;
          // dropped: resume after the last event seen
        }
      } finally {
        clearTimeout(idle);
        opts.signal?.removeEventListener("abort", onAbort);
        ctl.abort();
      }
      if (opts.signal?.aborted) return;
      if (!progressed) {
        if (failures >= this.retries + 4) throw new TransportError(`GET ${path}: the stream keeps ending without events`);
        await this.pause(Math.min(failures++, 4));
      }
    }
  }

  /**
   * Cancel the task: `{id, state, previous_state, removed, stopping,
   * reason}`; a TaskEndedError (`.state`) when it has already ended. Not
   * retried (a retry could meet its own cancel).
   */
  cancel(id: string, opts: { reason?: string } = {}): Promise<CancelResponse> {
    return this.call("POST", Client.path("/api/v1/tasks/{id}/cancel", id), {
      body: opts.reason !== undefined ? { reason: opts.reason } : undefined,
    });
  }

  /**
   * Send the signal `name` (1-128 of A-Z a-z 0-9 . _ : -) with `data` (any
   * JSON value, at most 64 KiB; undefined: null) to the task: `{id, name,
   * state, resumed, duplicate}`. `resumed` when the task was waiting for
   * it and now runs; `duplicate` when the task already had a signal of that
   * name (the first is kept: use a new name per wait, e.g. "approve-2"). A
   * signal the task is not waiting for yet is kept until it waits for it.
   * NotFoundError, TaskEndedError (`.state`), InvalidSignalError,
   * SignalCapError and RequestTooLargeError (data over 64 KiB) are typed.
   * Retried on a connection error or 503: a try that landed makes the next
   * one a duplicate, which still resumes a task waiting for it.
   */
  signal(id: string, name: string, data?: unknown): Promise<SignalResult> {
    if (!name) throw new TypeError("agentq: a signal name is required");
    return this.call("POST", `${Client.path("/api/v1/tasks/{id}", id)}/signals/${encodeURIComponent(name)}`, {
      body: data, idempotent: true,
    });
  }

  /** A page of waiting and running tasks (each without history, with
   * `listed_as`); follow `next_cursor` until it is "" (a page may be short,
   * even empty, before that). */
  tasks(opts: TaskFilter & { limit?: number; cursor?: string } = {}): Promise<TaskPage> {
    const state = Array.isArray(opts.state) ? opts.state.join(",") : opts.state;
    return this.call("GET", "/api/v1/tasks", {
      query: { queue: opts.queue, state, agent: opts.agent, tenant: opts.tenant, correlation_id: opts.correlation_id,
        limit: opts.limit, cursor: opts.cursor },
      idempotent: true,
    });
  }

  /** Every task the filters select, page by page. */
  async *iterTasks(opts: TaskFilter & { page?: number } = {}): AsyncGenerator<ListedTask, void, undefined> {
    let cursor: string | undefined;
    for (;;) {
      const p = await this.tasks({ ...opts, limit: opts.page ?? 100, cursor });
      yield* p.tasks;
      if (!p.next_cursor) return;
      cursor = p.next_cursor;
    }
  }

  /** Pause a queue: its tasks are held, none starts (a NotFoundError for an unknown queue). */
  pauseQueue(name: string): Promise<PauseResult> {
    return this.call("POST", Client.path("/api/v1/queues/{id}/pause", name), { idempotent: true });
  }

  /** Resume a paused queue. */
  resumeQueue(name: string): Promise<PauseResult> {
    return this.call("POST", Client.path("/api/v1/queues/{id}/resume", name), { idempotent: true });
  }

  /** A page of dead letters, newest first. */
  deadletters(opts: { limit?: number; offset?: number; agent?: string; class?: string } = {}): Promise<DeadLetterPage> {
    return this.call("GET", "/api/v1/deadletters", {
      query: { limit: opts.limit, offset: opts.offset, agent: opts.agent, class: opts.class },
      idempotent: true,
    });
  }

  /** Every dead letter the filters select, page by page. */
  async *iterDeadletters(opts: { agent?: string; class?: string; page?: number } = {}): AsyncGenerator<DeadLetter, void, undefined> {
    let offset = 0;
    for (;;) {
      const p = await this.deadletters({ limit: opts.page ?? 100, offset, agent: opts.agent, class: opts.class });
      yield* p.deadletters;
      offset += p.deadletters.length;
      if (p.deadletters.length === 0 || offset >= p.total) return;
    }
  }

  /** Requeue a dead letter as a fresh run; `run`: the run the caller saw (another is a ConflictError); `fresh`: delete the steps the task recorded first (kept otherwise: the new run skips their work). Not retried. */
  requeue(id: string, opts: { run?: number; fresh?: boolean } = {}): Promise<RequeueResponse> {
    const body: Record<string, unknown> = {};
    if (opts.run !== undefined) body.run = opts.run;
    if (opts.fresh !== undefined) body.fresh = opts.fresh;
    return this.call("POST", Client.path("/api/v1/deadletters/{id}/requeue", id), {
      body: Object.keys(body).length ? body : undefined,
    });
  }

  /** The configured agents with their breaker. */
  async agents(): Promise<Agent[]> {
    return (await this.call<{ agents: Agent[] }>("GET", "/api/v1/agents", { idempotent: true })).agents;
  }

  /** The worker processes of the registry, live ones first (a gone one's orphaned tasks say when lease recovery puts them back). */
  async workers(): Promise<Worker[]> {
    return (await this.call<{ workers: Worker[] }>("GET", "/api/v1/workers", { idempotent: true })).workers;
  }

  /** The tenants of each queue (of `opts.queue` only), by queue then tenant: waiting, in flight, cap, weight, capped, oldest waiting. */
  async tenants(opts: { queue?: string } = {}): Promise<Tenant[]> {
    return (await this.call<{ tenants: Tenant[] }>("GET", "/api/v1/tenants", { query: { queue: opts.queue }, idempotent: true })).tenants;
  }

  /** The configured schedules: next and last fire, the last task's ID and state. */
  async schedules(): Promise<Schedule[]> {
    return (await this.call<{ schedules: Schedule[] }>("GET", "/api/v1/schedules", { idempotent: true })).schedules;
  }

  /** The fleet's token usage and cost over the window `since` (a duration such as "24h"; default 24h), grouped `by` agent (default), tenant or model, with the per-hour totals. */
  usage(opts: { by?: "agent" | "tenant" | "model"; since?: string } = {}): Promise<UsageReport> {
    return this.call("GET", "/api/v1/usage", { query: { by: opts.by, since: opts.since }, idempotent: true });
  }

  /** `{status: "ok", redis: "ok"}`; an UnavailableError when Redis does not answer. */
  health(): Promise<{ status: string; redis: string }> {
    return this.call("GET", "/healthz", { idempotent: true });
  }

  /** The API's OpenAPI document (YAML text). */
  openapi(): Promise<string> {
    return this.call("GET", "/api/v1/openapi.yaml", { idempotent: true });
  }
}
