"""Records as flat rows: what `pandas.DataFrame(rows)` or `csv.DictWriter` take as they are."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any, Union, cast

#: A cell: what a DataFrame column or a CSV cell holds.
Cell = Union[str, int, float, bool, None]


def _as_dict(record: object) -> Mapping[str, Any]:
    # The generated records, and any object with the same method: the JSON object, API names.
    to_dict = getattr(record, "to_dict", None)
    if callable(to_dict):
        value = to_dict()
        if isinstance(value, Mapping):
            return cast("Mapping[str, Any]", value)
    if isinstance(record, Mapping):
        return cast("Mapping[str, Any]", record)
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        # TypedRecord, Deletion: their fields, a nested record among them.
        return {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}
    raise TypeError(f"to_rows takes records, dicts or dataclasses (got {type(record).__name__})")


def _flatten(prefix: str, value: Any, row: dict[str, Cell]) -> None:
    if isinstance(value, Mapping) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        for key, inner in _as_dict(cast(object, value)).items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, row)
    elif isinstance(value, (str, int, float, bool)) or value is None:
        row[prefix] = value
    else:
        # A list, or anything else JSON can hold: one cell of JSON text.
        row[prefix] = json.dumps(value, default=lambda item: _as_dict(item))


def to_rows(records: Iterable[object]) -> list[dict[str, Cell]]:
    """One flat dict per record, every dict with the same keys in the same order (the API's
    field names; a nested object's fields as `object.name`; a value missing from a record is
    None), every value a str, int, float, bool or None. `pandas.DataFrame(to_rows(...))` makes
    one column per field; so does `csv.DictWriter` with the first row's keys.

    Takes the client's records (`client.incidents()`, `result.data`), `sync()`'s TypedRecords and
    Deletions, and dicts (a webhook event)."""
    flat: list[dict[str, Cell]] = []
    columns: dict[str, None] = {}
    for record in records:
        row: dict[str, Cell] = {}
        _flatten("", _as_dict(record), row)
        flat.append(row)
        columns.update(dict.fromkeys(row))
    return [{column: row.get(column) for column in columns} for row in flat]
