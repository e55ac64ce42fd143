"""Reading output files back (`report`, `audit`) within bounds, saying what was skipped or doubled.

Output files are written by this tool, but what is given to `report` may be anything: a 1 GB line
(it cost 3.1 GB of memory), the same directory twice, two runs' outputs concatenated. Here:

* a line longer than the limit is never held (`read_lines`' size limit): it is counted and named;
* a file given twice (the same inode, by two names) is read once and named;
* a record seen before (the same bytes) is counted as a duplicate, so the table can say its counts
  include doubles. Records are remembered by a 64-bit hash, up to `MAX_REMEMBERED` of them, so the
  check's memory is bounded too (past that, duplicates are no longer looked for, and that is said).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Final

from stream_pairer.adapters.files import Oversize, read_lines
from stream_pairer.adapters.walk import display_name

# Output lines longer than this are skipped, not read: an output record holds its call and its
# result (each at most --max-record-bytes, 1 MiB by default) and the envelope around them.
DEFAULT_MAX_LINE_BYTES: Final = 64 << 20
MAX_REMEMBERED: Final = 1_000_000  # hashes of records kept to find duplicates (~64 MB at most)


class OutputLines:
    """The lines of output files, with what was skipped: `oversize` (name:line, size), `twice`
    (names read already), `duplicates` (records seen before), `unchecked` (records past the
    duplicate check's bound)."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.oversize: list[tuple[str, int]] = []
        self.twice: list[str] = []
        self.duplicates = 0
        self.unchecked = 0
        self._files: set[tuple[int, int]] = set()
        self._seen: set[int] = set()

    def lines(self, files: Iterable[str]) -> Iterator[tuple[str, int, bytes]]:
        """(file name as shown, line number, line) of every line kept."""
        for name in files:
            shown = "<stdin>" if name == "-" else display_name(name)
            if name != "-":
                try:
                    st = os.stat(name)
                except OSError:
                    st = None  # read_lines says why it cannot be read
                if st is not None:
                    key = (st.st_dev, st.st_ino)
                    if key in self._files:
                        self.twice.append(shown)
                        continue
                    self._files.add(key)

            def skip(lineno: int, item: Oversize, shown: str = shown) -> None:
                self.oversize.append((f"{shown}:{lineno}", item.size))

            for lineno, line in read_lines(name, self.max_line_bytes, skip):
                yield shown, lineno, line

    def is_duplicate(self, line: bytes) -> bool:
        """Whether these exact record bytes were read before (by 64-bit hash)."""
        h = hash(line)
        if h in self._seen:
            self.duplicates += 1
            return True
        if len(self._seen) < MAX_REMEMBERED:
            self._seen.add(h)
        else:
            self.unchecked += 1
        return False

    def warnings(self) -> list[str]:
        """One line each for what the reader skipped or found doubled."""
        out = [f"{name} was given twice: read once" for name in self.twice]
        for where, size in self.oversize[:5]:
            out.append(f"skipped {where}: a line of {size} bytes, more than {self.max_line_bytes}")
        if len(self.oversize) > 5:
            out.append(f"{len(self.oversize)} lines skipped in all for their size")
        if self.duplicates:
            out.append(
                f"{self.duplicates} records are exact duplicates of records read before (counted "
                "once): were the same outputs given twice, or concatenated?"
            )
        if self.unchecked:
            out.append(f"the last {self.unchecked} records were not checked for duplicates (bound reached)")
        return out
