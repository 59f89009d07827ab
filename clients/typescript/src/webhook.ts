// verifyWebhook: check a delivery of agentq's webhooks (Standard Webhooks,
// https://www.standardwebhooks.com) before acting on it. WebCrypto only (the
// runtime's crypto.subtle; on Node 18, node:crypto's webcrypto), no
// dependencies.
//
// The worker signs each delivery (internal/webhook's Sign) with three
// headers: webhook-id, webhook-timestamp (Unix seconds) and
// webhook-signature: "v1," and the standard base64 of
// HMAC-SHA256(key, id + "." + timestamp + "." + body), where key is the
// webhook's secret "whsec_<base64>" decoded.

import { WebhookVerificationError } from "./errors.js";

/** The prefix of a Standard Webhooks secret. */
export const WEBHOOK_SECRET_PREFIX = "whsec_";
/** How far from now a timestamp may be by default, in ms (5 minutes). */
export const WEBHOOK_TOLERANCE_MS = 5 * 60_000;

/** A request's headers: a fetch Headers, or a record such as Node's
 * IncomingHttpHeaders (any case). */
export type WebhookHeaders = { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /** How far the timestamp may be from now, either way, in ms (default 5 minutes). */
  tolerance?: number;
  /** Now, as a Date or ms since the epoch (default Date.now()). */
  now?: number | Date;
}

/**
 * Verify a webhook delivery and return its parsed JSON body.
 *
 * `body` is the raw body exactly as received (a string or bytes — not
 * re-serialized JSON); `secret` the webhook's `whsec_<base64>` secret (the
 * prefix is optional). The signature header may hold several
 * space-separated `v1,<base64>` entries (a rotated secret): one match is
 * enough, and the comparison is timing-safe. Throws a
 * WebhookVerificationError on any failure, a TypeError when the secret
 * itself is not valid base64 (a configuration error). `T` only types the
 * result (it is not checked).
 */
export async function verifyWebhook<T = unknown>(
  headers: WebhookHeaders, body: string | Uint8Array | ArrayBuffer, secret: string, opts: VerifyWebhookOptions = {},
): Promise<T> {
  const key = secretKey(secret);
  const raw = bodyBytes(body);
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  checkTimestamp(ts, opts.tolerance ?? WEBHOOK_TOLERANCE_MS, opts.now instanceof Date ? opts.now.getTime() : opts.now ?? Date.now());
  const expected = await sign(key, id, ts, raw);
  if (!anyMatches(expected, sigs)) throw new WebhookVerificationError("webhook-signature: no signature matches");
  try {
    return JSON.parse(new TextDecoder().decode(raw)) as T;
  } catch (e) {
    throw new WebhookVerificationError(`the body is not JSON: ${(e as Error).message}`);
  }
}

function secretKey(secret: string): Uint8Array {
  const b64 = secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret;
  if (!b64 || b64.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) {
    throw new TypeError(`webhook secret: want ${WEBHOOK_SECRET_PREFIX}<base64>`);
  }
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function bodyBytes(body: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof body === "string") return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError("verifyWebhook: the body must be the raw body (a string or bytes), not parsed JSON");
}

function header(headers: WebhookHeaders, name: string): string {
  let v: string | string[] | null | undefined;
  if (typeof headers.get === "function") {
    v = (headers as { get(name: string): string | null }).get(name);
  } else {
    const rec = headers as Record<string, string | string[] | undefined>;
    v = rec[name] ?? Object.entries(rec).find(([k]) => k.toLowerCase() === name)?.[1];
  }
  if (Array.isArray(v)) v = v.join(" ");
  if (!v) throw new WebhookVerificationError(`missing header ${name}`);
  return v.trim();
}

function checkTimestamp(ts: string, tolerance: number, now: number): void {
  if (!/^[0-9]+$/.test(ts)) throw new WebhookVerificationError(`webhook-timestamp: not Unix seconds: ${JSON.stringify(ts.slice(0, 32))}`);
  if (Math.abs(now - Number(ts) * 1000) > tolerance) {
    throw new WebhookVerificationError(`webhook-timestamp: ${ts} is more than ${tolerance} ms from now`);
  }
}

async function subtle(): Promise<SubtleCrypto> {
  const s = globalThis.crypto?.subtle;
  if (s) return s;
  // Node 18 has WebCrypto without the global.
  const nodeCrypto = await import("node:crypto");
  return nodeCrypto.webcrypto.subtle as unknown as SubtleCrypto;
}

async function sign(key: Uint8Array, id: string, ts: string, raw: Uint8Array): Promise<string> {
  const s = await subtle();
  const k = await s.importKey("raw", key as BufferSource, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const prefix = new TextEncoder().encode(`${id}.${ts}.`);
  const msg = new Uint8Array(prefix.length + raw.length);
  msg.set(prefix);
  msg.set(raw, prefix.length);
  const mac = new Uint8Array(await s.sign("HMAC", k, msg as BufferSource));
  return btoa(String.fromCharCode(...mac));
}

/** Whether any v1 entry of the header is the expected signature; every
 * entry is compared, each in time independent of where it differs. */
function anyMatches(expected: string, header: string): boolean {
  let ok = false;
  for (const entry of header.split(/\s+/)) {
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== "v1") continue;
    ok = constantTimeEqual(expected, entry.slice(comma + 1)) || ok;
  }
  return ok;
}

function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
