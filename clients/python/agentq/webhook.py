"""verify_webhook: check a delivery of agentq's webhooks (Standard Webhooks,
https://www.standardwebhooks.com) before acting on it. Standard library only.

The worker signs each delivery (internal/webhook's Sign) with three headers:
``webhook-id``, ``webhook-timestamp`` (Unix seconds) and
``webhook-signature``: ``v1,`` and the standard base64 of
HMAC-SHA256(key, id + "." + timestamp + "." + body), where key is the
webhook's secret ``whsec_<base64>`` decoded.
"""

import base64
import binascii
import datetime
import hashlib
import hmac
import json
import time

from ._types import Result
from .errors import WebhookVerificationError

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE = 300.0  # seconds either side of now a timestamp may be


def verify_webhook(headers, body, secret, *, tolerance=DEFAULT_TOLERANCE, now=None):
    """Verify a webhook delivery and return its parsed JSON body.

    ``headers``: a mapping of the request's headers (a dict, any case, or
    an object with ``.get`` such as http.client/email messages); ``body``:
    the raw body exactly as received (bytes or str — not re-serialized
    JSON); ``secret``: the webhook's ``whsec_<base64>`` secret (the prefix
    is optional). The signature header may hold several space-separated
    ``v1,<base64>`` entries (a rotated secret); one match is enough, and
    the comparison is timing-safe. ``tolerance`` (seconds or a timedelta,
    default 5 minutes) bounds how far the timestamp may be from ``now``
    (Unix seconds; default the clock).

    Raises WebhookVerificationError on any failure, ValueError when the
    secret itself is not valid base64 (a configuration error)."""
    key = _key(secret)
    raw = body.encode() if isinstance(body, str) else bytes(body)
    msg_id = _header(headers, "webhook-id")
    ts = _header(headers, "webhook-timestamp")
    sigs = _header(headers, "webhook-signature")
    _check_timestamp(ts, tolerance, time.time() if now is None else now)
    expected = _sign(key, msg_id, ts, raw)
    if not _any_matches(expected, sigs):
        raise WebhookVerificationError("webhook-signature: no signature matches")
    try:
        return Result.wrap(json.loads(raw))
    except ValueError as e:
        raise WebhookVerificationError("the body is not JSON: %s" % e) from None


def _key(secret):
    if isinstance(secret, (bytes, bytearray)):
        secret = secret.decode("ascii", "replace")
    b64 = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("webhook secret: want %s<base64>" % SECRET_PREFIX) from None
    if not key:
        raise ValueError("webhook secret: empty key")
    return key


def _header(headers, name):
    v = headers.get(name)
    if v is None and hasattr(headers, "items"):
        v = next((x for k, x in headers.items() if str(k).lower() == name), None)
    if isinstance(v, (list, tuple)):
        v = " ".join(v)
    if isinstance(v, bytes):
        v = v.decode("latin-1")
    if not v:
        raise WebhookVerificationError("missing header %s" % name)
    return v.strip()


def _check_timestamp(ts, tolerance, now):
    if not (ts.isascii() and ts.isdigit()):
        raise WebhookVerificationError("webhook-timestamp: not Unix seconds: %r" % ts[:32])
    if isinstance(tolerance, datetime.timedelta):
        tolerance = tolerance.total_seconds()
    if abs(now - int(ts)) > tolerance:
        raise WebhookVerificationError(
            "webhook-timestamp: %s is more than %gs from now" % (ts, tolerance))


def _sign(key, msg_id, ts, raw):
    mac = hmac.new(key, ("%s.%s." % (msg_id, ts)).encode(), hashlib.sha256)
    mac.update(raw)
    return base64.b64encode(mac.digest())


def _any_matches(expected, header):
    ok = False
    for entry in header.split():
        version, _, sig = entry.partition(",")
        if version == "v1":
            # Every entry is compared (no early exit) in constant time.
            ok |= hmac.compare_digest(expected, sig.encode("latin-1", "replace"))
    return ok
