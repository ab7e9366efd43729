"""The client of the Safety Incident API: typed calls, iterators, exports, sync()."""

from __future__ import annotations

import gzip
import http.client
import io
import json
import os
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ._http import QueryValue, Transport, origin_of, rate_limit_of, user_agent
from .models import (
    PATHS,
    ChangesPage,
    Department,
    DepartmentPage,
    Incident,
    IncidentList,
    IncidentPage,
    Location,
    LocationPage,
    Pagination,
    User,
    UserPage,
)
from .results import (
    AnyRecord,
    ApiResult,
    Deletion,
    ExportFormat,
    ExportResult,
    RateLimit,
    RecordType,
    TypedRecord,
)

#: The largest page of incidents the API serves: the fewest requests for `incidents()`.
INCIDENT_PAGE_SIZE = 200
#: The largest page of the wider API (`_limit`): the fewest requests for the `…_paged()` iterators.
WIDER_PAGE_SIZE = 100
#: The largest page of the feed: the fewest requests for `sync()`.
FEED_PAGE_SIZE = 1000
#: How much of an export is read at a time.
_CHUNK = 64 * 1024

_R = TypeVar("_R", bound="_Identified")
_R_co = TypeVar("_R_co", bound="_Identified", covariant=True)
_T = TypeVar("_T")


class _Identified(Protocol):
    @property
    def id(self) -> str:
        ...


@dataclass(frozen=True, slots=True)
class AppInfo:
    """Your application, named after the client in the `User-Agent` of every request."""

    name: str
    version: str | None = None


class CursorFile:
    """A cursor kept in a file, for `sync()`: `load()` gives None until a cursor was saved;
    `save()` replaces the file whole (written beside it, then renamed), so that a run stopped
    mid-write leaves the previous cursor, never half of one."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> str | None:
        try:
            cursor = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return cursor or None

    def save(self, cursor: str) -> None:
        partial = self.path.with_name(f"{self.path.name}.part")
        partial.write_text(f"{cursor}\n", encoding="utf-8")
        os.replace(partial, self.path)


class _Export:
    """One export's answer, read as it arrives: the body is never held whole."""

    def __init__(self, response: http.client.HTTPResponse, url: str) -> None:
        cursor = response.headers.get("x-changes-cursor")
        if cursor is None:
            # Something in front of the service answered in its place (a proxy's page).
            response.close()
            raise ValueError(f"GET {url} is not an export (it has no X-Changes-Cursor)")
        self.cursor: str = cursor
        self.rate_limit: RateLimit | None = rate_limit_of(response.headers)
        self.request_id: str | None = response.headers.get("x-request-id")
        self._response = response
        self._body: io.BufferedIOBase = (
            gzip.GzipFile(fileobj=response, mode="rb")
            if response.headers.get("content-encoding") == "gzip"
            else response
        )

    def __enter__(self) -> _Export:
        return self

    def __exit__(self, *_: object) -> None:
        # Closing releases the export's snapshot on the service, read to the end or not.
        self._body.close()
        self._response.close()

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes, decompressed. Every row ends in LF (CRLF in CSV): a body that stops
        mid-row, or a transfer that breaks, was cut short (the service failed mid-export)."""
        last = b"\n"
        try:
            while chunk := self._body.read(_CHUNK):
                last = chunk[-1:]
                yield chunk
        except (http.client.IncompleteRead, EOFError, gzip.BadGzipFile) as failure:
            raise ConnectionError("the export was cut short: export again") from failure
        if last != b"\n":
            raise ConnectionError("the export ended mid-row: it was cut short, export again")

    def rows(self) -> Iterator[Any]:
        """The rows of an NDJSON export, parsed, each as its line arrives."""
        partial = b""
        for chunk in self.chunks():
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                yield json.loads(line)


def _offset_pages(
    fetch: Callable[[int], tuple[Sequence[_R], Pagination]],
) -> Iterator[_R]:
    """Every record of a wider-API list (`_start`/`_limit`): the next page starts at `start` +
    the page size while `currentPage` is below `totalPages`. A record pushed onto the next page
    by a new one is not yielded twice."""
    start = 0
    previous: set[str] = set()
    while True:
        records, pagination = fetch(start)
        for record in records:
            if record.id not in previous:
                yield record
        if not records or pagination.current_page >= pagination.total_pages:
            return
        previous = {record.id for record in records}
        start = pagination.start + pagination.per_page


class Client:
    """A client of the Safety Incident API for one service and one API key (`svc_…`).

    `base_url` is the service's origin (`https://safety.example.com`, no path). `timeout` is the
    most seconds one attempt waits to connect and for each read of the answer (None: no limit); a
    call's own `timeout=` overrides it. `max_retries` is how many times a call is sent again after
    a 429 or 503 (after its `Retry-After`) or a network failure (after a short jittered backoff),
    within `max_wait` seconds of waiting in all; 0 sends every call once. `access_token` (an OAuth 2
    access token of the same account) is for the wider API's `…_paged` calls; `app_info` names
    your application in the `User-Agent`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout: float | None = 30.0,
        max_retries: int = 3,
        *,
        max_wait: float = 60.0,
        access_token: str | None = None,
        app_info: AppInfo | None = None,
    ) -> None:
        if api_key is None and access_token is None:
            raise ValueError("api_key (svc_…) or access_token (OAuth 2) is required")
        self._api_key = api_key
        self._access_token = access_token
        self._http = Transport(
            origin_of(base_url),
            user_agent=user_agent(
                None if app_info is None else app_info.name,
                None if app_info is None else app_info.version,
            ),
            timeout=timeout,
            max_retries=max_retries,
            max_wait=max_wait,
        )

    def __repr__(self) -> str:
        return f"Client({self._http.origin!r})"

    @property
    def user_agent(self) -> str:
        """The `User-Agent` every request carries."""
        return self._http.user_agent

    # One request each.

    def list_incidents(
        self, page: int | None = None, limit: int | None = None, *, timeout: float | None = None
    ) -> ApiResult[IncidentList]:
        """One page of incidents, newest first. `limit` is at most 200 (larger is served as 200)."""
        query = {"page": page, "limit": limit}
        return self._public(PATHS["listIncidents"], IncidentList.from_dict, query, timeout)

    def get_incident(self, id: str, *, timeout: float | None = None) -> ApiResult[Incident]:
        """One incident; NotFoundError when the account has none with that id."""
        path = PATHS["getIncident"].replace("{id}", urllib.parse.quote(id, safe=""))
        return self._public(path, Incident.from_dict, {}, timeout)

    def list_users(self, *, timeout: float | None = None) -> ApiResult[list[User]]:
        """Every active user, by name."""
        return self._public(PATHS["listUsers"], _list_of(User.from_dict), {}, timeout)

    def list_departments(self, *, timeout: float | None = None) -> ApiResult[list[Department]]:
        """Every active department, by name."""
        return self._public(PATHS["listDepartments"], _list_of(Department.from_dict), {}, timeout)

    def list_locations(self, *, timeout: float | None = None) -> ApiResult[list[Location]]:
        """Every active location, by name."""
        return self._public(PATHS["listLocations"], _list_of(Location.from_dict), {}, timeout)

    def list_changes(
        self, cursor: str | None = None, limit: int | None = None, *, timeout: float | None = None
    ) -> ApiResult[ChangesPage]:
        """One page of the changes feed after `cursor` (None: from the beginning; `"latest"`: no
        changes, the current position). Continue from `next_cursor` while `has_more`."""
        query = {"cursor": cursor, "limit": limit}
        return self._public(PATHS["listChanges"], ChangesPage.from_dict, query, timeout)

    def list_incidents_paged(
        self, start: int | None = None, limit: int | None = None, *, timeout: float | None = None
    ) -> ApiResult[IncidentPage]:
        """The wider API (access token with `incidents:read`): one page from offset `start`."""
        return self._wider("listIncidentsPaged", IncidentPage.from_dict, start, limit, timeout)

    def list_users_paged(
        self, start: int | None = None, limit: int | None = None, *, timeout: float | None = None
    ) -> ApiResult[UserPage]:
        """The wider API (access token with `users:read`): one page from offset `start`."""
        return self._wider("listUsersPaged", UserPage.from_dict, start, limit, timeout)

    def list_departments_paged(
        self, start: int | None = None, limit: int | None = None, *, timeout: float | None = None
    ) -> ApiResult[DepartmentPage]:
        """The wider API (access token with `departments:read`): one page from offset `start`."""
        return self._wider("listDepartmentsPaged", DepartmentPage.from_dict, start, limit, timeout)

    def list_locations_paged(
        self, start: int | None = None, limit: int | None = None, *, timeout: float | None = None
    ) -> ApiResult[LocationPage]:
        """The wider API (access token with `locations:read`): one page from offset `start`."""
        return self._wider("listLocationsPaged", LocationPage.from_dict, start, limit, timeout)

    # Every record.

    def incidents(
        self, limit: int = INCIDENT_PAGE_SIZE, *, timeout: float | None = None
    ) -> Iterator[Incident]:
        """Every incident, page after page (`limit` per request: the largest page, 200, unless
        told, so that a walk costs the fewest requests of the hourly allowance). Pages are
        computed at request time, so for a consistent copy use an export or `sync()`; an incident
        pushed onto the next page by a new one is not yielded twice."""
        previous: set[str] = set()
        page = 1
        while True:
            result = self.list_incidents(page, limit, timeout=timeout).data
            for incident in result.data:
                if incident.id not in previous:
                    yield incident
            if page >= result.pagination.pages:
                return
            previous = {incident.id for incident in result.data}
            page += 1

    def users(self, *, timeout: float | None = None) -> Iterator[User]:
        """Every active user (the list is not paged: one request)."""
        yield from self.list_users(timeout=timeout).data

    def departments(self, *, timeout: float | None = None) -> Iterator[Department]:
        """Every active department (one request)."""
        yield from self.list_departments(timeout=timeout).data

    def locations(self, *, timeout: float | None = None) -> Iterator[Location]:
        """Every active location (one request)."""
        yield from self.list_locations(timeout=timeout).data

    def incidents_paged(
        self, limit: int = WIDER_PAGE_SIZE, *, timeout: float | None = None
    ) -> Iterator[Incident]:
        """Every incident through the wider API's `_start`/`_limit` pages (access token)."""
        return _offset_pages(
            lambda start: _page(self.list_incidents_paged(start, limit, timeout=timeout).data)
        )

    def users_paged(
        self, limit: int = WIDER_PAGE_SIZE, *, timeout: float | None = None
    ) -> Iterator[User]:
        """Every active user through the wider API's pages (access token)."""
        return _offset_pages(
            lambda start: _page(self.list_users_paged(start, limit, timeout=timeout).data)
        )

    def departments_paged(
        self, limit: int = WIDER_PAGE_SIZE, *, timeout: float | None = None
    ) -> Iterator[Department]:
        """Every active department through the wider API's pages (access token)."""
        return _offset_pages(
            lambda start: _page(self.list_departments_paged(start, limit, timeout=timeout).data)
        )

    def locations_paged(
        self, limit: int = WIDER_PAGE_SIZE, *, timeout: float | None = None
    ) -> Iterator[Location]:
        """Every active location through the wider API's pages (access token)."""
        return _offset_pages(
            lambda start: _page(self.list_locations_paged(start, limit, timeout=timeout).data)
        )

    def changes(
        self, cursor: str | None = None, limit: int | None = None, *, timeout: float | None = None
    ) -> Iterator[ChangesPage]:
        """The pages of the changes feed from `cursor` until `has_more` is false. Store each
        page's `next_cursor` once its changes are applied; the last one is where to poll from
        next time."""
        while True:
            page = self.list_changes(cursor, limit, timeout=timeout).data
            yield page
            if not page.has_more:
                return
            cursor = page.next_cursor

    # Exports.

    def export_incidents(
        self,
        path: str | os.PathLike[str],
        format: ExportFormat = "ndjson",
        *,
        timeout: float | None = None,
    ) -> ExportResult:
        """Every incident from one snapshot, streamed into the file at `path` (NDJSON, or CSV
        with a header row), in the list's order and field names. The file appears whole or not
        at all: it is written beside `path` and renamed once complete. The result's `cursor`
        (`X-Changes-Cursor`) continues with `changes()` or `sync()`."""
        return self._export_to("Incidents", path, format, timeout)

    def export_users(
        self,
        path: str | os.PathLike[str],
        format: ExportFormat = "ndjson",
        *,
        timeout: float | None = None,
    ) -> ExportResult:
        """Every active user from one snapshot into a file; see `export_incidents`."""
        return self._export_to("Users", path, format, timeout)

    def export_departments(
        self,
        path: str | os.PathLike[str],
        format: ExportFormat = "ndjson",
        *,
        timeout: float | None = None,
    ) -> ExportResult:
        """Every active department from one snapshot into a file; see `export_incidents`."""
        return self._export_to("Departments", path, format, timeout)

    def export_locations(
        self,
        path: str | os.PathLike[str],
        format: ExportFormat = "ndjson",
        *,
        timeout: float | None = None,
    ) -> ExportResult:
        """Every active location from one snapshot into a file; see `export_incidents`."""
        return self._export_to("Locations", path, format, timeout)

    # Keeping a copy.

    def sync(
        self,
        cursor: str | None,
        on_record: Callable[[TypedRecord], object],
        on_delete: Callable[[Deletion], object],
        save_cursor: Callable[[str], object],
        *,
        timeout: float | None = None,
    ) -> str:
        """Brings a copy up to date and returns the cursor to resume from. Without a cursor: the
        export of every resource, then the feed from the first export's position (a change made
        during the later exports comes again from the feed, in its latest state). With one: the
        feed from it. `save_cursor` is called after the exports and after every page of the
        feed, so a restart loses nothing. A SafetyApiError with code `CURSOR_EXPIRED` means the
        cursor is older than the feed keeps: empty the copy and sync without a cursor."""
        position = cursor
        if position is None:
            position = self._export_all(on_record, timeout)
            save_cursor(position)
        for page in self.changes(position, FEED_PAGE_SIZE, timeout=timeout):
            for change in page.data:
                if change.object is None:
                    on_delete(Deletion(change.type, change.id))
                else:
                    on_record(TypedRecord(change.type, change.object))
            position = page.next_cursor
            save_cursor(position)
        return position

    # The requests.

    def _key(self) -> str:
        if self._api_key is None:
            raise ValueError("this call is to the public API: create the Client with an api_key")
        return self._api_key

    def _token(self) -> str:
        if self._access_token is None:
            raise ValueError("this call is to the wider API: create the Client with access_token")
        return self._access_token

    def _get(
        self,
        path: str,
        read: Callable[[Any], _T],
        query: Mapping[str, QueryValue],
        credential: str,
        timeout: float | None,
    ) -> ApiResult[_T]:
        body, rate_limit, request_id = self._http.get_json(
            path, query, credential=credential, timeout=self._timeout(timeout)
        )
        return ApiResult(read(body), rate_limit, request_id)

    def _public(
        self,
        path: str,
        read: Callable[[Any], _T],
        query: Mapping[str, QueryValue],
        timeout: float | None,
    ) -> ApiResult[_T]:
        """A public call: its answer is the envelope `{ "error": false, "data": … }`."""
        return self._get(path, lambda body: read(body["data"]), query, self._key(), timeout)

    def _wider(
        self,
        operation: str,
        read: Callable[[Any], _T],
        start: int | None,
        limit: int | None,
        timeout: float | None,
    ) -> ApiResult[_T]:
        """A wider-API call: its answer is the page itself, `{ "response", "pagination" }`."""
        query = {"_start": start, "_limit": limit}
        return self._get(PATHS[operation], read, query, self._token(), timeout)

    def _timeout(self, timeout: float | None) -> float | None:
        return self._http.timeout if timeout is None else timeout

    def _export(self, resource: str, format: ExportFormat, timeout: float | None) -> _Export:
        if format not in ("ndjson", "csv"):
            raise ValueError(f"format must be 'ndjson' or 'csv' (got {format!r})")
        operation = f"export{resource}" + ("Csv" if format == "csv" else "")
        response = self._http.open(
            PATHS[operation],
            None,
            credential=self._key(),
            timeout=self._timeout(timeout),
            gzip=True,
        )
        return _Export(response, self._http.url(PATHS[operation]))

    def _export_to(
        self,
        resource: str,
        path: str | os.PathLike[str],
        format: ExportFormat,
        timeout: float | None,
    ) -> ExportResult:
        target = Path(path)
        partial = target.with_name(f"{target.name}.part")
        size = 0
        try:
            with self._export(resource, format, timeout) as export, partial.open("wb") as file:
                for chunk in export.chunks():
                    file.write(chunk)
                    size += len(chunk)
            os.replace(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return ExportResult(
            target, format, export.cursor, size, export.rate_limit, export.request_id
        )

    def _export_all(self, on_record: Callable[[TypedRecord], object], timeout: float | None) -> str:
        """Every resource's export handed to `on_record`; returns the first snapshot's position."""
        cursor: str | None = None
        kinds: list[tuple[str, RecordType, Callable[[Any], AnyRecord]]] = [
            ("Incidents", "incident", Incident.from_dict),
            ("Users", "user", User.from_dict),
            ("Departments", "department", Department.from_dict),
            ("Locations", "location", Location.from_dict),
        ]
        for resource, kind, read in kinds:
            with self._export(resource, "ndjson", timeout) as export:
                cursor = export.cursor if cursor is None else cursor
                for row in export.rows():
                    on_record(TypedRecord(kind, read(row)))
        assert cursor is not None
        return cursor


def _list_of(read: Callable[[Any], _T]) -> Callable[[Any], list[_T]]:
    return lambda items: [read(item) for item in items]


class _Page(Protocol[_R_co]):
    """A page of the wider API, whatever its records."""

    @property
    def response(self) -> Sequence[_R_co]:
        ...

    @property
    def pagination(self) -> Pagination:
        ...


def _page(page: _Page[_R]) -> tuple[Sequence[_R], Pagination]:
    return page.response, page.pagination
