"""Arrow schemas and record batches of the output tables, from `columns.Column` trees.

Why Arrow: it is what Parquet (pyarrow), Iceberg (pyiceberg) and DuckDB all take without a copy,
and its schema is typed up front, so an empty output, or one whose first rows lack `failure`,
still carries every column with its type (issue 26: `read_json_auto` typed such columns NULL).
pyarrow is an optional dependency (`pip install 'stream-pairer[warehouse]'`); `require` turns its
absence into one clear line instead of a traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime
from functools import cache, partial
from typing import Any, Final

import orjson

from stream_pairer.adapters.sinks.columns import Column, table_columns
from stream_pairer.errors import OutputRefused

EXTRA_HINT: Final = "pip install 'stream-pairer[warehouse]'"


def require(module: str, what: str) -> Any:
    """Import an optional dependency, or fail with one line naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise OutputRefused(
            f"{what} needs {module.split('.', maxsplit=1)[0]}, which is not installed: {EXTRA_HINT}"
        ) from err


def arrow_type(col: Column, *, json_type: bool = True) -> Any:
    """The Arrow type of a column. `json_type`: JSON text as Arrow's JSON extension type (Parquet's
    JSON logical type, which DuckDB reads as JSON); plain strings where it is unknown (Iceberg)."""
    pa = require("pyarrow", "--output-format parquet")
    if col.type == "struct":
        return pa.struct([arrow_field(f, json_type=json_type) for f in col.fields])
    if col.type == "json":
        return pa.json_(pa.string()) if json_type else pa.string()
    return {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "list<string>": pa.list_(pa.string()),
    }[col.type]


def arrow_field(col: Column, *, json_type: bool = True) -> Any:
    pa = require("pyarrow", "--output-format parquet")
    meta = {"description": col.doc} if col.doc else None
    return pa.field(col.name, arrow_type(col, json_type=json_type), nullable=col.nullable, metadata=meta)


@cache
def arrow_schema(table: str, *, json_type: bool = True) -> Any:
    """The Arrow schema of an output table (`pairs`, `orphans`, `dead_letter`)."""
    pa = require("pyarrow", "--output-format parquet")
    fields = [arrow_field(c, json_type=json_type) for c in table_columns(table)]
    return pa.schema(fields, metadata={"stream_pairer.table": table})


_TIMESTAMP, _JSON, _STRUCT = 1, 2, 3


def _plan(columns: tuple[Column, ...]) -> tuple[tuple[str, int, Any], ...]:
    """The columns whose values need converting, and how: the others pass as they are."""
    how = {"timestamp": _TIMESTAMP, "json": _JSON, "struct": _STRUCT}
    return tuple(
        (c.name, how[c.type], _plan(c.fields) if c.type == "struct" else None)
        for c in columns
        if c.type in how
    )


def _convert(plan: tuple[tuple[str, int, Any], ...], rec: dict[str, Any]) -> dict[str, Any]:
    for name, how, sub in plan:
        v = rec.get(name)
        if v is None:
            continue
        if how == _TIMESTAMP:
            rec[name] = datetime.fromisoformat(v) if type(v) is str else None
        elif how == _JSON:
            rec[name] = orjson.dumps(v).decode()
        else:
            rec[name] = _convert(sub, v) if type(v) is dict else None
    return rec


@cache
def row_converter(table: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """`convert(record)`: a decoded record of `table` as Arrow takes it, converted in place:
    timestamps parsed, JSON values as their text; other fields as they are (a missing one is
    null). Sinks buffer rows, not decoded records: a payload as one string costs a fraction of
    the nested objects it decodes to (the buffered batch is the sinks' memory)."""
    return partial(_convert, _plan(table_columns(table)))


def to_table(table: str, rows: list[dict[str, Any]], *, json_type: bool = True) -> Any:
    """An Arrow table of rows (`row` of each output record) under the table's schema. Built on
    plain strings (pyarrow builds no extension type from Python values), then cast to JSON."""
    pa = require("pyarrow", "--output-format parquet")
    plain = pa.Table.from_pylist(rows, schema=arrow_schema(table, json_type=False))
    return plain.cast(arrow_schema(table)) if json_type else plain


def event_day(rec: dict[str, Any]) -> str:
    """The Hive partition of a record: `dt=YYYY-MM-DD` of its event time (a pair's call, else its
    result; an orphan's event), `dt=unknown` where none is known (dead letters, undated events)."""
    ts = rec.get("call_ts") or rec.get("result_ts") or rec.get("ts")
    if type(ts) is str and len(ts) >= 10 and ts[4] == "-" and ts[7] == "-":
        return f"dt={ts[:10]}"
    return "dt=unknown"
