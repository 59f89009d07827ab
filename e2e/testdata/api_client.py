#!/usr/bin/env python3
"""A client of agentq's HTTP API in Python, standard library only (urllib).

Usage: api_client.py BASE_URL N
The bearer token is read from AGENTQ_API_TOKEN. It checks /healthz, that a
request without the token gets 401, enqueues one task (and again: an
idempotent repeat), then a batch of N-1 more, polls every task until it is
succeeded (or dead_lettered, or 60 s pass), and prints one JSON line per
task: {"id", "state", "attempts", "result"}, then "done N". Any unexpected
reply exits 1 with a message.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(method, url, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def expect(cond, what, got):
    if not cond:
        print("unexpected reply: %s: %r" % (what, got), file=sys.stderr)
        sys.exit(1)


def main():
    base, n = sys.argv[1].rstrip("/"), int(sys.argv[2])
    token = os.environ.get("AGENTQ_API_TOKEN", "")
    expect(token != "", "AGENTQ_API_TOKEN is set", token)

    status, body = call("GET", base + "/healthz")
    expect(status == 200 and body.get("status") == "ok", "GET /healthz", (status, body))

    status, body = call("POST", base + "/api/v1/tasks", {"agent": "tool"})
    expect(status == 401 and body.get("code") == "unauthorized", "POST without token", (status, body))
    print(json.dumps({"check": "unauthorized", "status": status}))

    ids = ["py-%d" % i for i in range(n)]
    first = {"id": ids[0], "agent": "tool", "action": "echo", "params": {"mode": "echo", "n": 0}}
    status, body = call("POST", base + "/api/v1/tasks", first, token)
    expect(status == 202 and body.get("created") is True, "POST first task", (status, body))
    status, body = call("POST", base + "/api/v1/tasks", first, token)
    expect(status == 200 and body.get("duplicate") is True, "POST first task again", (status, body))
    print(json.dumps({"check": "idempotent", "status": status}))

    batch = {"tasks": [{"id": i, "agent": "tool", "params": {"mode": "echo", "n": k + 1},
                        "correlation_id": "py-batch"} for k, i in enumerate(ids[1:])]}
    status, body = call("POST", base + "/api/v1/tasks", batch, token)
    expect(status == 202 and body.get("created") == n - 1, "POST batch", (status, body))

    deadline = time.time() + 60
    pending = set(ids)
    views = {}
    while pending and time.time() < deadline:
        for i in sorted(pending):
            status, body = call("GET", base + "/api/v1/tasks/" + urllib.request.quote(i, safe=""), token=token)
            expect(status == 200, "GET task " + i, (status, body))
            if body["state"] in ("succeeded", "dead_lettered"):
                views[i] = body
                pending.discard(i)
        if pending:
            time.sleep(0.05)
    expect(not pending, "tasks terminal within 60s", sorted(pending))
    for i in ids:
        v = views[i]
        print(json.dumps({"id": i, "state": v["state"], "attempts": v["attempts"], "result": v.get("result")}, sort_keys=True))

    status, body = call("GET", base + "/api/v1/agents", token=token)
    expect(status == 200, "GET /api/v1/agents", (status, body))
    print(json.dumps({"agents": [a["agent"] + ":" + a["health"] for a in body["agents"]]}))
    print("done %d" % len(ids))


if __name__ == "__main__":
    main()
