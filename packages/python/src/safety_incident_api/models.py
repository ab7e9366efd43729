# Generated from the OpenAPI document the server serves (its `info.version`:
# "1") by packages/python/scripts/generate.ts. Do not edit:
# run `node packages/python/scripts/generate.ts`; test/python/generated.test.ts fails
# when this file is stale.
"""The records of the Safety Incident API as typed dataclasses, from its OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, TypeVar, Union, cast

_T = TypeVar("_T")


class _Model:
    """What every generated class has: `to_dict()`, the JSON object with the API's names."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


def _dump(value: Any) -> Any:
    if isinstance(value, _Model):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(item) for item in cast("list[Any]", value)]
    return value


def _optional(value: Any, read: Callable[[Any], _T]) -> _T | None:
    return None if value is None else read(value)


#: The path of each GET operation of the API, by its `operationId`.
PATHS: Final[dict[str, str]] = {
    "listIncidents": "/api/v1/public/incidents",
    "getIncident": "/api/v1/public/incidents/{id}",
    "listUsers": "/api/v1/public/users",
    "listDepartments": "/api/v1/public/departments",
    "listLocations": "/api/v1/public/locations",
    "exportIncidents": "/api/v1/public/exports/incidents.ndjson",
    "exportIncidentsCsv": "/api/v1/public/exports/incidents.csv",
    "exportUsers": "/api/v1/public/exports/users.ndjson",
    "exportUsersCsv": "/api/v1/public/exports/users.csv",
    "exportDepartments": "/api/v1/public/exports/departments.ndjson",
    "exportDepartmentsCsv": "/api/v1/public/exports/departments.csv",
    "exportLocations": "/api/v1/public/exports/locations.ndjson",
    "exportLocationsCsv": "/api/v1/public/exports/locations.csv",
    "listChanges": "/api/v1/public/changes",
    "listUsersPaged": "/api/v1/users",
    "listDepartmentsPaged": "/api/v1/departments",
    "listLocationsPaged": "/api/v1/locations",
    "listIncidentsPaged": "/api/v1/incidents",
}

#: Every code the API puts in an error's `error` field (the enum of its `CodedError` schema).
ERROR_CODES: Final[tuple[str, ...]] = (
    "INVALID_CURSOR",
    "API_KEY_REQUIRED",
    "API_KEY_INVALID",
    "FEATURE_NOT_AVAILABLE",
    "INSUFFICIENT_SCOPE",
    "CURSOR_EXPIRED",
    "RATE_LIMIT_EXCEEDED",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Incident(_Model):
    """`Incident` of the OpenAPI document's schemas."""

    id: str
    #: Human-readable reference, `INC-<year>-<sequence>`
    incident_number: str
    description: str | None
    #: Workflow status. Values seen in data: open, under_investigation, action_required, resolved,
    #: closed; the contract fixes none, so others may appear.
    status: str
    severity_score: int | None
    severity_likelihood: int | None
    severity_impact: int | None
    location: str | None
    incident_date: str | None
    created_at: str
    updated_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Incident:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            id=data["id"],
            incident_number=data["incident_number"],
            description=data["description"],
            status=data["status"],
            severity_score=data["severity_score"],
            severity_likelihood=data["severity_likelihood"],
            severity_impact=data["severity_impact"],
            location=data["location"],
            incident_date=data["incident_date"],
            created_at=data["created_at"],
            updated_at=data["updated_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "id": self.id,
            "incident_number": self.incident_number,
            "description": _dump(self.description),
            "status": self.status,
            "severity_score": _dump(self.severity_score),
            "severity_likelihood": _dump(self.severity_likelihood),
            "severity_impact": _dump(self.severity_impact),
            "location": _dump(self.location),
            "incident_date": _dump(self.incident_date),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class User(_Model):
    """`User` of the OpenAPI document's schemas."""

    id: str
    name: str
    email: str
    #: Role within the service: super_admin, admin, manager or employee.
    role: str
    department: str | None
    job_title: str | None
    created_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> User:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            id=data["id"],
            name=data["name"],
            email=data["email"],
            role=data["role"],
            department=data["department"],
            job_title=data["job_title"],
            created_at=data["created_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "id": self.id,
            "name": self.name,
            "email": self.email,
            "role": self.role,
            "department": _dump(self.department),
            "job_title": _dump(self.job_title),
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Department(_Model):
    """`Department` of the OpenAPI document's schemas."""

    id: str
    name: str
    created_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Department:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            id=data["id"],
            name=data["name"],
            created_at=data["created_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "id": self.id,
            "name": self.name,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Location(_Model):
    """`Location` of the OpenAPI document's schemas."""

    id: str
    name: str
    created_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Location:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            id=data["id"],
            name=data["name"],
            created_at=data["created_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "id": self.id,
            "name": self.name,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentPagination(_Model):
    """`IncidentPagination` of the OpenAPI document's schemas."""

    #: Current page number
    page: int
    #: Page size in effect
    limit: int
    #: Total incidents in the account
    total: int
    #: Total pages at this limit
    pages: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IncidentPagination:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            page=data["page"],
            limit=data["limit"],
            total=data["total"],
            pages=data["pages"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "page": self.page,
            "limit": self.limit,
            "total": self.total,
            "pages": self.pages,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Pagination(_Model):
    """`Pagination` of the OpenAPI document's schemas."""

    total_records: int
    per_page: int
    total_pages: int
    start: int
    #: 1-based; more pages exist while it is below totalPages
    current_page: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pagination:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            total_records=data["totalRecords"],
            per_page=data["perPage"],
            total_pages=data["totalPages"],
            start=data["start"],
            current_page=data["currentPage"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "totalRecords": self.total_records,
            "perPage": self.per_page,
            "totalPages": self.total_pages,
            "start": self.start,
            "currentPage": self.current_page,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangesPage(_Model):
    """`ChangesPage` of the OpenAPI document's schemas."""

    #: Oldest change first, each record at most once
    data: list[Change]
    #: Opaque: send it as `cursor` to continue after this page
    next_cursor: str
    #: Whether changes exist after `next_cursor` now; false: poll again later with it
    has_more: bool

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangesPage:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            data=[change_from_dict(item) for item in data["data"]],
            next_cursor=data["next_cursor"],
            has_more=data["has_more"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "data": _dump(self.data),
            "next_cursor": self.next_cursor,
            "has_more": self.has_more,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentChange(_Model):
    """`IncidentChange` of the OpenAPI document's schemas."""

    #: The change's place in the account's feed, ascending
    seq: int
    type: Literal["incident"]
    #: `upsert`: the record as it now is; `delete`: it left the public view (deleted, inactive,
    #: vendor support) and `object` is null
    op: Literal["upsert", "delete"]
    id: str
    #: As the list endpoint shows it; null for a delete
    object: Incident | None
    #: When the change was written
    changed_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IncidentChange:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            seq=data["seq"],
            type=data["type"],
            op=data["op"],
            id=data["id"],
            object=_optional(data["object"], Incident.from_dict),
            changed_at=data["changed_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "seq": self.seq,
            "type": self.type,
            "op": self.op,
            "id": self.id,
            "object": _dump(self.object),
            "changed_at": self.changed_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class UserChange(_Model):
    """`UserChange` of the OpenAPI document's schemas."""

    #: The change's place in the account's feed, ascending
    seq: int
    type: Literal["user"]
    #: `upsert`: the record as it now is; `delete`: it left the public view (deleted, inactive,
    #: vendor support) and `object` is null
    op: Literal["upsert", "delete"]
    id: str
    #: As the list endpoint shows it; null for a delete
    object: User | None
    #: When the change was written
    changed_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UserChange:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            seq=data["seq"],
            type=data["type"],
            op=data["op"],
            id=data["id"],
            object=_optional(data["object"], User.from_dict),
            changed_at=data["changed_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "seq": self.seq,
            "type": self.type,
            "op": self.op,
            "id": self.id,
            "object": _dump(self.object),
            "changed_at": self.changed_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DepartmentChange(_Model):
    """`DepartmentChange` of the OpenAPI document's schemas."""

    #: The change's place in the account's feed, ascending
    seq: int
    type: Literal["department"]
    #: `upsert`: the record as it now is; `delete`: it left the public view (deleted, inactive,
    #: vendor support) and `object` is null
    op: Literal["upsert", "delete"]
    id: str
    #: As the list endpoint shows it; null for a delete
    object: Department | None
    #: When the change was written
    changed_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DepartmentChange:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            seq=data["seq"],
            type=data["type"],
            op=data["op"],
            id=data["id"],
            object=_optional(data["object"], Department.from_dict),
            changed_at=data["changed_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "seq": self.seq,
            "type": self.type,
            "op": self.op,
            "id": self.id,
            "object": _dump(self.object),
            "changed_at": self.changed_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class LocationChange(_Model):
    """`LocationChange` of the OpenAPI document's schemas."""

    #: The change's place in the account's feed, ascending
    seq: int
    type: Literal["location"]
    #: `upsert`: the record as it now is; `delete`: it left the public view (deleted, inactive,
    #: vendor support) and `object` is null
    op: Literal["upsert", "delete"]
    id: str
    #: As the list endpoint shows it; null for a delete
    object: Location | None
    #: When the change was written
    changed_at: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocationChange:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            seq=data["seq"],
            type=data["type"],
            op=data["op"],
            id=data["id"],
            object=_optional(data["object"], Location.from_dict),
            changed_at=data["changed_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "seq": self.seq,
            "type": self.type,
            "op": self.op,
            "id": self.id,
            "object": _dump(self.object),
            "changed_at": self.changed_at,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentList(_Model):
    """The result of `listIncidents` (GET /api/v1/public/incidents)."""

    data: list[Incident]
    pagination: IncidentPagination

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IncidentList:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            data=[Incident.from_dict(item) for item in data["data"]],
            pagination=IncidentPagination.from_dict(data["pagination"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "data": _dump(self.data),
            "pagination": _dump(self.pagination),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentPage(_Model):
    """The result of `listIncidentsPaged` (GET /api/v1/incidents)."""

    response: list[Incident]
    pagination: Pagination

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IncidentPage:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            response=[Incident.from_dict(item) for item in data["response"]],
            pagination=Pagination.from_dict(data["pagination"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "response": _dump(self.response),
            "pagination": _dump(self.pagination),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class UserPage(_Model):
    """The result of `listUsersPaged` (GET /api/v1/users)."""

    response: list[User]
    pagination: Pagination

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UserPage:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            response=[User.from_dict(item) for item in data["response"]],
            pagination=Pagination.from_dict(data["pagination"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "response": _dump(self.response),
            "pagination": _dump(self.pagination),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DepartmentPage(_Model):
    """The result of `listDepartmentsPaged` (GET /api/v1/departments)."""

    response: list[Department]
    pagination: Pagination

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DepartmentPage:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            response=[Department.from_dict(item) for item in data["response"]],
            pagination=Pagination.from_dict(data["pagination"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "response": _dump(self.response),
            "pagination": _dump(self.pagination),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class LocationPage(_Model):
    """The result of `listLocationsPaged` (GET /api/v1/locations)."""

    response: list[Location]
    pagination: Pagination

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocationPage:
        """From its JSON object; properties this version does not know are ignored."""
        return cls(
            response=[Location.from_dict(item) for item in data["response"]],
            pagination=Pagination.from_dict(data["pagination"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, with the API's property names."""
        return {
            "response": _dump(self.response),
            "pagination": _dump(self.pagination),
        }


Change: TypeAlias = Union[IncidentChange, UserChange, DepartmentChange, LocationChange]
ChangeType: TypeAlias = Literal["incident", "user", "department", "location"]


def change_from_dict(data: Mapping[str, Any]) -> Change:
    """A `Change`, of the class its `type` names."""
    kind = data["type"]
    if kind == "incident":
        return IncidentChange.from_dict(data)
    if kind == "user":
        return UserChange.from_dict(data)
    if kind == "department":
        return DepartmentChange.from_dict(data)
    if kind == "location":
        return LocationChange.from_dict(data)
    raise ValueError(
        f"unknown Change type {kind!r}: "
        "this version of the client knows incident, user, department, location"
    )
