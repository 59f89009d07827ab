"""The installed package, as a team's service imports it:
scripts/test-packages.sh runs this with a virtual environment's Python
after installing the built wheel (then the sdist) into it, outside the
source tree, offline. Usage: python installed.py VERSION SITE"""

import os
import sys

want, site = sys.argv[1], os.path.realpath(sys.argv[2])
for p in list(sys.path):
    if os.path.isfile(os.path.join(p, "agentq", "client.py")) and not os.path.realpath(p).startswith(site):
        raise SystemExit("agentq is importable from the source tree (%s), not only from the install" % p)

import agentq  # noqa: E402
from agentq.agent import handle_request  # noqa: E402

where = os.path.realpath(agentq.__file__)
assert where.startswith(site + os.sep), "agentq imported from %s, not from %s" % (where, site)
assert agentq.__version__ == want, (agentq.__version__, want)
assert os.path.isfile(os.path.join(os.path.dirname(where), "py.typed")), "py.typed is installed"

# The Standard Webhooks specification's example.
headers = {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
           "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}
msg = agentq.verify_webhook(headers, b'{"test": 2432232314}', "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", now=1614265330)
assert msg == {"test": 2432232314}, msg

# A client, and a call nothing answers (port 1 on loopback: refused).
aq = agentq.Client("http://127.0.0.1:1", token="t", retries=0, timeout=5)
try:
    aq.health()
    raise AssertionError("health() on a refused port returned")
except agentq.TransportError:
    pass
e = agentq.errors.from_reply(409, {"code": "budget_exhausted", "error": "no room", "resets_at": "2026-01-01T00:00:00Z"})
assert isinstance(e, agentq.BudgetExhausted) and e.resets_at == "2026-01-01T00:00:00Z"
assert isinstance(agentq.AsyncClient, type)

# The agent helpers, without a subprocess.
reply = handle_request(lambda req: {"echo": req.params["q"]}, '{"task_id": "t1", "params": {"q": 7}}')
assert reply["status"] == "success" and reply["data"] == {"echo": 7}, reply
print("agentq %s imported from %s" % (agentq.__version__, where))
