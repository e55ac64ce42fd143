"""`--output-format iceberg`: append a run's records to Iceberg tables, one snapshot per kind.

`--out CATALOG/NAMESPACE` names a catalog that pyiceberg is configured for (`~/.pyiceberg.yaml`,
or `PYICEBERG_CATALOG__<NAME>__URI` / `__WAREHOUSE`... environment variables: REST, Glue, Hive,
SQL (SQLite, Postgres) and the others pyiceberg supports) and the namespace of the tables
`pairs`, `orphans` and `dead_letter`. A missing namespace or table is created with the schema
generated from the JSON Schemas (`ddl.iceberg_schema`, the same as deploy/warehouse/iceberg/),
unpartitioned (pyiceberg writes a day transform only with its optional Rust core; partition an
existing table as you like, it is appended to as it is).

Why one snapshot per kind, at the end: a run is one unit for the warehouse (a half-appended run
would be read as complete), and its snapshot carries the run's **fingerprint** in its summary
properties (`stream-pairer.run`): a hash of every output record in output order, so the same
input and options always give the same fingerprint (pair_ids are deterministic, names do not
depend on how paths were typed). A table whose history already holds a snapshot with that
fingerprint gets nothing: re-running a day adds nothing, and a run that failed after committing
some kinds completes the others when repeated. The records of a run are held as Arrow batches
until the commit (about the size of the JSONL outputs); for runs too large for memory, write
Parquet and register the files with the catalog's own tools.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from stream_pairer.adapters.sinks import Closing, encoded
from stream_pairer.adapters.sinks.arrow import require, row_converter, to_table
from stream_pairer.adapters.sinks.columns import TABLE_OF_KIND, TABLES
from stream_pairer.adapters.sinks.ddl import iceberg_schema
from stream_pairer.errors import InputError, OutputRefused

FINGERPRINT: Final = "stream-pairer.run"
BATCH_ROWS: Final = 8192


def parse_target(out: Path) -> tuple[str, str]:
    """(catalog, namespace) of `--out CATALOG/NAMESPACE`."""
    parts = str(out).strip("/").split("/")
    if len(parts) != 2 or not all(parts):
        raise OutputRefused(f"--output-format iceberg: --out must be CATALOG/NAMESPACE, not {out}")
    return parts[0], parts[1]


class IcebergSink(Closing):
    def __init__(self, out: Path) -> None:
        self.catalog_name, self.namespace = parse_target(out)
        self._catalog_mod = require("pyiceberg.catalog", "--output-format iceberg")
        require("pyarrow", "--output-format iceberg")
        self._rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
        self._batches: dict[str, list[Any]] = {t: [] for t in TABLES}
        self._hash = hashlib.blake2b(digest_size=16)
        self.bytes_by_kind: dict[str, int] = dict.fromkeys(TABLE_OF_KIND, 0)
        self.appended: dict[str, int] = {}  # rows appended per table (0: already there, or none)

    def write(self, records: Sequence[bytes]) -> None:
        h = self._hash
        for kind, rec in encoded(records):
            h.update(rec)
            h.update(b"\n")
            self.bytes_by_kind[kind] += len(rec)
            table = TABLE_OF_KIND[kind]
            rows = self._rows[table]
            rows.append(row_converter(table)(orjson.loads(rec)))
            if len(rows) >= BATCH_ROWS:
                self._batches[table].append(to_table(table, rows, json_type=False))
                rows.clear()

    @property
    def fingerprint(self) -> str:
        return self._hash.hexdigest()

    def _table(self, catalog: Any, name: str) -> Any:
        from pyiceberg.schema import Schema  # noqa: PLC0415 - optional dependency

        ident = (self.namespace, name)
        if catalog.table_exists(ident):
            return catalog.load_table(ident)
        return catalog.create_table(ident, schema=Schema.model_validate(iceberg_schema(name)))

    def close(self) -> None:
        """Append each kind's records as one snapshot, unless this run's fingerprint is there."""
        pa = require("pyarrow", "--output-format iceberg")
        fp = self.fingerprint
        try:
            catalog = self._catalog_mod.load_catalog(self.catalog_name)
            catalog.create_namespace_if_not_exists(self.namespace)
            for name in TABLES:
                table = self._table(catalog, name)
                if any(s.summary is not None and s.summary.get(FINGERPRINT) == fp for s in table.snapshots()):
                    self.appended[name] = 0
                    continue
                batches = [*self._batches[name], to_table(name, self._rows[name], json_type=False)]
                data = pa.concat_tables(batches)
                self.appended[name] = data.num_rows
                if data.num_rows:
                    table.append(data, snapshot_properties={FINGERPRINT: fp})
        except InputError:
            raise
        except Exception as err:  # the catalog's own errors: one line, exit 1
            raise InputError(f"iceberg catalog {self.catalog_name}: {type(err).__name__}: {err}") from err

    def abort(self) -> None:
        """A failed run appends nothing."""
        self._rows.clear()
        self._batches.clear()
