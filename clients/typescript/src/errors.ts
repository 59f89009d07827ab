// Typed errors: one class per API error `code` (the JSON error body's).

/** Base of every error this package throws. */
export class AgentqError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** No HTTP answer (connection refused or reset, a timeout). An enqueue that
 * got it may have landed: retry with the same id. */
export class TransportError extends AgentqError {}

/** The server answered a redirect (3xx), which the client never follows:
 * the token would go with it to wherever `location` points, and a POST
 * would become a GET. Not retried: point the client's url at the API itself. */
export class RedirectError extends AgentqError {
  constructor(
    readonly method: string,
    readonly url: string,
    readonly status: number,
    /** The Location header (undefined without one). */
    readonly location?: string,
  ) {
    super(`${method} ${url}: the server answered ${status} redirecting to ${location ?? "(no Location)"}; ` +
      "agentq clients do not follow redirects (the bearer token and a POST's body would go with them): " +
      "set the client's url to the API's own address");
  }
}

/** A reply body longer than the client's `maxReplyBytes` (`limit`). Not
 * retried: the same reply would come again. */
export class ResponseTooLargeError extends AgentqError {
  constructor(what: string, readonly limit: number, option = "maxReplyBytes") {
    super(`${what}: more than ${limit} bytes, the client's ${option} (raise it to read this)`);
  }
}

/** An event-stream line (or event) longer than the client's
 * `maxEventBytes`. Not retried: a reconnect would meet it again. */
export class EventTooLargeError extends ResponseTooLargeError {
  constructor(what: string, limit: number) {
    super(what, limit, "maxEventBytes");
  }
}

/** wait() or events() gave up before the task ended; `task` is the last view. */
export class WaitTimeoutError extends AgentqError {
  constructor(readonly taskId: string, readonly task?: unknown) {
    super(`task ${JSON.stringify(taskId)} has not ended yet`);
  }
}

/**
 * result() of a task that ended without succeeding (dead-lettered):
 * `taskId`, `state`, `errorClass`, `reason` (why it was dead-lettered),
 * `error` (the last error text) and the whole `task`.
 */
export class TaskFailedError extends AgentqError {
  readonly taskId: string;
  readonly state: string;
  readonly errorClass?: string;
  readonly reason?: string;
  readonly error?: string;
  constructor(readonly task: { id: string; state: string; error_class?: string; reason?: string; error?: string }) {
    const detail = (task.error_class || "no error class") + (task.error ? `: ${task.error}` : "");
    super(`task ${JSON.stringify(task.id)} ${task.state}: ${detail}`);
    this.taskId = task.id;
    this.state = task.state;
    this.errorClass = task.error_class || undefined;
    this.reason = task.reason || undefined;
    this.error = task.error || undefined;
  }
}

/** result() of a task that was canceled: `taskId`, `state`, `reason` (the
 * cancel's reason, undefined without one) and the whole `task`. */
export class TaskCanceledError extends AgentqError {
  readonly taskId: string;
  readonly state: string;
  readonly reason?: string;
  constructor(readonly task: { id: string; state: string; cancel_reason?: string }) {
    super(`task ${JSON.stringify(task.id)} was canceled${task.cancel_reason ? `: ${task.cancel_reason}` : ""}`);
    this.taskId = task.id;
    this.state = task.state;
    this.reason = task.cancel_reason || undefined;
  }
}

/** The names the contract gives (DESIGN.md §6: `TaskFailed`,
 * `TaskCanceled`), beside the package's `…Error` convention: the same
 * classes, so `instanceof` works with either. */
export { TaskFailedError as TaskFailed, TaskCanceledError as TaskCanceled };

/** verifyWebhook() refused a delivery: a header missing or malformed, a
 * timestamp outside the tolerance, no signature that matches, or a body
 * that is not JSON. Answer it with a 4xx; never act on the body. */
export class WebhookVerificationError extends AgentqError {}

/** An error reply of the API. */
export class APIError extends AgentqError {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: Record<string, unknown> = {},
    /** The Retry-After header, in seconds. */
    readonly retryAfter?: number,
  ) {
    super(`${message} (${status} ${code})`);
  }
}

export class InvalidRequestError extends APIError {}
export class UnauthorizedError extends APIError {}
export class ForbiddenError extends APIError {}
export class NotFoundError extends APIError {}
export class MethodNotAllowedError extends APIError {}
/** fail_if_unavailable and the agent's breaker is open (body: agent, breaker_key, state, open_until). */
export class AgentUnavailableError extends APIError {}
/** fail_if_unavailable and the task's tenant or agent budget has no room left (body: budget, tenant, agent, resets_at). */
export class BudgetExhaustedError extends APIError {
  get budget(): string | undefined {
    return this.body.budget as string | undefined;
  }
  get resetsAt(): string | undefined {
    return this.body.resets_at as string | undefined;
  }
}
/** Cancel of (or a signal to) a task that has already ended; `state` says how. */
export class TaskEndedError extends APIError {
  get state(): string | undefined {
    return this.body.state as string | undefined;
  }
}
export class ConflictError extends APIError {}
/** A signal's name (1-128 of A-Z a-z 0-9 . _ : -) or data is not valid (400). An InvalidRequestError. */
export class InvalidSignalError extends InvalidRequestError {}
/** The task has as many signals as it may keep (64): no new name is accepted (409). A ConflictError. */
export class SignalCapError extends ConflictError {}
export class RequestTooLargeError extends APIError {}
export class UnsupportedMediaTypeError extends APIError {}
export class TooManyRequestsError extends APIError {}
export class InternalError extends APIError {}
/** Redis did not answer (503). An enqueue that got it may have landed. */
export class UnavailableError extends APIError {}
/**
 * The server holds as many waits and event streams as it allows, for this
 * client address or in all (503 with Retry-After). An UnavailableError: it
 * is retried the same way.
 */
export class OverCapacityError extends UnavailableError {}

/** The error class of each API code. */
export const ERRORS: Record<string, typeof APIError> = {
  invalid_request: InvalidRequestError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  agent_unavailable: AgentUnavailableError,
  budget_exhausted: BudgetExhaustedError,
  task_ended: TaskEndedError,
  conflict: ConflictError,
  invalid_signal: InvalidSignalError,
  signal_cap: SignalCapError,
  request_too_large: RequestTooLargeError,
  unsupported_media_type: UnsupportedMediaTypeError,
  too_many_requests: TooManyRequestsError,
  internal: InternalError,
  unavailable: UnavailableError,
  over_capacity: OverCapacityError,
};

const BY_STATUS: Record<number, string> = {
  400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
  405: "method_not_allowed", 413: "request_too_large", 415: "unsupported_media_type",
  429: "too_many_requests", 500: "internal", 503: "unavailable",
};

/** The typed error of an error reply. */
export function fromReply(status: number, body: unknown, retryAfter?: number): APIError {
  const obj = body && typeof body === "object" ? (body as Record<string, unknown>) : {};
  const code = typeof obj.code === "string" && obj.code ? obj.code : BY_STATUS[status] ?? `http_${status}`;
  const msg = typeof obj.error === "string" && obj.error ? obj.error : typeof body === "string" && body ? body : `HTTP ${status}`;
  const Cls = ERRORS[code] ?? APIError;
  return new Cls(status, code, msg, obj, retryAfter);
}
