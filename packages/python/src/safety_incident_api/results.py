"""What calls return besides the generated records: the rate limit, results, sync's records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, TypeVar, Union

from .models import ChangeType, Department, Incident, Location, User

T = TypeVar("T")

#: The four kinds of record, by their name in the changes feed and in webhook events.
RecordType = ChangeType

#: A record of any kind.
AnyRecord = Union[Incident, User, Department, Location]

#: The formats of an export.
ExportFormat = Literal["ndjson", "csv"]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """`X-RateLimit-Limit` and `X-RateLimit-Remaining` (the hourly allowance and what is left of
    it) and `X-RateLimit-Reset` (Unix seconds when the window resets; None on a 429, which does
    not send it)."""

    limit: int
    remaining: int
    reset: int | None


@dataclass(frozen=True, slots=True)
class ApiResult(Generic[T]):
    """What every `list_…` and `get_…` call returns: the body's `data`, with the headers an
    integrator acts on."""

    data: T
    #: None only on an answer that was not counted against the allowance.
    rate_limit: RateLimit | None
    #: `X-Request-Id`: quote it when asking for support.
    request_id: str | None


@dataclass(frozen=True, slots=True)
class TypedRecord:
    """A record with its kind: what `sync()` hands to `on_record`."""

    type: RecordType
    object: AnyRecord


@dataclass(frozen=True, slots=True)
class Deletion:
    """A record that left the public view: what `sync()` hands to `on_delete`."""

    type: RecordType
    id: str


@dataclass(frozen=True, slots=True)
class ExportResult:
    """An export written to a file."""

    path: Path
    format: ExportFormat
    #: `X-Changes-Cursor`: the changes-feed position of the export's snapshot, to continue from
    #: with `changes()` or `sync()`.
    cursor: str
    #: Bytes written (after decompression).
    size: int
    rate_limit: RateLimit | None
    request_id: str | None
