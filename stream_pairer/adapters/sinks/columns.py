"""The typed columns of each output table, derived from the JSON Schemas in stream_pairer/schemas/.

Why derived: the JSON Schemas are the one definition of the output records; a second, hand-written
column list (per warehouse) drifts from them, and a schema inferred from the data (DuckDB's
`read_json_auto`, a Parquet copy of it) types a field NULL when its first rows lack it, `JSON[]` in
one file and `VARCHAR[]` in the next, and turns `arguments` into a sparse struct of every key ever
seen (issue 26). So every columnar target (Arrow/Parquet, Iceberg, the DDL under deploy/warehouse/)
is rendered from the `Column` trees built here, and only from them.

Mapping (JSON Schema -> column type), applied to each property in schema order:

* `"format": "date-time"` -> `timestamp` (microseconds, UTC);
* `string`, or an `enum`/`const` of strings (null allowed) -> `string`; `integer` -> `int64`;
  `number` -> `float64`; `boolean` -> `bool`; `array` of strings -> `list<string>`;
* an object (`$ref` to another schema, `allOf` with one, or `oneOf` object shapes such as
  `source`) -> `struct` of the union of the properties;
* no type at all (`arguments`, `content`, `raw` of a side: any JSON value) -> `json`: the value as
  JSON text, so the schema never depends on the data.

Every column is nullable except `kind`: a record may lack an optional field, and a required one
may be null by its schema (`tool`, `ts`...). Pure (reads the package's schema files, no pyarrow).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from stream_pairer.core.vocab import ORPHAN_KINDS, RecordKind

SCHEMA_DIR: Final = Path(__file__).resolve().parents[2] / "schemas"

# Output table -> (its JSON Schema, the record kinds it holds). The names are the JSONL files' stems.
TABLES: Final = {
    "pairs": ("pair.schema.json", (RecordKind.PAIR.value,)),
    "orphans": ("orphan.schema.json", tuple(k.value for k in ORPHAN_KINDS)),
    "dead_letter": ("dead_letter.schema.json", (RecordKind.DEAD_LETTER.value,)),
}
TABLE_OF_KIND: Final = {kind: table for table, (_, kinds) in TABLES.items() for kind in kinds}
SCALARS: Final = ("string", "int64", "float64", "bool", "timestamp", "json")


@dataclass(frozen=True, slots=True)
class Column:
    """One column: `type` is one of SCALARS, `list<string>` or `struct` (then `fields`)."""

    name: str
    type: str
    fields: tuple[Column, ...] = ()
    nullable: bool = True
    doc: str | None = None


@cache
def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text())
    return loaded


def _resolve(spec: dict[str, Any]) -> dict[str, Any]:
    """`$ref`s followed and `allOf` parts merged (properties unioned), so one dict says it all."""
    if "$ref" in spec:
        return _resolve(_load(spec["$ref"]) | {k: v for k, v in spec.items() if k != "$ref"})
    if "allOf" in spec and "properties" not in spec and "type" not in spec:
        merged: dict[str, Any] = {k: v for k, v in spec.items() if k != "allOf"}
        for each in spec["allOf"]:
            part = _resolve(each)
            union = merged.get("properties", {}) | part.get("properties", {})
            merged |= {k: v for k, v in part.items() if k != "properties"}
            if union:
                merged["properties"] = union
        return merged
    if "oneOf" in spec and "properties" not in spec:
        branches = [_resolve(b) for b in spec["oneOf"]]
        if all(b.get("type") == "object" for b in branches):
            props: dict[str, Any] = {}
            for b in branches:
                props |= b.get("properties", {})
            return {"type": "object", "properties": props} | {
                k: v for k, v in spec.items() if k not in ("oneOf", "title", "$schema", "$id")
            }
    return spec


def _types(spec: dict[str, Any]) -> set[str]:
    t = spec.get("type")
    if t is not None:
        return set(t if isinstance(t, list) else [t]) - {"null"}
    values = spec["enum"] if "enum" in spec else [spec["const"]] if "const" in spec else []
    kinds = {type(v) for v in values if v is not None}
    return {"string"} if kinds == {str} else {"boolean"} if kinds == {bool} else set()


def column(name: str, spec: dict[str, Any], *, nullable: bool = True) -> Column:
    """The column of one property (see the module docstring for the mapping)."""
    spec = _resolve(spec)
    doc = spec.get("description")
    types = _types(spec)
    if "properties" in spec or types == {"object"}:
        fields = tuple(column(k, v) for k, v in spec.get("properties", {}).items())
        return Column(name, "struct", fields, nullable, doc)
    if types == {"array"}:
        item = _types(_resolve(spec.get("items", {})))
        if item != {"string"}:
            raise ValueError(f"{name}: only arrays of strings have a column type, not {item}")
        return Column(name, "list<string>", (), nullable, doc)
    if types == {"string"}:
        kind = "timestamp" if spec.get("format") == "date-time" else "string"
        return Column(name, kind, (), nullable, doc)
    simple = {"integer": "int64", "number": "float64", "boolean": "bool"}
    if len(types) == 1 and next(iter(types)) in simple:
        return Column(name, simple[next(iter(types))], (), nullable, doc)
    if not types:
        return Column(name, "json", (), nullable, doc)  # any JSON value: kept as its text
    raise ValueError(f"{name}: no column type for JSON Schema types {sorted(types)}")


@cache
def table_columns(table: str) -> tuple[Column, ...]:
    """The columns of one output table (`pairs`, `orphans`, `dead_letter`), in schema order."""
    schema = _load(TABLES[table][0])
    return tuple(column(k, v, nullable=k != "kind") for k, v in schema["properties"].items())
