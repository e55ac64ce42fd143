"""`--output-format parquet`: pairs, orphans and dead letters as typed Parquet tables (zstd).

Layout under `--out`: `pairs.parquet`, `orphans.parquet`, `dead_letter.parquet`; with
`--partition-by-day`, Hive-style directories `pairs/dt=YYYY-MM-DD/part-0.parquet` (`dt=unknown`
where no event time is known; see `arrow.event_day`). Each table has the schema generated from
the JSON Schemas (`columns.py`, `arrow.py`), whatever the data: an empty output is a file with
every column and no row (partitioned: one empty `dt=unknown` file, so a glob still matches).

Written like the JSONL outputs: into a temporary directory inside `--out`, renamed over the
previous outputs only when the run completed (a failed run leaves them untouched). Rows are
buffered `BATCH_ROWS` at a time per file, so memory is a batch per open partition, not the run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from stream_pairer.adapters.outputs import check_output_dir
from stream_pairer.adapters.sinks import Closing, encoded
from stream_pairer.adapters.sinks.arrow import arrow_schema, event_day, require, row_converter, to_table
from stream_pairer.adapters.sinks.columns import TABLE_OF_KIND, TABLES
from stream_pairer.adapters.sinks.stale import clear_partitions, note_kept, remove_stale
from stream_pairer.errors import InputError

# Rows buffered per file before they become a row group: the sink's memory is about this many
# rows per open file (bench traffic, 52k records: 4096 -> 200 MB peak RSS, 8192 -> 273 MB; the
# file is 0.7 % larger than with 8192, 2048 saves little more and costs 3 %).
BATCH_ROWS: Final = 4096
COMPRESSION: Final = "zstd"
# pyarrow's zstd default is level 1; level 3 (zstd's own default, DuckDB's) is 26 % smaller on the
# bench traffic's pairs for little CPU (bench/output_size.py); larger row groups gained < 1 %.
COMPRESSION_LEVEL: Final = 3


class ParquetSink(Closing):
    def __init__(self, out_dir: Path, inputs: Sequence[str] = (), *, partition: bool = False) -> None:
        self.pq = require("pyarrow.parquet", "--output-format parquet")
        check_output_dir(out_dir, inputs)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            self.temp = Path(tempfile.mkdtemp(prefix=".parquet.", suffix=".tmp", dir=out_dir))
        except OSError as err:
            raise InputError(f"cannot write in {out_dir}: {err.strerror or err}") from err
        self.out_dir = out_dir
        self.partition = partition
        self.schemas = {t: arrow_schema(t) for t in TABLES}
        self.convert = {t: row_converter(t) for t in TABLES}
        self._rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._writers: dict[tuple[str, str], Any] = {}
        self.bytes_by_kind: dict[str, int] = dict.fromkeys(TABLE_OF_KIND, 0)

    def _path(self, table: str, part: str) -> Path:
        if not self.partition:
            return self.temp / f"{table}.parquet"
        d = self.temp / table / part
        d.mkdir(parents=True, exist_ok=True)
        return d / "part-0.parquet"

    def write(self, records: Sequence[bytes]) -> None:
        sizes = self.bytes_by_kind
        for kind, rec in encoded(records):
            sizes[kind] += len(rec)
            d = orjson.loads(rec)
            table = TABLE_OF_KIND[kind]
            key = (table, event_day(d) if self.partition else "")
            rows = self._rows.setdefault(key, [])
            rows.append(self.convert[table](d))
            if len(rows) >= BATCH_ROWS:
                self._flush(key)

    def _flush(self, key: tuple[str, str]) -> None:
        rows = self._rows.pop(key, [])
        table, part = key
        writer = self._writers.get(key)
        if writer is None:
            writer = self._writers[key] = self.pq.ParquetWriter(
                self._path(table, part),
                self.schemas[table],
                compression=COMPRESSION,
                compression_level=COMPRESSION_LEVEL,
            )
        if rows:
            writer.write_table(to_table(table, rows))

    def close(self) -> None:
        """Write what is buffered, give every table a file (empty ones keep their schema), then
        replace the previous outputs of this format with the new ones."""
        try:
            for key in list(self._rows):
                self._flush(key)
            for table in TABLES:
                if not any(t == table for t, _ in self._writers):
                    self._flush((table, "dt=unknown" if self.partition else ""))
            for w in self._writers.values():
                w.close()
            self._writers.clear()
            for path in self.temp.rglob("*"):  # payloads are private data, as in the JSONL files
                path.chmod(0o700 if path.is_dir() else 0o600)
            kept = []
            for table in TABLES:
                name = table if self.partition else f"{table}.parquet"
                final = self.out_dir / name
                if final.is_symlink() or final.is_file():
                    final.unlink()
                elif final.is_dir():
                    kept += clear_partitions(final)
                if final.is_dir():  # a user's files kept in it: the new partitions go beside them
                    _merge(self.temp / name, final)
                else:
                    os.replace(self.temp / name, final)
        except OSError as err:
            self.abort()
            raise InputError(f"cannot complete the outputs in {self.out_dir}: {err}") from err
        except BaseException:
            self.abort()
            raise
        shutil.rmtree(self.temp, ignore_errors=True)
        kept += remove_stale(self.out_dir, [t if self.partition else f"{t}.parquet" for t in TABLES])
        note_kept(self.out_dir, kept)

    def abort(self) -> None:
        for w in self._writers.values():
            with contextlib.suppress(Exception):
                w.close()
        self._writers.clear()
        shutil.rmtree(self.temp, ignore_errors=True)


def _merge(new: Path, final: Path) -> None:
    """The new `dt=*/part-*.parquet` files moved into a table directory that kept a user's files."""
    for part in new.iterdir():
        (final / part.name).mkdir(exist_ok=True)
        for f in part.iterdir():
            os.replace(f, final / part.name / f.name)
