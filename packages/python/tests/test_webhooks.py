"""verify_webhook and sign_webhook on their own (the server's and standardwebhooks' side of it
is in test_server.py)."""

from __future__ import annotations

import base64
import email.message
import hashlib
import hmac
import json
import time
import unittest

from safety_incident_api import WebhookVerificationError, sign_webhook, verify_webhook

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(bytes(range(1, 33))).decode()
BODY = json.dumps(
    {
        "type": "incident.updated",
        "timestamp": "2026-11-25T09:41:12.000Z",
        "data": {
            "id": "3f1c2a8e-5b7d-4e9f-a1c3-2d4e6f8a0b1c",
            "object": {"incident_number": "INC-2025-142"},
            "seq": 42,
            "changed_at": "2026-11-25T09:41:12.000Z",
            "cursor": "AQ",
        },
    }
)


def by_hand(secret: str, webhook_id: str, timestamp: int, body: str) -> str:
    """The signature as the Standard Webhooks specification defines it, computed here directly."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{webhook_id}.{timestamp}.{body}".encode()
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


class Signing(unittest.TestCase):
    def test_the_signature_is_hmac_sha256_over_id_timestamp_and_body(self) -> None:
        headers = sign_webhook(BODY, SECRET, webhook_id="msg_1", timestamp=1_700_000_000)
        self.assertEqual(
            headers,
            {
                "webhook-id": "msg_1",
                "webhook-timestamp": "1700000000",
                "webhook-signature": by_hand(SECRET, "msg_1", 1_700_000_000, BODY),
            },
        )

    def test_defaults_a_new_id_and_now(self) -> None:
        first, second = sign_webhook(BODY, SECRET), sign_webhook(BODY, SECRET)
        self.assertRegex(first["webhook-id"], r"^msg_[A-Za-z0-9_-]+$")
        self.assertNotEqual(first["webhook-id"], second["webhook-id"])
        self.assertLessEqual(abs(int(first["webhook-timestamp"]) - time.time()), 5)


class Verifying(unittest.TestCase):
    def test_returns_the_event_as_a_dict(self) -> None:
        event = verify_webhook(BODY, sign_webhook(BODY, SECRET), SECRET)
        self.assertEqual(event, json.loads(BODY))
        self.assertEqual(event["data"]["object"]["incident_number"], "INC-2025-142")

    def test_takes_bytes_any_header_case_and_http_server_headers(self) -> None:
        headers = sign_webhook(BODY, SECRET)
        upper = {name.upper(): value for name, value in headers.items()}
        self.assertEqual(verify_webhook(BODY.encode(), upper, SECRET)["type"], "incident.updated")
        message = email.message.Message()
        for name, value in headers.items():
            message[name.title()] = value
        self.assertEqual(verify_webhook(BODY, message, SECRET)["type"], "incident.updated")
        as_lists = {name: [value] for name, value in headers.items()}
        self.assertEqual(verify_webhook(BODY, as_lists, SECRET)["type"], "incident.updated")

    def test_either_secret_during_a_rotation(self) -> None:
        now = int(time.time())
        signature = (
            f"{by_hand(OTHER_SECRET, 'msg_2', now, BODY)} {by_hand(SECRET, 'msg_2', now, BODY)}"
        )
        headers = {
            "webhook-id": "msg_2",
            "webhook-timestamp": str(now),
            "webhook-signature": signature,
        }
        self.assertEqual(verify_webhook(BODY, headers, SECRET)["type"], "incident.updated")
        self.assertEqual(verify_webhook(BODY, headers, OTHER_SECRET)["type"], "incident.updated")

    def test_refuses_a_tampered_body_another_secret_and_other_versions(self) -> None:
        headers = sign_webhook(BODY, SECRET)
        for body, secret in [(BODY.replace("142", "143"), SECRET), (BODY, OTHER_SECRET)]:
            with self.subTest(secret=secret), self.assertRaisesRegex(
                WebhookVerificationError, "no signature"
            ):
                verify_webhook(body, headers, secret)
        v2 = {**headers, "webhook-signature": headers["webhook-signature"].replace("v1,", "v2,")}
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(BODY, v2, SECRET)

    def test_refuses_a_timestamp_outside_the_tolerance(self) -> None:
        now = time.time()
        old = sign_webhook(BODY, SECRET, timestamp=int(now) - 301)
        with self.assertRaisesRegex(WebhookVerificationError, "too old"):
            verify_webhook(BODY, old, SECRET, now=now)
        future = sign_webhook(BODY, SECRET, timestamp=int(now) + 301)
        with self.assertRaisesRegex(WebhookVerificationError, "future"):
            verify_webhook(BODY, future, SECRET, now=now)
        # Within the window, and a wider window when asked.
        verify_webhook(BODY, sign_webhook(BODY, SECRET, timestamp=int(now) - 299), SECRET, now=now)
        verify_webhook(BODY, old, SECRET, now=now, tolerance=600)

    def test_refuses_missing_or_malformed_headers(self) -> None:
        headers = sign_webhook(BODY, SECRET)
        for name in headers:
            partial = {key: value for key, value in headers.items() if key != name}
            with self.subTest(missing=name), self.assertRaisesRegex(
                WebhookVerificationError, "missing"
            ):
                verify_webhook(BODY, partial, SECRET)
        with self.assertRaisesRegex(WebhookVerificationError, "Unix seconds"):
            verify_webhook(BODY, {**headers, "webhook-timestamp": "soon"}, SECRET)

    def test_refuses_a_signed_body_that_is_not_an_event(self) -> None:
        for body in ["[1, 2]", '{"type": "x"}', "not json"]:
            with self.subTest(body), self.assertRaises(WebhookVerificationError):
                verify_webhook(body, sign_webhook(body, SECRET), SECRET)

    def test_a_secret_that_is_not_one_is_a_value_error_naming_none_of_it(self) -> None:
        for secret in ["whsec_", "whsec_not*base64", ""]:
            with self.subTest(secret), self.assertRaises(ValueError) as refused:
                verify_webhook(BODY, sign_webhook(BODY, SECRET), secret)
            self.assertNotIsInstance(refused.exception, WebhookVerificationError)
        # The Standard Webhooks libraries take the base64 without its prefix too.
        self.assertEqual(
            verify_webhook(BODY, sign_webhook(BODY, SECRET), SECRET.removeprefix("whsec_"))["type"],
            "incident.updated",
        )


if __name__ == "__main__":
    unittest.main()
