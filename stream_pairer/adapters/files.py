"""Files in, files out: the embedded default mode, with no broker.

Input lines are read as bytes (a record that is not UTF-8 must reach the dead-letter output intact,
not crash a text decoder); gzip is recognised by its magic bytes, not by the file name.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from stream_pairer.core.vocab import Record, RecordKind
from stream_pairer.errors import InputError, OutputRefused

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
    """The three output files of the file mode; one JSON object per line.

    Built so that a run cannot destroy data (issue 14, item 8):

    * an output directory that holds one of the inputs is refused (`pair out/pairs.jsonl --out out`
      used to truncate its own input to 0 bytes and exit 0);
    * outputs are written to temporary files (created exclusively, mode 0600: payloads are private
      data) and renamed over the final names only when the run completed, so a failed run leaves
      the previous outputs as they were and no half output that looks complete;
    * a symlink (or anything but a regular file) at an output path is refused, never followed:
      a planted link must not redirect the write to another file.
    """

    def __init__(self, out_dir: Path, inputs: Sequence[str] = ()) -> None:
        check_output_dir(out_dir, inputs)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"cannot create output directory {out_dir}: {err.strerror or err}") from err
        self.paths = {name: out_dir / name for name in sorted(set(OUTPUT_FILES.values()))}
        for path in self.paths.values():
            _refuse_non_regular(path)
        self._temps: dict[str, Path] = {}
        self._files: dict[str, IO[bytes]] = {}
        try:
            for name in self.paths:
                fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out_dir)
                os.fchmod(fd, 0o600)  # mkstemp's mode already; explicit, whatever the umask
                self._temps[name] = Path(temp)
                self._files[name] = os.fdopen(fd, "wb", buffering=1 << 20)
        except OSError as err:
            self.abort()
            raise InputError(f"cannot write in {out_dir}: {err.strerror or err}") from err
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
        """Complete the run: make the temporary files durable, then rename them into place."""
        try:
            for f in self._files.values():
                f.flush()
                os.fsync(f.fileno())
                f.close()
            for name, temp in self._temps.items():
                final = self.paths[name]
                _refuse_non_regular(final)  # checked again: the run may have taken a while
                os.replace(temp, final)  # replaces a name, never writes through a link
        except OSError as err:
            self.abort()
            raise InputError(
                f"cannot complete the outputs in {self.paths['pairs.jsonl'].parent}: {err}"
            ) from err
        except InputError:
            self.abort()
            raise
        self._temps.clear()

    def abort(self) -> None:
        """A failed run: remove the temporary files; earlier outputs stay untouched."""
        for f in self._files.values():
            with contextlib.suppress(OSError):
                f.close()
        for temp in self._temps.values():
            with contextlib.suppress(OSError):
                temp.unlink()
        self._temps.clear()

    def __enter__(self) -> OutputWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _refuse_non_regular(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise OutputRefused(f"output path {path} is a symbolic link: refusing to follow or replace it")
    if not stat.S_ISREG(st.st_mode):
        raise OutputRefused(f"output path {path} exists and is not a regular file")


def check_output_dir(out_dir: Path, inputs: Sequence[str]) -> None:
    """Refuse an output directory that holds one of the inputs (by real path: symlinks and `..`
    resolved), before anything is written."""
    target = Path(os.path.realpath(out_dir))
    for name in inputs:
        if name == "-":
            continue
        real = Path(os.path.realpath(name))
        if real.parent == target:
            raise OutputRefused(
                f"refusing --out {out_dir}: it holds the input {name} (outputs there could overwrite "
                "inputs); choose another directory"
            )


def check_inputs(inputs: Sequence[str]) -> None:
    """Every input exists and can be opened, checked before any output is written: a typo in the
    last input name must not cost a long run and leave outputs behind."""
    for name in inputs:
        if name == "-":
            continue
        try:
            with open(name, "rb"):
                pass
        except OSError as err:
            raise InputError(f"cannot open {name}: {err.strerror or err}") from err
