"""The client against the real server that test/python/client.test.ts starts and seeds."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest
import uuid
from pathlib import Path
from typing import Any

import safety_incident_api
from safety_incident_api import (
    ApiResult,
    AuthenticationError,
    Client,
    CursorFile,
    Deletion,
    Incident,
    NotFoundError,
    PermissionError,
    RateLimitError,
    SafetyApiError,
    TypedRecord,
    User,
    sign_webhook,
    to_rows,
    verify_webhook,
)

from .support import API_KEY, SERVER_URL, control, fixture, recorded_waits, requires_server


def client(api_key: str | None = None, **options: Any) -> Client:
    """A client of the server with `api_key`, by default the seeded account's."""
    assert SERVER_URL is not None
    return Client(SERVER_URL, api_key if api_key is not None else API_KEY, **options)


@requires_server
class InstalledCopy(unittest.TestCase):
    def test_the_suite_runs_against_the_copy_pip_installed(self) -> None:
        installed = os.environ.get("SAFETY_TEST_INSTALLED_AT")
        if installed is None:
            return  # Run by hand against the sources: nothing to check.
        self.assertTrue(
            Path(safety_incident_api.__file__).resolve().is_relative_to(Path(installed).resolve()),
            safety_incident_api.__file__,
        )


@requires_server
class Readme(unittest.TestCase):
    def test_the_quick_start_runs_as_it_is(self) -> None:
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
        quick_start = (
            readme.split("## Quick start", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
        )
        ran = subprocess.run(
            [sys.executable, "-c", quick_start], capture_output=True, text=True, timeout=60
        )
        self.assertEqual(ran.returncode, 0, ran.stderr)
        lines = ran.stdout.splitlines()
        self.assertRegex(lines[0], rf"^{fixture()['incident_count']} incidents, \d+ requests left")
        self.assertEqual(
            lines[1 : 1 + fixture()["incident_count"]],
            [f"{number} open" for number in fixture()["incident_numbers"]],
        )
        self.assertEqual(lines[-1], "404 Incident not found")


@requires_server
class Paging(unittest.TestCase):
    def test_incidents_walks_every_page_at_the_largest_page_size(self) -> None:
        expected = fixture()["incident_numbers"]
        with recorded_waits() as waits:
            walked = list(client().incidents())
        self.assertEqual([incident.incident_number for incident in walked], expected)
        self.assertEqual({type(incident) for incident in walked}, {Incident})
        self.assertEqual(waits, [], "no retry was needed")
        self.assertEqual(walked[0].severity_score, 6)

    def test_incidents_at_a_small_page_size(self) -> None:
        walked = [incident.incident_number for incident in client().incidents(limit=60)]
        self.assertEqual(walked, fixture()["incident_numbers"])

    def test_one_page_with_its_pagination_rate_limit_and_request_id(self) -> None:
        result = client().list_incidents(page=2, limit=7)
        self.assertIsInstance(result, ApiResult)
        self.assertEqual(result.data.pagination.page, 2)
        self.assertEqual(result.data.pagination.limit, 7)
        self.assertEqual(result.data.pagination.total, fixture()["incident_count"])
        self.assertEqual(
            [row.incident_number for row in result.data.data], fixture()["incident_numbers"][7:14]
        )
        self.assertIsNotNone(result.rate_limit)
        assert result.rate_limit is not None
        self.assertEqual(result.rate_limit.limit, 10_000)
        self.assertLess(result.rate_limit.remaining, 10_000)
        self.assertIsNotNone(result.rate_limit.reset)
        self.assertTrue(result.request_id)

    def test_one_incident(self) -> None:
        first = next(client().incidents(limit=1))
        self.assertEqual(client().get_incident(first.id).data, first)

    def test_users_departments_and_locations(self) -> None:
        self.assertEqual([user.name for user in client().users()], fixture()["users"])
        self.assertEqual({type(user) for user in client().users()}, {User})
        self.assertEqual([row.name for row in client().departments()], fixture()["departments"])
        self.assertEqual([row.name for row in client().locations()], fixture()["locations"])

    def test_the_wider_api_pages_by_start_and_limit(self) -> None:
        assert SERVER_URL is not None
        wider = Client(SERVER_URL, None, access_token=fixture()["access_token"])
        self.assertEqual(
            [row.incident_number for row in wider.incidents_paged(limit=100)],
            fixture()["incident_numbers"],
        )
        self.assertEqual(
            [row.incident_number for row in wider.incidents_paged(limit=45)],
            fixture()["incident_numbers"],
        )
        self.assertEqual([row.name for row in wider.users_paged(limit=2)], fixture()["users"])
        self.assertEqual([row.name for row in wider.departments_paged()], fixture()["departments"])
        self.assertEqual([row.name for row in wider.locations_paged(1)], fixture()["locations"])
        page = wider.list_users_paged(start=1, limit=1).data
        self.assertEqual([row.name for row in page.response], fixture()["users"][1:2])
        self.assertEqual(
            (page.pagination.total_records, page.pagination.per_page, page.pagination.total_pages),
            (3, 1, 3),
        )
        self.assertEqual((page.pagination.start, page.pagination.current_page), (1, 2))
        with self.assertRaisesRegex(ValueError, "api_key"):
            wider.list_users()

    def test_the_changes_feed_in_pages(self) -> None:
        pages = list(client().changes(limit=200))
        self.assertGreaterEqual(len(pages), 3)
        self.assertFalse(pages[-1].has_more)
        self.assertTrue(all(page.has_more for page in pages[:-1]))
        head = client().list_changes("latest").data
        self.assertEqual((head.data, head.has_more), ([], False))


@requires_server
class Errors(unittest.TestCase):
    def test_401_for_a_missing_or_unknown_key(self) -> None:
        with self.assertRaises(AuthenticationError) as unknown:
            list(client("svc_" + "0" * 40).users())
        self.assertEqual(
            (unknown.exception.status, unknown.exception.code), (401, "API_KEY_INVALID")
        )
        self.assertIsInstance(unknown.exception, SafetyApiError)
        with self.assertRaises(AuthenticationError) as malformed:
            client("not-a-key").list_incidents()
        self.assertEqual(malformed.exception.code, "API_KEY_REQUIRED")
        self.assertTrue(malformed.exception.message)

    def test_404_for_an_incident_the_account_has_not(self) -> None:
        with self.assertRaises(NotFoundError) as missing:
            client().get_incident(str(uuid.uuid4()))
        self.assertEqual(missing.exception.status, 404)
        self.assertIsNone(missing.exception.code)
        self.assertEqual(missing.exception.message, "Incident not found")
        self.assertIsNotNone(missing.exception.request_id)
        # Not a UUID, and characters a path must escape: the same 404.
        with self.assertRaises(NotFoundError):
            client().get_incident("../users?x=1")

    def test_403_when_the_plan_has_no_api_access(self) -> None:
        with self.assertRaises(PermissionError) as refused:
            client(fixture()["no_access_api_key"]).list_users()
        self.assertEqual(
            (refused.exception.status, refused.exception.code), (403, "FEATURE_NOT_AVAILABLE")
        )

    def test_429_past_the_budget_is_reported_at_once_with_retry_after(self) -> None:
        limited = client(fixture()["limited_api_key"])
        limited.list_users()
        with recorded_waits() as waits, self.assertRaises(RateLimitError) as limit:
            limited.list_users()
        # The window ends in about an hour: far past the 60 s budget, so nothing was waited for.
        self.assertEqual(waits, [])
        self.assertEqual(
            (limit.exception.status, limit.exception.code), (429, "RATE_LIMIT_EXCEEDED")
        )
        assert limit.exception.retry_after is not None
        self.assertGreater(limit.exception.retry_after, 60)
        assert limit.exception.rate_limit is not None
        self.assertEqual(limit.exception.rate_limit.remaining, 0)

    def test_a_garbled_cursor_is_a_400_with_its_code(self) -> None:
        with self.assertRaises(SafetyApiError) as garbled:
            client().list_changes("not-a-cursor")
        self.assertEqual(
            (garbled.exception.status, garbled.exception.code), (400, "INVALID_CURSOR")
        )
        self.assertIs(type(garbled.exception), SafetyApiError)


@requires_server
class Exports(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="safety-export-"))

    def tearDown(self) -> None:
        for path in self.dir.iterdir():
            path.unlink()
        self.dir.rmdir()

    def test_incidents_to_an_ndjson_file(self) -> None:
        path = self.dir / "incidents.ndjson"
        result = client().export_incidents(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        self.assertEqual(
            [json.loads(line)["incident_number"] for line in lines], fixture()["incident_numbers"]
        )
        self.assertEqual(
            (result.path, result.format, result.size), (path, "ndjson", path.stat().st_size)
        )
        self.assertTrue(result.cursor)
        # The cursor continues the feed: nothing changed since the export.
        after = client().list_changes(result.cursor).data
        self.assertEqual((after.data, after.has_more), ([], False))
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["incidents.ndjson"])

    def test_incidents_to_a_csv_file(self) -> None:
        path = self.dir / "incidents.csv"
        client().export_incidents(str(path), format="csv")
        with path.open(newline="", encoding="utf-8") as file:
            rows = list(csv.DictReader(file))
        self.assertEqual([row["incident_number"] for row in rows], fixture()["incident_numbers"])
        self.assertEqual(list(rows[0]), [field for field in Incident.__dataclass_fields__])

    def test_users_departments_and_locations_to_files(self) -> None:
        client().export_users(self.dir / "users.csv", "csv")
        client().export_departments(self.dir / "departments.ndjson")
        client().export_locations(self.dir / "locations.ndjson")
        users = (self.dir / "users.csv").read_text(encoding="utf-8").splitlines()
        self.assertEqual(len(users), 1 + len(fixture()["users"]))
        departments = (self.dir / "departments.ndjson").read_text(encoding="utf-8").splitlines()
        self.assertEqual(
            [json.loads(line)["name"] for line in departments], fixture()["departments"]
        )

    def test_a_refused_export_leaves_no_file(self) -> None:
        path = self.dir / "incidents.ndjson"
        with self.assertRaises(AuthenticationError):
            client("svc_" + "0" * 40).export_incidents(path)
        self.assertEqual(list(self.dir.iterdir()), [])
        with self.assertRaisesRegex(ValueError, "format"):
            client().export_incidents(path, format="xlsx")  # type: ignore[arg-type]


@requires_server
class Sync(unittest.TestCase):
    def test_a_full_sync_then_the_changes_from_the_saved_cursor(self) -> None:
        sync_client = client(fixture()["sync_api_key"])
        expected: dict[str, list[str]] = fixture()["sync_records"]
        copy: dict[tuple[str, str], Any] = {}
        deleted: list[tuple[str, str]] = []
        saved: list[str] = []

        def on_record(record: TypedRecord) -> None:
            copy[(record.type, record.object.id)] = record.object

        def on_delete(deletion: Deletion) -> None:
            deleted.append((deletion.type, deletion.id))
            copy.pop((deletion.type, deletion.id), None)

        with tempfile.TemporaryDirectory() as directory:
            cursor_file = CursorFile(Path(directory) / "cursor")
            self.assertIsNone(cursor_file.load())

            def save_cursor(cursor: str) -> None:
                saved.append(cursor)
                cursor_file.save(cursor)

            # First run: no cursor, so every export, then the feed from the first export.
            first = sync_client.sync(cursor_file.load(), on_record, on_delete, save_cursor)
            self.assertEqual(
                sorted(copy), sorted((kind, id) for kind, ids in expected.items() for id in ids)
            )
            self.assertEqual(deleted, [])
            self.assertEqual(cursor_file.load(), first)
            self.assertGreaterEqual(len(saved), 2, "saved after the exports and after the feed")

            change = control("POST", "/sync/change")

            # Second run: from the saved cursor, only what changed since.
            copy_before = dict(copy)
            records: list[TypedRecord] = []
            second = sync_client.sync(
                cursor_file.load(),
                lambda record: (records.append(record), on_record(record)),
                on_delete,
                save_cursor,
            )
            self.assertNotEqual(second, first)
            self.assertEqual(cursor_file.load(), second)
            self.assertEqual(
                sorted((record.type, record.object.id) for record in records),
                sorted(
                    [("incident", change["updated"]["id"]), ("incident", change["created"]["id"])]
                ),
            )
            self.assertEqual(
                sorted(deleted), sorted((row["type"], row["id"]) for row in change["deleted"])
            )
            updated = copy[("incident", change["updated"]["id"])]
            self.assertIsInstance(updated, Incident)
            self.assertEqual(updated.status, "closed")
            self.assertEqual(
                copy[("incident", change["created"]["id"])].incident_number,
                change["created"]["incident_number"],
            )
            self.assertEqual(len(copy), len(copy_before) + 1 - len(change["deleted"]))

            # Third run: nothing new, so nothing handed over. Its cursor is issued anew (a
            # cursor carries when it was issued, so its text differs from one second to the
            # next) and stands where the second did: from either, the next change comes alone.
            nothing: list[object] = []
            third = sync_client.sync(
                cursor_file.load(), nothing.append, nothing.append, save_cursor
            )
            self.assertEqual(nothing, [])
            self.assertEqual(cursor_file.load(), third)
            touched = control("POST", "/sync/touch")
            for cursor in (second, third):
                handed: list[tuple[str, str]] = []
                sync_client.sync(
                    cursor,
                    lambda record: handed.append((record.type, record.object.id)),
                    nothing.append,
                    lambda _cursor: None,
                )
                self.assertEqual(handed, [(touched["type"], touched["id"])])
            self.assertEqual(nothing, [])


@requires_server
class Rows(unittest.TestCase):
    def test_to_rows_of_every_incident(self) -> None:
        rows = to_rows(client().incidents())
        self.assertEqual(len(rows), fixture()["incident_count"])
        columns = list(Incident.__dataclass_fields__)
        self.assertTrue(all(list(row) == columns for row in rows))
        for row in rows:
            for value in row.values():
                self.assertIsInstance(value, (str, int, float, bool, type(None)))
        self.assertEqual(rows[0]["incident_number"], fixture()["incident_numbers"][0])
        self.assertEqual(rows[0]["severity_score"], 6)
        self.assertIsNone(rows[0]["incident_date"])


@requires_server
class Webhooks(unittest.TestCase):
    def test_a_delivery_signed_by_the_server_verifies(self) -> None:
        delivered = fixture()["server_webhook"]
        event = verify_webhook(delivered["body"], delivered["headers"], delivered["secret"])
        self.assertEqual(event["type"], "incident.created")
        self.assertEqual(event["data"]["object"]["description"], "Forklift near-miss, dock 3")
        self.assertEqual(event, json.loads(delivered["body"]))
        # Bytes, as a WSGI app reads the body, and headers in any case.
        headers = {name.title(): value for name, value in delivered["headers"].items()}
        self.assertEqual(
            verify_webhook(delivered["body"].encode(), headers, delivered["secret"]), event
        )

    def test_a_webhook_signed_here_verifies_with_standardwebhooks(self) -> None:
        secret = fixture()["server_webhook"]["secret"]
        body = json.dumps(
            {
                "type": "webhook.test",
                "timestamp": "2026-11-25T09:41:12.000Z",
                "data": {
                    "id": str(uuid.uuid4()),
                    "object": None,
                    "seq": None,
                    "changed_at": "2026-11-25T09:41:12.000Z",
                    "cursor": "x",
                },
            }
        )
        headers = sign_webhook(body, secret)
        answer = control(
            "POST", "/webhooks/verify", {"body": body, "headers": headers, "secret": secret}
        )
        self.assertEqual(answer.get("event"), json.loads(body), answer)
        tampered = control(
            "POST",
            "/webhooks/verify",
            {
                "body": body.replace("webhook.test", "incident.deleted"),
                "headers": headers,
                "secret": secret,
            },
        )
        self.assertEqual(tampered.get("status"), 400, tampered)


if __name__ == "__main__":
    unittest.main()
