#!/usr/bin/env python3
"""A real exec agent written with agentq.agent, for the live tests:
params {"mode": "echo"} succeeds with {"echo": params} after a progress, an
output and usage; {"mode": "stream", "n": N, "ms": T} reports progress 0..N-1
(T ms apart) then succeeds; {"mode": "sleep"} sleeps until SIGTERM;
{"mode": "fail"} raises AgentError(..., 400) (invalid_request);
{"mode": "steps", "n": N, "url": U} is an agent of N model-call steps
s1..sN: each step the request does not hold POSTs {"step": "sI"} to U (an
OpenAI-compatible chat endpoint) and records the reply's content as the
step's data with its usage (req.step), then succeeds with {"steps": [data...],
"called": steps called this attempt};
{"mode": "approve", "timeout": D} records a step, then waits for the signal
"approve" (suspend) and succeeds with what the resumed run was handed."""

import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agentq.agent import AgentError, StepResult, run, suspend  # noqa: E402


def model_call(url, step):
    """POST one step's call to the chat endpoint url: its content and usage."""
    body = json.dumps({"step": step}).encode()
    rq = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=300) as resp:
        reply = json.load(resp)
    return StepResult(reply["choices"][0]["message"]["content"], reply["usage"])


def steps(req, p):
    called = []

    def call(name):
        def fn():
            called.append(name)
            return model_call(p["url"], name)
        return fn

    out = [req.step("s%d" % i, call("s%d" % i)) for i in range(1, int(p.get("n", 5)) + 1)]
    return {"steps": out, "called": len(called)}



def approve(req, p):
    draft = req.step("draft", lambda: {"words": 3})
    if "approve" in req.signals or (req.wait and req.wait.timed_out):
        return {"draft": draft, "approval": req.signals.get("approve"), "resume": req.resume,
                "wait": req.wait, "attempt": req.attempt}
    suspend(signal="approve", timeout=p.get("timeout", "1h"))


def handle(req):
    p = req.params or {}
    mode = p.get("mode", "echo")
    if mode == "echo":
        req.progress({"pct": 50})
        req.output("partial answer")
        req.usage(input_tokens=12, output_tokens=30)
        return {"echo": p, "task": req.task_id}
    if mode == "stream":
        for i in range(int(p.get("n", 5))):
            req.progress({"i": i})
            time.sleep(int(p.get("ms", 100)) / 1000)
        return {"streamed": int(p.get("n", 5))}
    if mode == "sleep":
        time.sleep(3600)
    if mode == "steps":
        return steps(req, p)
    if mode == "fail":
        raise AgentError(p.get("error", "bad input: missing field q"), 400)
    if mode == "approve":
        return approve(req, p)
    raise AgentError("unknown mode %r" % mode, 400)


if __name__ == "__main__":
    run(handle)
