#!/usr/bin/env node
// A real exec agent written with agentq/agent, for the live tests: params
// {"mode":"echo"} succeeds with {echo: params} after a progress, an output
// and usage; {"mode":"stream","n":N,"ms":T} reports progress 0..N-1 then
// succeeds; {"mode":"sleep"} sleeps until SIGTERM; {"mode":"fail"} throws
// AgentError(…, 400) (invalid_request); {"mode":"approve","timeout":D}
// records a step, then waits for the signal "approve" (suspend) and succeeds
// with what the resumed run was handed.
import { run, AgentError, suspend } from "../dist/agent.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

run(async (req) => {
  const p = req.params ?? {};
  switch (p.mode ?? "echo") {
    case "echo":
      req.progress({ pct: 50 });
      req.output("partial answer");
      req.usage({ input_tokens: 12, output_tokens: 30 });
      return { echo: p, task: req.task_id };
    case "stream":
      for (let i = 0; i < (p.n ?? 5); i++) {
        req.progress({ i });
        await sleep(p.ms ?? 100);
      }
      return { streamed: p.n ?? 5 };
    case "sleep":
      await sleep(3_600_000);
      return null;
    case "fail":
      throw new AgentError(p.error ?? "bad input: missing field q", 400);
    case "approve": {
      const draft = await req.step("draft", () => ({ words: 3 }));
      if ("approve" in req.signals || req.wait?.timed_out) {
        return { draft, approval: req.signals.approve ?? null, resume: req.resume, wait: req.wait, attempt: req.attempt };
      }
      return suspend({ signal: "approve", timeout: p.timeout ?? "1h" });
    }
    default:
      throw new AgentError(`unknown mode ${p.mode}`, 400);
  }
});
