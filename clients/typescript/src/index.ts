// agentq: a client of agentq's HTTP API (zero runtime dependencies; the
// platform's fetch). Exec-agent helpers are in "agentq/agent".

export * from "./types.js";
export * from "./errors.js";
export { Client, ROUTES, TASK_FIELDS, DEFAULT_URL, MAX_WAIT_MS, MAX_REPLY_BYTES, MAX_EVENT_BYTES, goDuration, taskRequest, taskResult, type ClientOptions } from "./client.js";
export { verifyWebhook, WEBHOOK_SECRET_PREFIX, WEBHOOK_TOLERANCE_MS, type VerifyWebhookOptions, type WebhookHeaders } from "./webhook.js";
export { parseSSE } from "./sse.js";
/** The client's version: one number with clients/VERSION and the Python package. */
export const VERSION = "1.0.0";
