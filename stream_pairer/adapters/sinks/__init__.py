"""Where the output records of a file-mode run go: JSONL files (the default), stdout, Parquet, Iceberg.

Why sinks: every target takes the same stream, encoded JSON records in output order, each
starting with its kind (the compiled core's one output type), or grouped per JSONL file by
`feed_block` (`write_files`). The run
(`cli/commands/pair.py`) writes to one `Sink` and closes it when the input is done; a sink makes
its output visible only at `close` (a failed run leaves the previous outputs as they were).

* `jsonl`: `adapters/outputs.py` `OutputWriter` (three files, temporary files renamed into place);
* `-` (stdout): every record as one JSON line, each with its `kind` (`stdout.py`);
* `parquet`: one typed table per kind, zstd, optionally Hive-partitioned by event day (`parquet.py`);
* `iceberg`: appended to Iceberg tables through a pyiceberg catalog, `--out CATALOG/NAMESPACE`
  (`iceberg.py`).

`check_out` refuses an existing, non-empty `--out` unless `--overwrite` (a second run into the
same directory used to replace the first day's outputs silently); a completed run then removes
what an earlier run wrote there in another format or layout (`stale.py`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, Self

from stream_pairer.adapters.outlock import LOCK_NAME
from stream_pairer.errors import OutputRefused

STDOUT: Final = "-"
FORMATS: Final = ("jsonl", "parquet", "iceberg")
_KIND_AT: Final = len(b'{"kind":"')  # where an encoded output record's kind starts


class Sink(Protocol):
    """A run's output target. `bytes_by_kind`: JSON record bytes written per kind (the summary's
    output size, the same whatever the target)."""

    bytes_by_kind: dict[str, int]

    def write(self, records: Sequence[bytes]) -> None: ...
    def write_files(
        self, pairs: bytes, orphans: bytes, dead_letters: bytes, sizes: tuple[int, int, int, int]
    ) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, exc_type: type[BaseException] | None, *exc: Any) -> None: ...


class Closing:
    """The context manager of every sink here: `close` when the run completed, `abort` when not;
    and `write_files` for the sinks that take records one by one."""

    def write(self, records: Sequence[bytes]) -> None:
        raise NotImplementedError

    def write_files(
        self, pairs: bytes, orphans: bytes, dead_letters: bytes, sizes: tuple[int, int, int, int]
    ) -> None:
        """Outputs already grouped per JSONL file by the compiled core (`feed_block`), taken
        apart (`file_records`); `sizes` are counted again by `write`."""
        del sizes
        self.write(file_records(pairs, orphans, dead_letters))

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def file_records(*files: bytes) -> list[bytes]:
    """The records of `feed_block`'s per-file outputs (each record followed by a line break, which
    no encoded record holds), file after file."""
    return [rec for data in files for rec in data.split(b"\n")[:-1]]


def encoded(records: Sequence[bytes]) -> Iterator[tuple[str, bytes]]:
    """(kind, encoded record) of each output record: every record the core encodes starts with
    `{"kind":"<kind>"`, so its kind is read without decoding it."""
    for rec in records:
        yield rec[_KIND_AT : rec.index(b'"', _KIND_AT)].decode(), rec


def check_out(out: Path, *, overwrite: bool, output_format: str = "jsonl") -> None:
    """Refuse an `--out` directory that exists and holds anything, unless `overwrite`: one line,
    before any input is read. `-` (stdout) and Iceberg (append-only, idempotent) are never refused."""
    if str(out) == STDOUT or output_format == "iceberg" or overwrite or not os.path.isdir(out):
        return
    with os.scandir(out) as entries:  # the run's own lock file (outlock.py) is not an output
        first = next((e.name for e in entries if e.name != LOCK_NAME), None)
    if first is not None:
        raise OutputRefused(
            f"refusing --out {out}: it is not empty (holds {first}); pass --overwrite to replace "
            "its outputs, or choose a new directory"
        )


def open_sink(
    out: Path, inputs: Sequence[str], *, output_format: str = "jsonl", partition: bool = False
) -> Sink:
    """The sink for `--out` (a directory, or `-` for stdout) and `--output-format`."""
    if str(out) == STDOUT:
        if output_format != "jsonl":
            raise OutputRefused(f"--out - writes JSONL; --output-format {output_format} needs a target")
        if partition:
            raise OutputRefused("--partition-by-day needs --output-format parquet; --out - writes JSONL")
        from stream_pairer.adapters.sinks.stdout import StdoutSink  # noqa: PLC0415 - by option

        return StdoutSink()
    if output_format == "iceberg":
        from stream_pairer.adapters.sinks.iceberg import IcebergSink  # noqa: PLC0415 - optional pyiceberg

        if partition:
            raise OutputRefused(
                "--partition-by-day is for parquet: Iceberg tables are partitioned by day already"
            )
        return IcebergSink(out)
    if output_format == "parquet":
        from stream_pairer.adapters.sinks.parquet import ParquetSink  # noqa: PLC0415 - optional pyarrow

        return ParquetSink(out, inputs, partition=partition)
    from stream_pairer.adapters.sinks.stale import JsonlSink  # noqa: PLC0415 - sinks sit beside it

    if partition:
        raise OutputRefused("--partition-by-day needs --output-format parquet")
    return JsonlSink(out, inputs)
