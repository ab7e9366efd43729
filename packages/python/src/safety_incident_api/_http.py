"""GET requests to the service with urllib, retried as the TypeScript SDK retries them."""

from __future__ import annotations

import http.client
import json
import platform
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from email.message import Message
from typing import Any, Union

from ._version import __version__
from .errors import SafetyApiError, error_class_of
from .results import RateLimit

#: Before the next attempt after a network failure (a refused or reset connection, as while an
#: instance restarts): this many seconds, doubled at each attempt, jittered by up to half either
#: way.
NETWORK_RETRY_BASE = 0.25
#: What the service answers when the caller should come back later, with `Retry-After`.
RETRIED_STATUSES = frozenset({429, 503})
#: A 429 or 503 from something in front of the service may come without `Retry-After`.
DEFAULT_WAIT = 1

# The waits and the jitter, looked up at each use so that tests can replace them.
sleep = time.sleep
jitter = random.random

#: A product token of RFC 9110 (`name/version`): no space, slash or control character.
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

#: A query parameter's value; None leaves it out.
QueryValue = Union[str, int, None]

#: What urllib and http.client raise when a request fails on the network.
_NETWORK_ERRORS = (OSError, http.client.HTTPException)


def user_agent(app_name: str | None, app_version: str | None) -> str:
    """`User-Agent`: the client, Python, then the application when one is named."""
    parts = [f"safety-incident-sdk-python/{__version__}", f"python/{platform.python_version()}"]
    if app_name is not None:
        if not _TOKEN.match(app_name) or (
            app_version is not None and not _TOKEN.match(app_version)
        ):
            raise ValueError(
                "app_info: name and version must be single words of letters, digits and -._~ "
                f"(got {app_name!r}, {app_version!r})"
            )
        parts.append(app_name if app_version is None else f"{app_name}/{app_version}")
    return " ".join(parts)


def origin_of(base_url: object) -> str:
    """The service's origin from `base_url`, or a ValueError that says what is expected."""
    expected = "base_url must be the service's origin, e.g. https://safety.example.com"
    if not isinstance(base_url, str):
        raise ValueError(f"{expected} (got {base_url!r})")
    url = urllib.parse.urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError(f"{expected}: http:// or https:// and a host (got {base_url!r})")
    if url.path not in ("", "/") or url.query or url.fragment:
        raise ValueError(
            f"{expected}, without a path or query: the client adds /api/v1/… (got {base_url!r})"
        )
    return f"{url.scheme}://{url.netloc}"


def integer_header(headers: Message, name: str) -> int | None:
    """A header holding a whole number (`Retry-After` in seconds, `X-RateLimit-*`); None when
    absent or in another form."""
    value = headers.get(name)
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else None


def rate_limit_of(headers: Message) -> RateLimit | None:
    limit = integer_header(headers, "x-ratelimit-limit")
    remaining = integer_header(headers, "x-ratelimit-remaining")
    if limit is None or remaining is None:
        return None
    return RateLimit(limit, remaining, integer_header(headers, "x-ratelimit-reset"))


def _is_timeout(failure: BaseException) -> bool:
    return isinstance(failure, TimeoutError) or (
        isinstance(failure, urllib.error.URLError) and isinstance(failure.reason, TimeoutError)
    )


def _error_of(answer: urllib.error.HTTPError) -> SafetyApiError:
    try:
        raw = answer.read()
    except _NETWORK_ERRORS:
        raw = b""
    finally:
        answer.close()
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = None
    return error_class_of(answer.code)(
        answer.code,
        body,
        request_id=answer.headers.get("x-request-id"),
        retry_after=integer_header(answer.headers, "retry-after"),
        rate_limit=rate_limit_of(answer.headers),
    )


class Transport:
    """Sends GET requests to one service; every one is idempotent, so sending it again is safe."""

    def __init__(
        self,
        origin: str,
        *,
        user_agent: str,
        timeout: float | None,
        max_retries: int,
        max_wait: float,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more (got {max_retries})")
        if max_wait < 0:
            raise ValueError(f"max_wait must be 0 or more seconds (got {max_wait})")
        self.origin = origin
        self.user_agent = user_agent
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_wait = max_wait
        # urllib's usual handlers: proxies from the environment (HTTPS_PROXY, NO_PROXY) included.
        self._opener = urllib.request.build_opener()

    def url(self, path: str, query: Mapping[str, QueryValue] | None = None) -> str:
        pairs = [(key, str(value)) for key, value in (query or {}).items() if value is not None]
        return self.origin + path + (f"?{urllib.parse.urlencode(pairs)}" if pairs else "")

    def open(
        self,
        path: str,
        query: Mapping[str, QueryValue] | None,
        *,
        credential: str,
        timeout: float | None,
        gzip: bool = False,
    ) -> http.client.HTTPResponse:
        """The 2xx answer, its body unread, after the retries the budget allows: 429 and 503 after
        their `Retry-After`, a network failure after a short jittered backoff. Any other answer, or
        the last one, raises its SafetyApiError; the last network failure raises as urllib raised
        it; a timeout raises TimeoutError at once (it is the most one attempt may take)."""
        url = self.url(path, query)
        headers = {
            "Authorization": f"Bearer {credential}",
            "User-Agent": self.user_agent,
            "Accept-Encoding": "gzip" if gzip else "identity",
        }
        waited = 0.0
        attempt = 1
        while True:
            request = urllib.request.Request(url, headers=headers, method="GET")
            try:
                response: http.client.HTTPResponse = self._opener.open(request, timeout=timeout)
                return response
            except urllib.error.HTTPError as answer:
                retry_after = integer_header(answer.headers, "retry-after")
                wait = float(DEFAULT_WAIT if retry_after is None else retry_after)
                if (
                    answer.code not in RETRIED_STATUSES
                    or attempt > self.max_retries
                    or waited + wait > self.max_wait
                ):
                    raise _error_of(answer) from None
                # Frees the connection before the wait.
                answer.close()
            except _NETWORK_ERRORS as failure:
                if _is_timeout(failure):
                    raise TimeoutError(f"GET {url}: no answer within {timeout} s") from failure
                wait = round(NETWORK_RETRY_BASE * 2 ** (attempt - 1) * (0.5 + jitter()), 3)
                if attempt > self.max_retries or waited + wait > self.max_wait:
                    raise
            sleep(wait)
            waited += wait
            attempt += 1

    def get_json(
        self,
        path: str,
        query: Mapping[str, QueryValue] | None,
        *,
        credential: str,
        timeout: float | None,
    ) -> tuple[Any, RateLimit | None, str | None]:
        """The parsed body of a 2xx answer, its rate limit and its request id."""
        with self.open(path, query, credential=credential, timeout=timeout) as response:
            raw = response.read()
            headers = response.headers
        try:
            body = json.loads(raw)
        except ValueError:
            # Something in front of the service answered in its place (a captive portal's page).
            raise ValueError(
                f"GET {self.url(path, query)} answered {response.status} with something other "
                "than the API's JSON"
            ) from None
        return body, rate_limit_of(headers), headers.get("x-request-id")
