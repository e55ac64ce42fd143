"""Files in, files out: the embedded default mode, with no broker.

Input lines are read as bytes (a record that is not UTF-8 must reach the dead-letter output intact,
not crash a text decoder); gzip is recognised by its magic bytes, not by the file name.
"""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from stream_pairer.core.vocab import Record, RecordKind
from stream_pairer.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
OUTPUT_FILES = {
    RecordKind.PAIR.value: "pairs.jsonl",
    RecordKind.ORPHAN_CALL.value: "orphans.jsonl",
    RecordKind.ORPHAN_RESULT.value: "orphans.jsonl",
    RecordKind.DEAD_LETTER.value: "dead_letter.jsonl",
}


def open_input(name: str) -> IO[bytes]:
    if name == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        try:
            raw = open(name, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        except OSError as err:
            raise InputError(f"cannot open {name}: {err.strerror or err}") from err
    buffered: IO[bytes] = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    if isinstance(buffered, io.BufferedReader) and buffered.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[return-value]
    return buffered


def read_lines(name: str) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line without its newline) for each non-blank line of an input."""
    stream = open_input(name)
    try:
        for lineno, line in enumerate(stream, 1):
            body = line.rstrip(b"\r\n")
            if body.strip():
                yield lineno, body
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise InputError(f"cannot read {name}: {err}") from err
    finally:
        if name != "-":
            stream.close()


class OutputWriter:
    """The three output files of the file mode; one JSON object per line."""

    def __init__(self, out_dir: Path) -> None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"cannot create output directory {out_dir}: {err.strerror or err}") from err
        self.paths = {name: out_dir / name for name in sorted(set(OUTPUT_FILES.values()))}
        self._files: dict[str, IO[bytes]] = {
            name: open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - closed in close()
            for name, path in self.paths.items()
        }
        self._by_kind = {kind: self._files[name] for kind, name in OUTPUT_FILES.items()}

    def write(self, records: list[Record]) -> None:
        dumps = orjson.dumps
        by_kind = self._by_kind
        for rec in records:
            by_kind[rec["kind"]].write(dumps(rec) + b"\n")

    def write_encoded(self, records: list[bytes]) -> None:
        """Records already encoded (the compiled core's output): routed by their leading
        `{"kind":"..."` field, which both engines always write first."""
        by_kind = self._by_kind
        for rec in records:
            by_kind[rec[9 : rec.index(b'"', 9)].decode()].write(rec + b"\n")

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def __enter__(self) -> OutputWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
