// Helpers for writing an exec agent in TypeScript / JavaScript (Node): the
// worker starts the program, writes the ActionRequest on its stdin and reads
// one ActionResponse on its stdout (docs/agents.md).
//
//   import { run } from "agentq/agent";
//   run(async (req) => {
//     req.progress({ step: "fetching" });
//     req.output("partial text");
//     req.usage({ input_tokens: 812, output_tokens: 40 });
//     return { answer: 42 };
//   });
//
// A handler may end its attempt by waiting, holding no worker meanwhile:
//
//   run(async (req) => {
//     const draft = await req.step("draft", () => callModel("draft"));
//     if (!("approve" in req.signals)) {
//       if (req.wait?.timed_out) return { draft, approved: false };
//       return suspend({ signal: "approve", timeout: "24h" });
//     }
//     return { draft, approved: req.signals.approve };
//   });
//
// A thrown error becomes {"status":"error","code":C,"error":"Name: message"}:
// C is the error's HTTP status when it carries one (`status`, `statusCode`,
// as the OpenAI and Anthropic SDKs' errors do, or AgentError's `code`), else
// 0 and the worker's classifier reads the text. When the error carries the
// HTTP response's headers (the OpenAI and Anthropic SDKs' APIError —
// RateLimitError among them —: `headers`, a Headers object or a plain
// record; or `response.headers`), the reply also gets their back-pressure
// headers (`headers`: Retry-After, retry-after-ms, x-should-retry,
// x-ratelimit-*, anthropic-ratelimit-*; no other header leaves the agent)
// and the wait they ask for (`retry_after`, seconds), so that the worker
// waits as long as the provider asked, as for an HTTP agent. No SDK is
// imported: the error is read by its properties. SIGTERM (a cancel, a
// timeout, the worker's shutdown) aborts `req.signal` and exits 143.

import { writeSync } from "node:fs";
import { goDuration, taskRequest } from "./client.js";
import type { Duration, TaskRequest } from "./types.js";

/** The wait that ended before this run (ActionRequest `wait`), on every
 * attempt of the resumed run. */
export interface WaitResult {
  kind: "sleep" | "until" | "signal" | "children";
  /** For a signal wait: its name. */
  signal?: string;
  /** True when the wait's timeout ended it (no signal came, or the children had not ended). */
  timed_out: boolean;
  [k: string]: unknown;
}

/** A child's outcome (ActionRequest `children`, in spawn order). */
export interface ChildResult {
  id: string;
  name?: string;
  state: string;
  result?: unknown;
  error_class?: string;
  error?: string;
  [k: string]: unknown;
}

/** A child task of a children wait: an ordinary task spec, with an optional
 * `name` (the child's ID is `id`, else `<parent>.<name>`, else
 * `<parent>.<k>`, k its 1-based position); `in` and `fail_if_unavailable`
 * are not for a child (the worker refuses them). */
export interface ChildSpec extends Omit<TaskRequest, "in" | "fail_if_unavailable"> {
  name?: string;
}

/** What to wait for: exactly one of `sleep` (a Go duration string or
 * milliseconds), `until` (a Date or RFC 3339 text), `signal` (a name, with
 * an optional `timeout`) or `children` (with `mode` "all" | "any" and an
 * optional `timeout`). */
export type Wait =
  | { sleep: Duration }
  | { until: Date | string }
  | { signal: string; timeout?: Duration }
  | { children: ChildSpec[]; mode?: "all" | "any"; timeout?: Duration };

/** The ActionRequest the worker sends. */
export interface ActionRequest {
  task_id: string;
  agent: string;
  action: string;
  params: any;
  correlation_id?: string;
  attempt: number;
  restart: number;
  traceparent?: string;
  tracestate?: string;
  /** The steps the task's agents recorded so far (name -> data; absent
   * when none). */
  steps?: Record<string, unknown>;
  /** How many times the task has resumed from a wait (absent: 0).
   * `attempt` counts from 1 again in every run. */
  resume?: number;
  /** The wait that ended before this run (absent before the first resume). */
  wait?: WaitResult;
  /** Every signal the task has received so far (name -> data). */
  signals?: Record<string, unknown>;
  /** The children of the last children wait, in spawn order. */
  children?: ChildResult[];
  [k: string]: unknown;
}

/** What the call used: a provider's usage object as it came (OpenAI's,
 * Anthropic's, Gemini's, Bedrock's) or these names; with `model`, the cost
 * is priced by the worker's `pricing`. Reported on errors too. */
export interface Usage {
  total_tokens?: number;
  input_tokens?: number;
  output_tokens?: number;
  /** Input tokens read from the provider's cache (a part of input_tokens). */
  cached_tokens?: number;
  /** The model the call used. */
  model?: string;
  [k: string]: unknown;
}

/** The request with the helpers of the call. `resume` (0 when absent),
 * `signals` ({} when absent) and `children` ([] when absent) are always set. */
export interface Request extends ActionRequest {
  resume: number;
  signals: Record<string, unknown>;
  children: ChildResult[];
  /** suspend(w): return (or throw) it to end the attempt waiting. */
  suspend(w: Wait): Suspend;
  /** A progress event (any JSON value) the task's callers see live. */
  progress(data: unknown): boolean;
  /** A piece of partial output (text or any JSON value). */
  output(data: unknown): boolean;
  /** Report the tokens the call used (the ActionResponse's `usage`). */
  usage(u: Usage): void;
  /** Run the step `name`: when the task recorded it already (`steps`, from
   * an earlier attempt), resolve to its data without calling `fn`;
   * otherwise await `fn()` (sync or async; return a StepResult to report
   * the step's usage), record the result as a step ({"type":"step",…} on
   * AGENTQ_EVENTS_FD) and resolve to it. A later attempt skips it. */
  step<T>(name: string, fn: () => T | Promise<T> | StepResult<T> | Promise<StepResult<T>>): Promise<T>;
  /** Aborted on SIGTERM. */
  signal: AbortSignal;
}

export interface ActionResponse {
  status: "success" | "error" | "suspend";
  code?: number;
  data?: unknown;
  error?: string;
  /** For a suspend: the wait, as the wire carries it. */
  wait?: Record<string, unknown>;
  usage?: Usage;
  /** For an error: how long the backend asked to wait before the next
   * call, in seconds, or an RFC 3339 time. */
  retry_after?: number | string;
  /** For an error: the backend reply's back-pressure headers (lower-case
   * names). */
  headers?: Record<string, string>;
}

/** What AgentError may say of the backend's back-pressure. */
export interface BackPressure {
  /** How long the backend asked to wait: seconds, or a Date. */
  retryAfter?: number | Date;
  /** The backend reply's headers (only the back-pressure ones are sent). */
  headers?: Headers | Record<string, string>;
}

/** A failure with an explicit code, read like an HTTP status by the classifier
 * (400 invalid_request, 429 rate_limited, 501 not_supported, 504 timeout, …),
 * and optionally the backend's back-pressure. */
export class AgentError extends Error {
  readonly retryAfter?: number | Date;
  readonly headers?: Headers | Record<string, string>;
  constructor(message: string, readonly code = 0, bp: BackPressure = {}) {
    super(message);
    this.name = "AgentError";
    this.retryAfter = bp.retryAfter;
    this.headers = bp.headers;
  }
}

/** The wire JSON of a wait (a suspend reply's `wait`); a TypeError for
 * none or more than one kind, or a timeout or mode that does not fit. */
export function waitSpec(w: Wait): Record<string, unknown> {
  const o = w as Record<string, any>;
  const kinds = ["sleep", "until", "signal", "children"].filter((k) => o[k] !== undefined && o[k] !== null);
  if (kinds.length !== 1) throw new TypeError(`suspend: give exactly one of sleep, until, signal, children (got ${kinds.join(", ") || "none"})`);
  const kind = kinds[0];
  if (o.timeout !== undefined && kind !== "signal" && kind !== "children") throw new TypeError(`suspend: timeout goes with signal or children, not ${kind}`);
  if (o.mode !== undefined && kind !== "children") throw new TypeError("suspend: mode goes with children");
  if (kind === "sleep") return { sleep: goDuration(o.sleep) };
  if (kind === "until") return { until: o.until instanceof Date ? o.until.toISOString() : String(o.until) };
  const out: Record<string, unknown> = {};
  if (kind === "signal") {
    if (typeof o.signal !== "string" || !o.signal) throw new TypeError("suspend: a signal name is required");
    out.signal = o.signal;
  } else {
    if (!Array.isArray(o.children)) throw new TypeError("suspend: children is an array of task specs");
    out.children = o.children.map((c: ChildSpec) => taskRequest(c));
    if (o.mode !== undefined) {
      if (o.mode !== "all" && o.mode !== "any") throw new TypeError(`suspend: mode is "all" or "any", not ${JSON.stringify(o.mode)}`);
      out.mode = o.mode;
    }
  }
  if (o.timeout !== undefined) out.timeout = goDuration(o.timeout);
  return out;
}

/** Ends the attempt with {"status":"suspend","wait":…}: the task waits
 * (state `waiting`, no worker held) and runs again when the wait ends, with
 * `req.resume`, `req.wait` (`timed_out`), `req.signals` and `req.children`
 * telling what happened. Return it (or throw it) from the handler. */
export class Suspend extends Error {
  /** The wait as the wire carries it. */
  readonly wait: Record<string, unknown>;
  constructor(w: Wait) {
    const wire = waitSpec(w);
    super(`suspend: ${JSON.stringify(wire)}`);
    this.name = "Suspend";
    this.wait = wire;
  }
}

/** `return suspend({ signal: "approve", timeout: "24h" })`: a Suspend to
 * return or throw from the handler. Steps recorded before it are kept. */
export function suspend(w: Wait): Suspend {
  return new Suspend(w);
}

function eventsFd(): number {
  const v = process.env.AGENTQ_EVENTS_FD;
  const n = v ? Number(v) : NaN;
  return Number.isInteger(n) && n >= 0 ? n : -1;
}

/** What a step's function may return to report the step's usage with its data. */
export class StepResult<T = unknown> {
  constructor(readonly data: T, readonly usage?: Usage | number) {}
}

/** Write one live event {"type", "data"} (and the members `more`) to the fd
 * named by AGENTQ_EVENTS_FD (a no-op when unset). Returns whether it was
 * written. */
export function emit(type: string, data: unknown, more: Record<string, unknown> = {}): boolean {
  const fd = eventsFd();
  if (fd < 0) return false;
  let buf = Buffer.from(JSON.stringify({ type, ...more, data }) + "\n");
  try {
    while (buf.length) buf = buf.subarray(writeSync(fd, buf));
  } catch {
    return false;
  }
  return true;
}

export const progress = (data: unknown) => emit("progress", data);
export const output = (data: unknown) => emit("output", data);

/** The step helper of a request whose recorded steps are `done`. */
function stepper(done: Record<string, unknown> | undefined) {
  return async function step<T>(name: string, fn: () => any): Promise<T> {
    if (done && Object.prototype.hasOwnProperty.call(done, name)) return done[name] as T;
    let v = await fn();
    const more: Record<string, unknown> = { name };
    if (v instanceof StepResult) {
      if (v.usage !== undefined) more.usage = v.usage;
      v = v.data;
    }
    emit("step", v ?? null, more);
    return v as T;
  };
}

function statusOf(e: any): number {
  for (const k of ["code", "status", "statusCode", "status_code"]) {
    const v = e?.[k];
    if (Number.isInteger(v) && v >= 100 && v <= 599) return v;
  }
  const v = e?.response?.status;
  return Number.isInteger(v) && v >= 100 && v <= 599 ? v : 0;
}

// The back-pressure headers the worker reads (Go: resilience.BackPressureHeader);
// an ActionResponse's headers keep only these.
const backPressureNames = ["retry-after", "retry-after-ms", "x-should-retry"];
const backPressurePrefixes = ["x-ratelimit-", "anthropic-ratelimit-"];

/** Whether the reply header `name` (any case) is one the worker reads for
 * back-pressure: Retry-After, retry-after-ms, x-should-retry, x-ratelimit-*
 * or anthropic-ratelimit-*. */
export function backPressureHeader(name: string): boolean {
  const n = name.toLowerCase();
  return backPressureNames.includes(n) || backPressurePrefixes.some((p) => n.length > p.length && n.startsWith(p));
}

/** (name, value) pairs of a headers object: a fetch Headers (or anything
 * with entries()), a plain record, or a list of pairs. */
function headerEntries(h: any): [unknown, unknown][] {
  if (!h || typeof h !== "object") return [];
  try {
    if (Array.isArray(h)) return h.filter((p) => Array.isArray(p) && p.length === 2) as [unknown, unknown][];
    if (typeof h.entries === "function") return Array.from(h.entries() as Iterable<[unknown, unknown]>);
    return Object.entries(h);
  } catch {
    return [];
  }
}

/** The back-pressure headers ({lower-case name: value}) of the HTTP
 * response an error carries (`headers`, else `response.headers`); {} when
 * none. */
export function headersOf(e: any): Record<string, string> {
  for (const h of [e?.headers, e?.response?.headers]) {
    const out: Record<string, string> = {};
    for (const [k, v] of headerEntries(h)) {
      const val = typeof v === "number" ? String(v) : Array.isArray(v) ? v.join(", ") : v;
      if (typeof k === "string" && typeof val === "string" && backPressureHeader(k)) out[k.toLowerCase()] = val;
    }
    if (Object.keys(out).length) return out;
  }
  return {};
}

/** A retry_after for the wire: seconds (a finite number ≥ 0, from a number
 * or numeric text) or RFC 3339 text (from a valid Date); undefined else. */
function seconds(v: unknown): number | string | undefined {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : v.toISOString();
  const n = typeof v === "string" && v.trim() !== "" ? Number(v.trim()) : v;
  return typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** How long the backend asked to wait, for the reply's retry_after: the
 * error's own `retryAfter` when it has one (AgentError's, or an SDK's),
 * else the headers' retry-after-ms, else their Retry-After (seconds, or
 * an HTTP date as RFC 3339); undefined when nothing says. */
export function retryAfterOf(e: any, headers: Record<string, string>): number | string | undefined {
  const own = seconds(e?.retryAfter ?? e?.retry_after);
  if (own !== undefined) return own;
  const ms = seconds(headers["retry-after-ms"]);
  if (typeof ms === "number") return ms / 1000;
  const ra = headers["retry-after"];
  if (ra === undefined) return undefined;
  const s = seconds(ra);
  if (s !== undefined) return s;
  return /[a-z]/i.test(ra) ? seconds(new Date(ra)) : undefined;
}

/** The ActionResponse of a failure: its code, error text and, when the
 * error carries an HTTP response's headers, their back-pressure
 * (`headers`, `retry_after`). */
export function errorResponse(e: unknown): ActionResponse {
  let resp: ActionResponse;
  if (e instanceof AgentError) resp = { status: "error", code: e.code, error: e.message };
  else if (e instanceof Error) {
    const name = e.name || e.constructor?.name || "Error";
    resp = { status: "error", code: statusOf(e), error: e.message ? `${name}: ${e.message}` : name };
  } else return { status: "error", code: 0, error: String(e) };
  const headers = headersOf(e);
  if (Object.keys(headers).length) resp.headers = headers;
  const ra = retryAfterOf(e, headers);
  if (ra !== undefined) resp.retry_after = ra;
  return resp;
}

/** The ActionResponse for the request JSON `raw`. */
export async function handleRequest(handler: (req: Request) => unknown, raw: string, signal = new AbortController().signal): Promise<ActionResponse> {
  let base: ActionRequest;
  try {
    const v = JSON.parse(raw || "{}");
    base = v && typeof v === "object" ? v : {};
  } catch (e) {
    return { status: "error", code: 400, error: `agentq/agent: the ActionRequest is not JSON: ${(e as Error).message}` };
  }
  let used: Usage | undefined;
  const req: Request = Object.assign(Object.create(null), base, {
    resume: base.resume ?? 0, signals: base.signals ?? {}, children: base.children ?? [],
    progress, output, signal, suspend,
    usage: (u: Usage) => { used = u; },
    step: stepper(base.steps),
  });
  let resp: ActionResponse;
  try {
    const data = await handler(req);
    resp = data instanceof Suspend ? { status: "suspend", wait: data.wait } : { status: "success", code: 0, data: data ?? null };
  } catch (e) {
    resp = e instanceof Suspend ? { status: "suspend", wait: e.wait } : errorResponse(e);
  }
  if (used) resp.usage = used;
  return resp;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Run `handler(request)` as an exec agent and exit: 0 once the
 * ActionResponse is written, 143 on SIGTERM. */
export async function run(handler: (req: Request) => unknown): Promise<never> {
  const ctl = new AbortController();
  process.on("SIGTERM", () => {
    ctl.abort();
    process.stderr.write("agentq/agent: terminated (SIGTERM)\n");
    process.exit(143);
  });
  const resp = await handleRequest(handler, await readStdin(), ctl.signal);
  let text: string;
  try {
    text = JSON.stringify(resp);
  } catch (e) {
    text = JSON.stringify({ status: "error", code: 0, error: `agentq/agent: the handler's result is not JSON: ${(e as Error).message}` });
  }
  await new Promise<void>((r) => process.stdout.write(text + "\n", () => r()));
  process.exit(0);
}
