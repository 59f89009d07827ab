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
// A thrown error becomes {"status":"error","code":C,"error":"Name: message"}:
// C is the error's HTTP status when it carries one (`status`, `statusCode`,
// as the OpenAI and Anthropic SDKs' errors do, or AgentError's `code`), else
// 0 and the worker's classifier reads the text. SIGTERM (a cancel, a
// timeout, the worker's shutdown) aborts `req.signal` and exits 143.

import { writeSync } from "node:fs";

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

/** The request with the helpers of the call. */
export interface Request extends ActionRequest {
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
  status: "success" | "error";
  code: number;
  data?: unknown;
  error?: string;
  usage?: Usage;
}

/** A failure with an explicit code, read like an HTTP status by the classifier
 * (400 invalid_request, 429 rate_limited, 501 not_supported, 504 timeout, …). */
export class AgentError extends Error {
  constructor(message: string, readonly code = 0) {
    super(message);
    this.name = "AgentError";
  }
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

/** The ActionResponse of a failure. */
export function errorResponse(e: unknown): ActionResponse {
  if (e instanceof AgentError) return { status: "error", code: e.code, error: e.message };
  if (e instanceof Error) {
    const name = e.name || e.constructor?.name || "Error";
    return { status: "error", code: statusOf(e), error: e.message ? `${name}: ${e.message}` : name };
  }
  return { status: "error", code: 0, error: String(e) };
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
    progress, output, signal,
    usage: (u: Usage) => { used = u; },
    step: stepper(base.steps),
  });
  let resp: ActionResponse;
  try {
    resp = { status: "success", code: 0, data: (await handler(req)) ?? null };
  } catch (e) {
    resp = errorResponse(e);
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
