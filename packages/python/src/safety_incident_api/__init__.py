"""The Python client of the Safety Incident API: standard library only, Python 3.10 or later.

    from safety_incident_api import Client

    client = Client("https://safety.example.com", "svc_…")
    for incident in client.incidents():
        print(incident.incident_number, incident.status)
"""

from ._version import __version__
from .client import AppInfo, Client, CursorFile
from .errors import (
    AuthenticationError,
    NotFoundError,
    PermissionError,
    RateLimitError,
    SafetyApiError,
    ServiceUnavailableError,
)
from .models import (
    ERROR_CODES,
    Change,
    ChangesPage,
    ChangeType,
    Department,
    DepartmentChange,
    DepartmentPage,
    Incident,
    IncidentChange,
    IncidentList,
    IncidentPage,
    IncidentPagination,
    Location,
    LocationChange,
    LocationPage,
    Pagination,
    User,
    UserChange,
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
from .rows import Cell, to_rows
from .webhooks import WebhookVerificationError, sign_webhook, verify_webhook

__all__ = [
    "ERROR_CODES",
    "AnyRecord",
    "ApiResult",
    "AppInfo",
    "AuthenticationError",
    "Cell",
    "Change",
    "ChangeType",
    "ChangesPage",
    "Client",
    "CursorFile",
    "Deletion",
    "Department",
    "DepartmentChange",
    "DepartmentPage",
    "ExportFormat",
    "ExportResult",
    "Incident",
    "IncidentChange",
    "IncidentList",
    "IncidentPage",
    "IncidentPagination",
    "Location",
    "LocationChange",
    "LocationPage",
    "NotFoundError",
    "Pagination",
    "PermissionError",
    "RateLimit",
    "RateLimitError",
    "RecordType",
    "SafetyApiError",
    "ServiceUnavailableError",
    "TypedRecord",
    "User",
    "UserChange",
    "UserPage",
    "WebhookVerificationError",
    "__version__",
    "sign_webhook",
    "to_rows",
    "verify_webhook",
]
