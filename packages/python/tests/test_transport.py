"""Retries, timeouts, the User-Agent and base_url: against a stub server that misbehaves on cue."""

from __future__ import annotations

import gzip
import platform
import shutil
import socket
import tempfile
import unittest
import urllib.error
from pathlib import Path

from safety_incident_api import (
    AppInfo,
    Client,
    NotFoundError,
    RateLimitError,
    ServiceUnavailableError,
    __version__,
)

from .support import Answer, StubServer, recorded_waits

OK = Answer(200, body=b'{"error": false, "data": []}')


def unavailable(retry_after: str | None = None) -> Answer:
    headers = {} if retry_after is None else {"retry-after": retry_after}
    return Answer(503, headers, b'{"error": true, "message": "Service temporarily unavailable"}')


def rate_limited(retry_after: str) -> Answer:
    return Answer(
        429,
        {"retry-after": retry_after, "x-ratelimit-limit": "100", "x-ratelimit-remaining": "0"},
        b'{"error": "RATE_LIMIT_EXCEEDED", "message": "Rate limit exceeded"}',
    )


class Retries(unittest.TestCase):
    def test_503_and_429_are_retried_after_their_retry_after(self) -> None:
        with StubServer(
            [unavailable("2"), rate_limited("3"), OK]
        ) as stub, recorded_waits() as waits:
            result = Client(stub.url, "svc_key").list_users()
        self.assertEqual(result.data, [])
        self.assertEqual(waits, [2, 3])
        self.assertEqual(len(stub.seen), 3)

    def test_without_retry_after_one_second(self) -> None:
        with StubServer([unavailable(), OK]) as stub, recorded_waits() as waits:
            Client(stub.url, "svc_key").list_users()
        self.assertEqual(waits, [1])

    def test_the_last_answer_is_reported_once_the_retries_are_spent(self) -> None:
        answers = [unavailable("1")] * 4
        with StubServer(list(answers)) as stub, recorded_waits() as waits:
            with self.assertRaises(ServiceUnavailableError) as failed:
                Client(stub.url, "svc_key", max_retries=3).list_users()
        self.assertEqual(len(stub.seen), 4, "the first attempt and 3 retries")
        self.assertEqual(waits, [1, 1, 1])
        self.assertEqual((failed.exception.status, failed.exception.retry_after), (503, 1))
        self.assertIsNone(failed.exception.code)

    def test_a_retry_after_past_the_budget_is_reported_at_once(self) -> None:
        with StubServer([rate_limited("120"), OK]) as stub, recorded_waits() as waits:
            with self.assertRaises(RateLimitError) as limited:
                Client(stub.url, "svc_key").list_users()
        self.assertEqual((waits, len(stub.seen)), ([], 1))
        self.assertEqual(limited.exception.retry_after, 120)
        assert limited.exception.rate_limit is not None
        self.assertEqual(limited.exception.rate_limit.remaining, 0)
        # The budget counts every wait of the call: 40 + 40 would pass 60.
        with StubServer(
            [rate_limited("40"), rate_limited("40"), OK]
        ) as stub, recorded_waits() as waits:
            with self.assertRaises(RateLimitError):
                Client(stub.url, "svc_key").list_users()
        self.assertEqual(waits, [40])
        with StubServer(
            [rate_limited("40"), rate_limited("40"), OK]
        ) as stub, recorded_waits() as waits:
            Client(stub.url, "svc_key", max_wait=90).list_users()
        self.assertEqual(waits, [40, 40])

    def test_max_retries_0_sends_once(self) -> None:
        with StubServer([unavailable("1"), OK]) as stub, recorded_waits() as waits:
            with self.assertRaises(ServiceUnavailableError):
                Client(stub.url, "svc_key", max_retries=0).list_users()
        self.assertEqual((waits, len(stub.seen)), ([], 1))

    def test_other_errors_are_not_retried(self) -> None:
        body = b'{"error": true, "message": "Incident not found"}'
        with StubServer([Answer(404, body=body), OK]) as stub, recorded_waits() as waits:
            with self.assertRaises(NotFoundError):
                Client(stub.url, "svc_key").get_incident("x")
        self.assertEqual((waits, len(stub.seen)), ([], 1))

    def test_a_dropped_connection_is_retried_after_a_jittered_backoff(self) -> None:
        with StubServer(["drop", "drop", OK]) as stub, recorded_waits(jitter=0.9) as waits:
            self.assertEqual(Client(stub.url, "svc_key").list_users().data, [])
        self.assertEqual(len(stub.seen), 3)
        # A quarter of a second, doubled each time, times 0.5 + jitter.
        self.assertEqual(waits, [0.35, 0.7])

    def test_a_refused_connection_raises_once_the_retries_are_spent(self) -> None:
        # A port nothing listens on: bound, never listening.
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
            with recorded_waits() as waits, self.assertRaises(urllib.error.URLError) as failed:
                Client(f"http://127.0.0.1:{port}", "svc_key", max_retries=2).list_users()
        self.assertIsInstance(failed.exception.reason, ConnectionRefusedError)
        self.assertEqual(waits, [0.25, 0.5])
        with recorded_waits() as waits, self.assertRaises(OSError):
            Client(f"http://127.0.0.1:{port}", "svc_key", max_retries=0).list_users()
        self.assertEqual(waits, [])


class Exports(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="safety-export-"))

    def tearDown(self) -> None:
        shutil.rmtree(self.dir)

    def export(self, answer: Answer) -> None:
        with StubServer([answer]) as stub:
            Client(stub.url, "svc_key").export_incidents(self.dir / "incidents.ndjson")

    def test_an_export_cut_short_raises_and_leaves_no_file(self) -> None:
        cursor = {"x-changes-cursor": "AQ"}
        with self.assertRaisesRegex(ConnectionError, "cut short"):
            self.export(Answer(200, cursor, b'{"id": "1"}\n{"id": '))
        rows = b'{"id": "1"}\n{"id": "2"}\n'
        gzipped = {**cursor, "content-encoding": "gzip"}
        with self.assertRaisesRegex(ConnectionError, "cut short"):
            self.export(Answer(200, gzipped, gzip.compress(rows)[:-12]))
        self.assertEqual(list(self.dir.iterdir()), [])
        # Whole, and compressed: the file holds the rows as they were.
        self.export(Answer(200, gzipped, gzip.compress(rows)))
        self.assertEqual((self.dir / "incidents.ndjson").read_bytes(), rows)

    def test_an_answer_that_is_not_an_export_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "is not an export"):
            self.export(
                Answer(200, {"content-type": "text/html"}, b"<html>Sign in to the Wi-Fi</html>")
            )
        self.assertEqual(list(self.dir.iterdir()), [])


class Timeouts(unittest.TestCase):
    def test_a_silent_server_raises_timeout_error_without_a_retry(self) -> None:
        with socket.socket() as silent:
            # Accepts connections (the backlog) and never answers.
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            url = f"http://127.0.0.1:{silent.getsockname()[1]}"
            with recorded_waits() as waits, self.assertRaises(TimeoutError):
                Client(url, "svc_key", timeout=0.2).list_users()
            self.assertEqual(waits, [])
            # A call's own timeout overrides the client's.
            with self.assertRaises(TimeoutError):
                Client(url, "svc_key", timeout=600).list_users(timeout=0.2)


class Headers(unittest.TestCase):
    def test_user_agent_and_authorization(self) -> None:
        with StubServer([OK, OK]) as stub:
            Client(stub.url, "svc_key").list_users()
            Client(stub.url, "svc_key", app_info=AppInfo("nightly-report", "2.1")).list_locations()
        python = platform.python_version()
        self.assertEqual(
            stub.seen[0].headers["user-agent"],
            f"safety-incident-sdk-python/{__version__} python/{python}",
        )
        self.assertEqual(
            stub.seen[1].headers["user-agent"],
            f"safety-incident-sdk-python/{__version__} python/{python} nightly-report/2.1",
        )
        self.assertEqual(stub.seen[0].headers["authorization"], "Bearer svc_key")
        self.assertEqual(stub.seen[1].path, "/api/v1/public/locations")

    def test_app_info_must_be_a_product_token(self) -> None:
        with self.assertRaisesRegex(ValueError, "app_info"):
            Client("http://127.0.0.1:9", "svc_key", app_info=AppInfo("my app"))


class BaseUrl(unittest.TestCase):
    def test_only_an_origin_is_accepted_with_a_message_that_says_so(self) -> None:
        for bad in [
            "safety.example.com",
            "ftp://safety.example.com",
            "https://x.example/api/v1",
            "https://x.example?a=1",
            "",
        ]:
            with self.subTest(bad), self.assertRaisesRegex(
                ValueError, "base_url must be the service's origin"
            ):
                Client(bad, "svc_key")
        self.assertEqual(
            repr(Client("https://x.example/", "svc_key")), "Client('https://x.example')"
        )

    def test_a_credential_is_required(self) -> None:
        with self.assertRaisesRegex(ValueError, "api_key"):
            Client("https://x.example", None)


if __name__ == "__main__":
    unittest.main()
