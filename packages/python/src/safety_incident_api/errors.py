"""The errors of the API's answers: one class per common status, as in the TypeScript SDK."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .results import RateLimit


class SafetyApiError(Exception):
    """Any answer but a 2xx. `code` is the contract's `error` string, or None when the body has
    `"error": true` (404, 405, 500, 503) or is not the API's JSON (a proxy's page)."""

    status: int
    code: str | None
    message: str
    request_id: str | None
    #: `Retry-After` in seconds, on a 429 or 503 the client gave up waiting for.
    retry_after: int | None
    rate_limit: RateLimit | None
    #: The parsed JSON body, or None when it was not JSON.
    body: Any

    def __init__(
        self,
        status: int,
        body: Any,
        *,
        request_id: str | None = None,
        retry_after: int | None = None,
        rate_limit: RateLimit | None = None,
    ) -> None:
        message = _text(body, "message")
        self.status = status
        self.code = _text(body, "error")
        self.message = message if message is not None else f"HTTP {status}"
        self.request_id = request_id
        self.retry_after = retry_after
        self.rate_limit = rate_limit
        self.body = body
        super().__init__(self.message)

    def __str__(self) -> str:
        code = f" {self.code}" if self.code is not None else ""
        return f"{self.status}{code}: {self.message}"


def _text(body: object, key: str) -> str | None:
    """A string property of a JSON object; None for anything else."""
    value = cast("Mapping[str, object]", body).get(key) if isinstance(body, Mapping) else None
    return value if isinstance(value, str) else None


class AuthenticationError(SafetyApiError):
    """401: the key is missing, malformed (`API_KEY_REQUIRED`), unknown, disabled, revoked or
    expired (`API_KEY_INVALID`)."""


class PermissionError(SafetyApiError):  # noqa: A001 (the TypeScript SDK's name; not the builtin)
    """403: the account's plan has no API access (`FEATURE_NOT_AVAILABLE`), or the key's scope is
    too narrow. Not Python's builtin `PermissionError` (an OSError): import it from this package."""


class NotFoundError(SafetyApiError):
    """404: no such record in the key's account (or no such path)."""


class RateLimitError(SafetyApiError):
    """429: the hourly allowance is used up; `retry_after` says in how many seconds it comes
    back."""


class ServiceUnavailableError(SafetyApiError):
    """503: the service cannot reach its store for a moment; try again after `retry_after`
    seconds."""


_CLASSES: dict[int, type[SafetyApiError]] = {
    401: AuthenticationError,
    403: PermissionError,
    404: NotFoundError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_class_of(status: int) -> type[SafetyApiError]:
    """The error class of an answer's status: a subclass where one exists, else SafetyApiError."""
    return _CLASSES.get(status, SafetyApiError)
