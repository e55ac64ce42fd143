"""The file mode's JSONL outputs: the three files, written so that a run cannot destroy data.

Why apart from the readers (adapters/files.py): writing is about the safety of what is already on
disk (no input overwritten, no symlink followed, no half output that looks complete), reading about
what inputs look like; neither needs the other. The other targets (stdout, Parquet, Iceberg) are
the sinks of adapters/sinks/, which use the checks here.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Final

from stream_pairer.adapters.sinks import Closing
from stream_pairer.core.vocab import RecordKind
from stream_pairer.errors import InputError, OutputRefused

OUTPUT_FILES = {
    RecordKind.PAIR.value: "pairs.jsonl",
    RecordKind.ORPHAN_CALL.value: "orphans.jsonl",
    RecordKind.ORPHAN_RESULT.value: "orphans.jsonl",
    RecordKind.DEAD_LETTER.value: "dead_letter.jsonl",
}
_KIND_AT: Final = len(b'{"kind":"')  # where an encoded output record's kind starts
# The order of the record byte counts `NativePipeline.feed_block` returns.
KINDS: Final = (
    RecordKind.PAIR.value,
    RecordKind.ORPHAN_CALL.value,
    RecordKind.ORPHAN_RESULT.value,
    RecordKind.DEAD_LETTER.value,
)


class OutputWriter(Closing):
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
        # Bytes of the records written, by record kind, line separators not counted: the output
        # side of "output bytes per input byte" (`pair`'s summary; README, Output size).
        self.bytes_by_kind: dict[str, int] = dict.fromkeys(OUTPUT_FILES, 0)
        self._by_encoded_kind = {kind.encode(): (f, kind) for kind, f in self._by_kind.items()}

    def write(self, records: Sequence[bytes]) -> None:
        """Encoded output records, as the compiled core writes them: each starts with
        `{"kind":"<kind>"`, so the file is chosen without decoding."""
        sizes = self.bytes_by_kind
        by_encoded = self._by_encoded_kind
        for rec in records:
            f, kind = by_encoded[rec[_KIND_AT : rec.index(b'"', _KIND_AT)]]
            f.write(rec + b"\n")
            sizes[kind] += len(rec)

    def write_files(
        self, pairs: bytes, orphans: bytes, dead_letters: bytes, sizes: tuple[int, int, int, int]
    ) -> None:
        """Outputs already grouped per file by the compiled core (`NativePipeline.feed_block`):
        appended as they are; `sizes` are the record bytes by kind (pair, orphan_call,
        orphan_result, dead_letter), line breaks not counted."""
        files = self._files
        if pairs:
            files["pairs.jsonl"].write(pairs)
        if orphans:
            files["orphans.jsonl"].write(orphans)
        if dead_letters:
            files["dead_letter.jsonl"].write(dead_letters)
        by_kind = self.bytes_by_kind
        for kind, n in zip(KINDS, sizes, strict=True):
            by_kind[kind] += n

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
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise OutputRefused(f"refusing --out {out_dir}: it exists and is not a directory")
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


def check_extra_output(path: Path, flag: str, out_dir: Path, inputs: Sequence[str]) -> None:
    """Refuse an extra output file (`--summary-json`) that could destroy data or fail only after
    the run, by the rules of the main outputs, checked before anything is written: it must not be
    an input or one of the output files, must not be a symlink (never followed) or a non-regular
    file, and its directory must exist. Compared by real path of the directory + the name, so
    `out/../out/pairs.jsonl` or a symlinked directory do not slip through."""
    parent = path.parent
    real = Path(os.path.realpath(parent)) / path.name
    for name in inputs:
        if name != "-" and Path(os.path.realpath(name)) == real:
            raise OutputRefused(f"refusing {flag} {path}: it is the input {name}")
    out_real = Path(os.path.realpath(out_dir))
    for name in sorted(set(OUTPUT_FILES.values())):
        if out_real / name == real:
            raise OutputRefused(f"refusing {flag} {path}: it is the output file {out_dir / name}")
    try:
        _refuse_non_regular(path)
    except OutputRefused as err:
        raise OutputRefused(f"refusing {flag} {path}: {err}") from None
    if not parent.is_dir() and real.parent != out_real:  # --out is created by the run; others are not
        raise OutputRefused(f"refusing {flag} {path}: directory {parent} does not exist")


def write_private_file(path: Path, data: bytes) -> None:
    """Write `data` as `path` the way OutputWriter writes its files: a temporary file in the same
    directory (created exclusively, mode 0600), made durable, then renamed over the name, which
    replaces a name and never writes through a link (checked again just before the rename)."""
    parent = path.parent
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as err:
        raise InputError(f"cannot write in {parent}: {err.strerror or err}") from err
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _refuse_non_regular(path)
        os.replace(temp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(err, OSError):
            raise InputError(f"cannot write {path}: {err.strerror or err}") from err
        raise
