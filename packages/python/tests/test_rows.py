"""to_rows: flat dicts with the same keys, as pandas.DataFrame and csv.DictWriter take them."""

from __future__ import annotations

import csv
import io
import unittest

from safety_incident_api import (
    Deletion,
    Department,
    Incident,
    IncidentChange,
    TypedRecord,
    to_rows,
)

INCIDENT = Incident(
    id="3f1c2a8e-5b7d-4e9f-a1c3-2d4e6f8a0b1c",
    incident_number="INC-2025-142",
    description="Slip on wet floor, near the loading bay",
    status="under_investigation",
    severity_score=6,
    severity_likelihood=2,
    severity_impact=3,
    location=None,
    incident_date="2025-11-03",
    created_at="2025-11-03T09:41:12.000Z",
    updated_at="2025-11-04T14:05:00.000Z",
)
DEPARTMENT = Department(id="1b6a", name="Operations", created_at="2024-01-08T10:00:00.000Z")


class ToRows(unittest.TestCase):
    def test_records_become_their_json_objects(self) -> None:
        self.assertEqual(to_rows([INCIDENT]), [INCIDENT.to_dict()])
        self.assertEqual(list(to_rows([INCIDENT])[0]), list(Incident.__dataclass_fields__))

    def test_nested_objects_are_flattened_with_dotted_names(self) -> None:
        change = IncidentChange(
            seq=7, type="incident", op="upsert", id=INCIDENT.id, object=INCIDENT, changed_at="t"
        )
        [row] = to_rows([change])
        self.assertEqual(row["object.incident_number"], "INC-2025-142")
        self.assertEqual(row["seq"], 7)
        self.assertNotIn("object", row)

    def test_every_row_has_every_column_missing_ones_none(self) -> None:
        rows = to_rows(
            [
                TypedRecord("incident", INCIDENT),
                TypedRecord("department", DEPARTMENT),
                Deletion("user", "8d2e"),
                {"type": "webhook.test", "data": {"seq": None, "tags": ["a", "b"]}},
            ]
        )
        self.assertEqual(len({tuple(row) for row in rows}), 1, "the same keys, in the same order")
        self.assertEqual(rows[1]["object.name"], "Operations")
        self.assertIsNone(rows[1]["object.incident_number"])
        self.assertEqual((rows[2]["type"], rows[2]["id"]), ("user", "8d2e"))
        # A list is one cell, as JSON text.
        self.assertEqual(rows[3]["data.tags"], '["a", "b"]')
        for row in rows:
            for value in row.values():
                self.assertIsInstance(value, (str, int, float, bool, type(None)))

    def test_csv_dict_writer_takes_them(self) -> None:
        rows = to_rows([INCIDENT, INCIDENT])
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        self.assertEqual(
            list(csv.DictReader(io.StringIO(out.getvalue())))[1]["description"],
            INCIDENT.description,
        )

    def test_no_records_no_rows_and_other_objects_refused(self) -> None:
        self.assertEqual(to_rows([]), [])
        with self.assertRaisesRegex(TypeError, "to_rows"):
            to_rows([42])


if __name__ == "__main__":
    unittest.main()
