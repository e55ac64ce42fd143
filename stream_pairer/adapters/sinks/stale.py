"""The outputs an earlier run left in `--out` in another format: removed once this run's are in place.

Why: `--overwrite` replaces a directory's outputs, but each sink replaced only its own names, so a
JSONL run into a directory of an earlier `--output-format parquet` run left the `*.parquet` files
beside the new `*.jsonl` ones (and a partitioned run an unpartitioned run's files): a reader
globbing the directory saw two runs at once. Only what stream-pairer itself names is removed (the
JSONL files, `<table>.parquet`, and a `<table>/` directory holding nothing but `dt=*/part-*.parquet`
partitions), never anything else, never through a symbolic link; and only after the run's own
outputs were renamed into place, so a failed run still leaves the previous outputs as they were.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Collection
from pathlib import Path

from stream_pairer.adapters.outputs import OUTPUT_FILES, OutputWriter
from stream_pairer.adapters.sinks.columns import TABLES


def output_names() -> set[str]:
    """Every name a file-mode run writes in `--out`, whatever its format and layout."""
    return set(OUTPUT_FILES.values()) | {f"{t}.parquet" for t in TABLES} | set(TABLES)


def _only_partitions(d: Path) -> bool:
    """Whether a directory holds only `dt=*/part-*.parquet` (what a partitioned run wrote)."""
    for part in d.iterdir():
        if part.is_symlink() or not part.is_dir() or not part.name.startswith("dt="):
            return False
        for f in part.iterdir():
            if (
                f.is_symlink()
                or not f.is_file()
                or not (f.name.startswith("part-") and f.suffix == ".parquet")
            ):
                return False
    return True


def remove_stale(out_dir: Path, written: Collection[str]) -> None:
    """Removes the outputs of other formats and layouts from `out_dir`; `written`: this run's."""
    for name in sorted(output_names() - set(written)):
        path = out_dir / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(mode):
                path.unlink()
            elif stat.S_ISDIR(mode) and _only_partitions(path):
                shutil.rmtree(path)


class JsonlSink(OutputWriter):
    """The JSONL files (`OutputWriter`), and the other formats' outputs removed once they are in."""

    def close(self) -> None:
        super().close()
        remove_stale(next(iter(self.paths.values())).parent, self.paths)
