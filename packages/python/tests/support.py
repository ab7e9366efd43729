"""What the tests share: the real server's fixture, and a stub server for what it never does."""

from __future__ import annotations

import json
import os
import threading
import unittest
import urllib.error
import urllib.request
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from safety_incident_api import _http

#: Set by test/python/client.test.ts, which starts the server and seeds it.
SERVER_URL = os.environ.get("SAFETY_API_URL")
API_KEY = os.environ.get("SAFETY_API_KEY")
CONTROL_URL = os.environ.get("SAFETY_TEST_CONTROL_URL")

requires_server = unittest.skipUnless(
    SERVER_URL and API_KEY and CONTROL_URL,
    "needs a seeded server: `npm test -- test/python` runs this suite against one on each store",
)


def control(method: str, path: str, body: Any = None) -> Any:
    """A call to the test's control server (test/python/client.test.ts)."""
    assert CONTROL_URL is not None
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{CONTROL_URL}{path}",
        data=data,
        method=method,
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as answer:
        return {"status": answer.code, **json.loads(answer.read())}


_fixture: dict[str, Any] | None = None


def fixture() -> dict[str, Any]:
    """What the server was seeded with (read once)."""
    global _fixture
    if _fixture is None:
        _fixture = control("GET", "/fixture")
        assert isinstance(_fixture, dict)
    return _fixture


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict[str, str])
    body: bytes = b'{"error": false, "data": []}'


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


class StubServer:
    """An HTTP server on 127.0.0.1 answering each request with the next of `answers` (an Answer,
    or "drop": close the connection without answering, as a restarting instance does); every
    request is recorded."""

    def __init__(self, answers: list[Answer | str]) -> None:
        self.answers = list(answers)
        self.seen: list[Seen] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                stub.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
                answer = stub.answers.pop(0) if stub.answers else Answer(500)
                if answer == "drop" or not isinstance(answer, Answer):
                    self.close_connection = True
                    self.connection.close()
                    return
                self.send_response(answer.status)
                for name, value in {"content-type": "application/json", **answer.headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def recorded_waits(jitter: float = 0.5) -> Generator[list[float], None, None]:
    """The client's waits between attempts, recorded instead of slept (a controlled clock), and
    its jitter fixed (0.5: none)."""
    waits: list[float] = []
    sleep: Callable[[float], None] = _http.sleep
    random: Callable[[], float] = _http.jitter
    _http.sleep = waits.append
    _http.jitter = lambda: jitter
    try:
        yield waits
    finally:
        _http.sleep = sleep
        _http.jitter = random
