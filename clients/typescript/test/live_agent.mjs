#!/usr/bin/env node
// A real exec agent written with agentq/agent, for the live tests: params
// {"mode":"echo"} succeeds with {echo: params} after a progress, an output
// and usage; {"mode":"stream","n":N,"ms":T} reports progress 0..N-1 then
// succeeds; {"mode":"sleep"} sleeps until SIGTERM; {"mode":"fail"} throws
// AgentError(…, 400) (invalid_request); {"mode":"steps","n":N,"url":U} is an
// agent of N model-call steps s1…sN: each step the request does not hold
// POSTs {"step":"sI"} to U (an OpenAI-compatible chat endpoint) and records
// the reply's content as the step's data with its usage (req.step), then
// succeeds with {steps: [data…], called: steps called this attempt};
// {"mode":"approve","timeout":D}
// records a step, then waits for the signal "approve" (suspend) and succeeds
// with what the resumed run was handed.
import { run, AgentError, StepResult, suspend } from "../dist/agent.js";

/** POST one step's call to the chat endpoint url: its content and usage. */
async function modelCall(url, step) {
  const resp = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ step }) });
  if (!resp.ok) throw new Error(`model: HTTP ${resp.status}`);
  const reply = await resp.json();
  return new StepResult(reply.choices[0].message.content, reply.usage);
}

async function steps(req, p) {
  const out = [];
  let called = 0;
  for (let i = 1; i <= (p.n ?? 5); i++) {
    out.push(await req.step(`s${i}`, () => { called++; return modelCall(p.url, `s${i}`); }));
  }
  return { steps: out, called };
}

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
    case "steps":
      return steps(req, p);
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
