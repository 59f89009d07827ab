// Named constants and the JSON shapes of agentq's HTTP API (api/openapi.yaml).
// Results carry the API's field names as they are (snake_case).

/** A task's state (the task JSON's `state`). */
export const State = {
  PENDING: "pending",
  SCHEDULED: "scheduled",
  ACTIVE: "active",
  RETRYING: "retrying",
  DEFERRED: "deferred",
  RESTARTING: "restarting",
  /** Suspended: waiting for a timer, a signal or its children, holding no worker. */
  WAITING: "waiting",
  SUCCEEDED: "succeeded",
  DEAD_LETTERED: "dead_lettered",
  CANCELED: "canceled",
} as const;
export type State = (typeof State)[keyof typeof State];
/** The states a task ends in. */
export const ENDED_STATES: readonly State[] = [State.SUCCEEDED, State.DEAD_LETTERED, State.CANCELED];

/** The classifier's error classes (`error_class`). */
export const ErrorClass = {
  NETWORK_TRANSIENT: "network_transient",
  NETWORK_PERMANENT: "network_permanent",
  TIMEOUT: "timeout",
  RATE_LIMITED: "rate_limited",
  QUOTA_EXHAUSTED: "quota_exhausted",
  PROVIDER_ERROR: "provider_error",
  CONTEXT_LENGTH: "context_length",
  INVALID_REQUEST: "invalid_request",
  NOT_SUPPORTED: "not_supported",
  LOGIC_ERROR: "logic_error",
  CANCELED: "canceled",
} as const;
export type ErrorClass = (typeof ErrorClass)[keyof typeof ErrorClass];

/** What decided a failure's class (`classified_by`), strongest evidence first. */
export const ClassifiedBy = {
  RULE: "rule",
  STRUCTURE: "structure",
  STATUS: "status",
  TEXT: "text",
  MODEL: "model",
  DEFAULT: "default",
} as const;
export type ClassifiedBy = (typeof ClassifiedBy)[keyof typeof ClassifiedBy];

/** Why a task was dead-lettered (a dead letter's `reason`). */
export const Reason = {
  NOT_RETRYABLE: "not_retryable",
  ATTEMPTS_EXHAUSTED: "attempts_exhausted",
  RESTARTS_EXHAUSTED: "restarts_exhausted",
  RESTART_NOT_ENABLED: "restart_not_enabled",
  RESTART_QUEUE_FULL: "restart_queue_full",
  INVALID_PAYLOAD: "invalid_payload",
  UNKNOWN_AGENT: "unknown_agent",
  DEADLINE_EXCEEDED: "deadline_exceeded",
  BUDGET_EXHAUSTED: "budget_exhausted",
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

/** Event names (an event's `event`, the SSE `event:` field). */
export const EventName = {
  QUEUED: "queued",
  SCHEDULED: "scheduled",
  SUCCEEDED: "succeeded",
  FAILED: "failed",
  RETRYING: "retrying",
  DEFERRED: "deferred",
  RESTARTING: "restarting",
  DEAD_LETTERED: "dead_lettered",
  REQUEUED: "requeued",
  INTERRUPTED: "interrupted",
  TASK_CANCELED: "task_canceled",
  PROGRESS: "progress",
  OUTPUT: "output",
  OUTPUT_TRUNCATED: "output_truncated",
  HISTORY_ELIDED: "history_elided",
  STEP: "step",
  WAITING: "waiting",
  RESUMED: "resumed",
  SIGNAL: "signal",
} as const;
export type EventName = (typeof EventName)[keyof typeof EventName];
/** The events that end a task's event stream. */
export const TERMINAL_EVENTS: readonly string[] = [EventName.SUCCEEDED, EventName.DEAD_LETTERED, EventName.TASK_CANCELED];

/** What a suspended task waits for (a wait's `kind`). */
export const WaitKind = {
  SLEEP: "sleep",
  UNTIL: "until",
  SIGNAL: "signal",
  CHILDREN: "children",
} as const;
export type WaitKind = (typeof WaitKind)[keyof typeof WaitKind];

/** What holds a waiting task (the task JSON's `waiting_for`; docs/http-api.md,
 * "Waiting tasks explained"). */
export const WaitingFor = {
  BUDGET: "budget",
  BREAKER: "breaker",
  LIMIT: "limit",
  TENANT_CAP: "tenant_cap",
  QUEUE_PAUSED: "queue_paused",
  SIGNAL: "signal",
  CHILDREN: "children",
  SLEEP: "sleep",
  RETRY: "retry",
  RESTART: "restart",
  SCHEDULE: "schedule",
} as const;
export type WaitingFor = (typeof WaitingFor)[keyof typeof WaitingFor];

/** What resumed a waiting task (the `resumed` event's `by`). */
export const ResumedBy = {
  TIMER: "timer",
  SIGNAL: "signal",
  TIMEOUT: "timeout",
  CHILDREN: "children",
} as const;
export type ResumedBy = (typeof ResumedBy)[keyof typeof ResumedBy];

/** A task's wait as the record keeps it (the task JSON's `wait`, a
 * `waiting` event's `wait`). */
export interface WaitInfo {
  kind: WaitKind;
  sleep?: string;
  until?: string;
  signal?: string;
  timeout?: string;
  mode?: "all" | "any";
  /** When its timer (or timeout) resumes the task. */
  due?: string;
  /** Once resumed: true when the timeout ended it (a signal or children wait). */
  timed_out?: boolean;
  [k: string]: unknown;
}

/** What signal() answers. */
export interface SignalResult {
  id: string;
  name: string;
  /** The task's state after the call (still waiting when the signal resumed it, until its next run starts). */
  state: State;
  /** The task was waiting for this signal and its next run is now pending. */
  resumed: boolean;
  /** The task already had a signal of this name: the first is kept, nothing was written. */
  duplicate: boolean;
}

/** A task's priority (`priority`): it orders a tenant's own tasks. */
export const Priority = {
  HIGH: "high",
  NORMAL: "normal",
  LOW: "low",
} as const;
export type Priority = (typeof Priority)[keyof typeof Priority];

/** A duration: a Go duration string ("30s", "5m") or milliseconds. */
export type Duration = string | number;

/** One task to enqueue (TaskRequest). */
export interface TaskRequest {
  agent: string;
  params?: unknown;
  /** Task ID and idempotency key: give one to make retries safe. */
  id?: string;
  action?: string;
  correlation_id?: string;
  queue?: string;
  /** Delay of the first run. */
  in?: Duration;
  /** A duration from enqueue, or an RFC 3339 time (string or Date). */
  deadline?: Duration | Date;
  /** Webhook names to notify. */
  notify?: string[];
  fail_if_unavailable?: boolean;
  /** Who the task is for (at most 128 bytes, no control characters); default: the default tenant. */
  tenant?: string;
  /** Orders the tenant's own tasks; default "normal". */
  priority?: Priority;
  max_tokens?: number;
  max_cost_usd?: number;
}

/** Tokens and cost (`usage` on a task and on an attempt's event), as the
 * agents' replies report them and the worker's `pricing` prices them. */
export interface TaskUsage {
  /** The model the reply named (absent when none, or, on a task, when its attempts named different ones). */
  model?: string;
  /** The prompt's tokens, cached ones included. */
  input_tokens: number;
  output_tokens: number;
  /** The input tokens read from the provider's cache (a part of input_tokens). */
  cached_tokens?: number;
  total_tokens: number;
  /** The cost in USD by the config's pricing; absent when the model has no price. */
  cost_usd?: number;
  /** True when cost_usd comes from a price. */
  priced?: boolean;
}

export interface TaskEvent {
  seq?: number;
  at?: string;
  event: EventName | string;
  attempt?: number;
  error_class?: ErrorClass | string;
  classified_by?: ClassifiedBy | string;
  error?: string;
  delay_ms?: number;
  restart?: number;
  agent?: string;
  duration_ms?: number;
  worker?: string;
  count?: number;
  since?: string;
  attempts?: number;
  reason?: string;
  /** For interrupted: true when the attempt was lost with its worker (killed, frozen, cut off from Redis; reason
   * "worker lost", worker: the lost worker, attempt: the lost attempt) rather than put back by its shutdown.
   * Output streamed before it belongs to the lost attempt: a streaming UI resets. */
  lost?: boolean;
  /** What a progress or output event carries. */
  data?: unknown;
  /** What the attempt's call used (an attempt's outcome or a failed call), when it reported usage. */
  usage?: TaskUsage;
  /** For a call served by a fallback agent: why it went there (a class, breaker_open, over_limit, or over_budget: BUDGET). */
  fallback?: string;
  /** For step and signal: the name. */
  name?: string;
  /** For step and signal: the data's size in bytes. */
  bytes?: number;
  /** For waiting: the wait (delay_ms: until its timer or timeout). */
  wait?: WaitInfo;
  /** For resumed: the task's resumes so far, this one included. */
  resume?: number;
  /** For resumed: what ended the wait. */
  by?: ResumedBy;
  [k: string]: unknown;
}

/** A task's JSON; `R` types its `result` (wait<R>(), result<R>()). */
export interface Task<R = unknown> {
  id: string;
  agent: string;
  action: string;
  state: State;
  /** What holds the task while it waits (`budget`, `breaker`, `signal`, …);
   * absent when nothing does (active, ended, pending with its way to a
   * worker free). Sent by `get`/`wait`, not by listings. */
  waiting_for?: WaitingFor | string;
  /** Which one, as text for people (`budget "tenant acme" tokens 50000/1h0m0s`). */
  waiting_detail?: string;
  /** When the next attempt (or run) is due, RFC 3339; absent when not timed. */
  next_attempt_at?: string;
  attempts: number;
  restarts: number;
  error_class: ErrorClass | "";
  classified_by?: ClassifiedBy | string;
  /** The last error: of the last failed attempt while the task has not
   * ended (not why it waits: see `waiting_for`), its error once dead-lettered. */
  error: string;
  result?: R;
  reason?: Reason | string;
  canceled_at?: string;
  cancel_reason?: string;
  queue?: string;
  correlation_id?: string;
  /** The task's tenant; absent for the default tenant. */
  tenant?: string;
  /** The task's priority ("normal" when it was given none). */
  priority?: Priority;
  run?: number;
  enqueued_at?: string;
  updated_at?: string;
  /** What the task's attempts used, summed over all attempts, retries and restarts; absent when none reported usage. */
  usage?: TaskUsage;
  /** How many steps the task's agents recorded (absent when none). */
  steps?: number;
  /** How many times the task resumed from a wait (absent when none). */
  resumes?: number;
  /** The current wait (state waiting) or the last one (absent when it never suspended). */
  wait?: WaitInfo;
  /** How many signals the task received (absent when none). */
  signals?: number;
  /** The task that spawned this one as a child. */
  parent?: string;
  /** The IDs of the children of the task's last children wait, in spawn order. */
  children?: string[];
  history: TaskEvent[];
  [k: string]: unknown;
}

export interface EnqueueResponse {
  id: string;
  created: boolean;
  duplicate: boolean;
  state: State;
  task?: Task;
}

export interface BatchItem {
  index: number;
  id: string;
  created: boolean;
  duplicate: boolean;
  state?: State;
  code?: string;
  error?: string;
}

export interface BatchResponse {
  results: BatchItem[];
  created: number;
  duplicates: number;
  failed: number;
  code?: string;
  error?: string;
}

export interface CancelResponse {
  id: string;
  state: "canceled";
  previous_state: State;
  removed: boolean;
  stopping: boolean;
  reason: string;
}

export interface DeadLetter {
  id: string;
  agent: string;
  action: string;
  params: unknown;
  correlation_id: string;
  error_class: ErrorClass | string;
  classified_by?: ClassifiedBy | string;
  error: string;
  reason?: Reason | string;
  attempts: number;
  restarts: number;
  dead_lettered_at: string;
  queue?: string;
  run?: number;
  enqueued_at?: string;
  requeues?: number;
  payload?: string;
  history: TaskEvent[];
  [k: string]: unknown;
}

export interface DeadLetterPage {
  deadletters: DeadLetter[];
  total: number;
  limit: number;
  offset: number;
}

/** A task of a listing (GET /api/v1/tasks): its record without history,
 * and where the listing found it. */
export interface ListedTask extends Omit<Task, "history"> {
  listed_as: "pending" | "active" | "scheduled" | "retrying" | "deferred" | "restarting" | "waiting";
  tenant?: string;
}

export interface TaskPage {
  tasks: ListedTask[];
  /** Pass as `cursor` for the next page; "" when the listing is complete. */
  next_cursor: string;
}

export interface TaskFilter {
  queue?: string;
  /** A state or several (pending, active, scheduled, retrying, deferred, restarting, waiting). */
  state?: string | string[];
  agent?: string;
  tenant?: string;
  correlation_id?: string;
}

export interface PauseResult {
  queue: string;
  paused: boolean;
  /** false: the queue already was as asked. */
  changed: boolean;
}

export interface RequeueResponse {
  id: string;
  state: "pending";
  deadletter: DeadLetter;
}

/** A task in flight on a worker (GET /api/v1/workers). */
export interface WorkerTask {
  id: string;
  agent: string;
  queue: string;
  delivery?: string;
  started: string;
  running_ms: number;
  /** A gone worker's task that asynq still holds leased. */
  orphaned: boolean;
  lease_expires_at?: string;
  recovery_from?: string;
  recovery_by?: string;
}

/** A worker process of the registry (GET /api/v1/workers). */
export interface Worker {
  id: string;
  host: string;
  pid: number;
  version: string;
  queues: Record<string, number>;
  concurrency: number;
  started: string;
  last_heartbeat: string;
  heartbeat_age_ms: number;
  state: "alive" | "gone";
  tasks: WorkerTask[];
  orphaned: number;
}

/** A tenant on a queue, as fair dispatch sees it (GET /api/v1/tenants). */
export interface Tenant {
  queue: string;
  /** "" is the default tenant (tasks that name none). */
  tenant: string;
  /** Runs waiting for a worker, and the same by priority (only those with runs). */
  pending: number;
  pending_by_priority?: Partial<Record<"high" | "normal" | "low", number>>;
  in_flight: number;
  /** Its cap on runs in flight across the fleet (0: none). */
  concurrency: number;
  weight: number;
  /** It waits at its cap. */
  capped: boolean;
  /** When its oldest waiting run became pending (absent: none waits). */
  oldest_waiting?: string;
}

/** Usage totals (GET /api/v1/usage): tokens, cost (USD, exact to the micro-dollar) and the attempts that reported usage. */
export interface UsageCounts {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  total_tokens: number;
  cost_usd: number;
  attempts: number;
}

/** The totals of one agent, tenant or model. */
export interface UsageGroup extends UsageCounts {
  by: "agent" | "tenant" | "model";
  /** The agent, tenant or model ("-": none named; "other": series beyond the bound). */
  key: string;
}

/** The totals of one hour (its start), all series together. */
export interface UsageHour extends UsageCounts {
  hour: string;
}

/** The reply of GET /api/v1/usage. */
export interface UsageReport {
  by: "agent" | "tenant" | "model";
  from: string;
  to: string;
  total: UsageCounts;
  groups: UsageGroup[];
  hours: UsageHour[];
}

export interface Agent {
  agent: string;
  key: string;
  state: "closed" | "open" | "half_open";
  health: "healthy" | "degraded" | "unhealthy";
  [k: string]: unknown;
}

/** A schedule of the config; each tick's task ID is `sched:NAME:<tick, UTC>`. */
export interface Schedule {
  name: string;
  cron: string;
  timezone: string;
  agent: string;
  action?: string;
  queue: string;
  overlap: "allow" | "skip";
  next_fire: string | null;
  last_fire: string | null;
  last_skipped?: string;
  last_task_id?: string;
  last_task_state?: State;
}
