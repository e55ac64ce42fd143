"""The outputs an earlier run left in `--out` in another format: removed once this run's are in place.

Why: `--overwrite` replaces a directory's outputs, but each sink replaced only its own names, so a
JSONL run into a directory of an earlier `--output-format parquet` run left the `*.parquet` files
beside the new `*.jsonl` ones (and a partitioned run an unpartitioned run's files): a reader
globbing the directory saw two runs at once. Only what stream-pairer itself names is removed (the
JSONL files, `<table>.parquet`, and a `<table>/` directory holding nothing but `dt=*/part-*.parquet`
partitions), never anything else, never through a symbolic link: from a table directory, only
`dt=*/part-*.parquet` and the directories that left empty (other files are kept, and named in one
stderr line); and only after the run's own
outputs were renamed into place, so a failed run still leaves the previous outputs as they were.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Collection, Sequence
from pathlib import Path

from stream_pairer.adapters.outputs import OUTPUT_FILES, OutputWriter
from stream_pairer.adapters.sinks.columns import TABLES


def output_names() -> set[str]:
    """Every name a file-mode run writes in `--out`, whatever its format and layout."""
    return set(OUTPUT_FILES.values()) | {f"{t}.parquet" for t in TABLES} | set(TABLES)


def _own_part(f: Path) -> bool:
    """A file a partitioned run wrote: `part-*.parquet`, a regular file (never a link)."""
    return f.name.startswith("part-") and f.suffix == ".parquet" and not f.is_symlink() and f.is_file()


def clear_partitions(d: Path) -> list[Path]:
    """Removes what a partitioned run wrote in the table directory `d` (`dt=*/part-*.parquet`, then
    the `dt=*` directories and `d` itself when that left them empty) and returns what it kept: a
    user's file beside the partitions (notes, a CSV) is not stream-pairer's to delete (it was, when
    the whole tree was replaced)."""
    kept: list[Path] = []
    for part in sorted(d.iterdir()):
        if part.is_symlink() or not part.is_dir() or not part.name.startswith("dt="):
            kept.append(part)
            continue
        for f in sorted(part.iterdir()):
            if _own_part(f):
                f.unlink()
            else:
                kept.append(f)
        with contextlib.suppress(OSError):  # not empty: it holds a kept file
            part.rmdir()
    with contextlib.suppress(OSError):
        d.rmdir()
    return kept


def note_kept(out_dir: Path, kept: Sequence[Path]) -> None:
    """One stderr line for the files `--overwrite` left because stream-pairer did not write them."""
    if kept:
        names = ", ".join(str(p.relative_to(out_dir)) for p in kept[:5])
        more = f" and {len(kept) - 5} more" if len(kept) > 5 else ""
        print(
            f"stream-pairer pair: --overwrite kept {len(kept)} file(s) in {out_dir} that stream-pairer "
            f"did not write: {names}{more}",
            file=sys.stderr,
        )


def remove_stale(out_dir: Path, written: Collection[str]) -> list[Path]:
    """Removes the outputs of other formats and layouts from `out_dir`; `written`: this run's.
    Returns the files kept in a table directory (not stream-pairer's)."""
    kept: list[Path] = []
    for name in sorted(output_names() - set(written)):
        path = out_dir / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(mode):
                path.unlink()
            elif stat.S_ISDIR(mode):
                kept += clear_partitions(path)
    return kept


class JsonlSink(OutputWriter):
    """The JSONL files (`OutputWriter`), and the other formats' outputs removed once they are in."""

    def close(self) -> None:
        super().close()
        out_dir = next(iter(self.paths.values())).parent
        note_kept(out_dir, remove_stale(out_dir, self.paths))
