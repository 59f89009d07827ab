// The installed package, as a team's project imports it: scripts/test-packages.sh
// copies this file into a fresh project that ran `npm install <tarball>` or
// `npm install <path>` and runs it there, offline. Usage:
// node installed.mjs VERSION
import assert from "node:assert/strict";
import { realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { Client, VERSION, verifyWebhook, TransportError, BudgetExhaustedError, APIError, fromReply } from "agentq";
import { handleRequest } from "agentq/agent";

const want = process.argv[2];
assert.equal(VERSION, want, "the package's VERSION");
const require = createRequire(import.meta.url);
assert.equal(require("agentq/package.json").version, want, "package.json's version");
const where = realpathSync(require.resolve("agentq"));
assert.match(where, /[/\\]dist[/\\]index\.js$/, `"agentq" resolves into dist/: ${where}`);

// The Standard Webhooks specification's example.
const headers = {
  "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
  "webhook-timestamp": "1614265330",
  "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};
const msg = await verifyWebhook(headers, '{"test": 2432232314}', "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", { now: 1614265330_000 });
assert.deepEqual(msg, { test: 2432232314 });

// A client, and a call nothing answers (port 1 on loopback: refused).
const aq = new Client({ url: "http://127.0.0.1:1", token: "t", retries: 0, timeout: 5_000 });
await assert.rejects(aq.health(), TransportError);
const e = fromReply(409, { code: "budget_exhausted", error: "no room", budget: "tenant a", resets_at: "2026-01-01T00:00:00Z" });
assert.ok(e instanceof BudgetExhaustedError && e instanceof APIError && e.resetsAt === "2026-01-01T00:00:00Z");

// The agent helpers, without a subprocess.
const reply = await handleRequest((req) => ({ echo: req.params.q }), JSON.stringify({ task_id: "t1", params: { q: 7 } }));
assert.deepEqual(reply, { status: "success", code: 0, data: { echo: 7 } });
console.log(`agentq ${VERSION} imported from ${where}`);
