"""Standard Webhooks signatures (https://www.standardwebhooks.com), as the service signs its events.

A secret is `whsec_` and the base64 of its key bytes; a signature is `v1,` and the base64 of
HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`. During a secret's rotation the
`webhook-signature` header holds one signature per secret, space-separated.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, cast

#: How far a webhook's timestamp may be from this clock, in seconds, either way (replays older
#: than this are refused), as the TypeScript SDK and the Standard Webhooks libraries allow.
DEFAULT_TOLERANCE = 5 * 60

_PREFIX = "whsec_"


class WebhookVerificationError(Exception):
    """The request is not a webhook signed with the secret: refuse it (answer 400 or 401)."""


class Headers(Protocol):
    """A request's headers: a dict (any case), or the headers object of a web framework or of
    `http.server` (anything with `items()`)."""

    def items(self) -> Iterable[tuple[str, Any]]:
        ...


def _key(secret: str) -> bytes:
    encoded = secret[len(_PREFIX) :] if secret.startswith(_PREFIX) else secret
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        # Names no byte of the secret.
        raise ValueError("a webhook secret is whsec_ and the base64 of its key")
    return key


def _signature(key: bytes, webhook_id: str, timestamp: str, body: bytes) -> bytes:
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())


def _header(headers: Headers, name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            # A framework that keeps every value of a header: the first.
            values = (
                cast("Sequence[object]", value) if isinstance(value, (list, tuple)) else [value]
            )
            first = values[0] if values else None
            return first if isinstance(first, str) else None
    return None


def verify_webhook(
    body: bytes | str,
    headers: Headers,
    secret: str,
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> dict[str, Any]:
    """The event a webhook request carries, as a dict, once its Standard Webhooks signature
    verifies with `secret` (`whsec_…`; during a rotation either secret's signature is accepted)
    and its timestamp is within `tolerance` seconds of this clock (`now`, Unix seconds, for
    tests), which stops replays. `body` must be the raw body as it arrived, before any JSON
    parsing. Raises WebhookVerificationError otherwise; ValueError for a secret that is not one.
    """
    key = _key(secret)
    raw = body.encode() if isinstance(body, str) else bytes(body)
    webhook_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not webhook_id or not timestamp or not signatures:
        raise WebhookVerificationError(
            "missing webhook-id, webhook-timestamp or webhook-signature header"
        )
    if not (timestamp.isascii() and timestamp.isdigit()):
        raise WebhookVerificationError("the webhook-timestamp header is not Unix seconds")
    clock = time.time() if now is None else now
    if int(timestamp) < clock - tolerance:
        raise WebhookVerificationError("the webhook's timestamp is too old")
    if int(timestamp) > clock + tolerance:
        raise WebhookVerificationError("the webhook's timestamp is in the future")
    expected = _signature(key, webhook_id, timestamp, raw)
    # Every signature is compared, in constant time, whatever the first ones gave.
    matched = False
    for candidate in signatures.split(" "):
        version, _, signature = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(expected, signature.encode()):
            matched = True
    if not matched:
        raise WebhookVerificationError("no signature matches the secret")
    try:
        event = json.loads(raw)
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
    # The body is the service's once its signature verifies; this checks only what tells events
    # apart, so that an event type newer than this client still reaches the receiver.
    if not isinstance(event, dict):
        raise WebhookVerificationError("the body is not a webhook event")
    parsed = cast("dict[str, Any]", event)
    if not isinstance(parsed.get("type"), str) or not isinstance(parsed.get("data"), dict):
        raise WebhookVerificationError("the body is not a webhook event")
    return parsed


def sign_webhook(
    body: bytes | str,
    secret: str,
    *,
    webhook_id: str | None = None,
    timestamp: int | None = None,
) -> dict[str, str]:
    """The three Standard Webhooks headers of `body` signed with `secret`, as the service sends
    them: to test a receiver without the service. `webhook_id` defaults to a new `msg_…` id,
    `timestamp` to now (Unix seconds)."""
    key = _key(secret)
    raw = body.encode() if isinstance(body, str) else bytes(body)
    webhook_id = webhook_id if webhook_id is not None else f"msg_{secrets.token_urlsafe(18)}"
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": stamp,
        "webhook-signature": f"v1,{_signature(key, webhook_id, stamp, raw).decode()}",
    }
