"""Finding the input files: directory walks that say what they skip (issue 27).

A directory given as an input is walked recursively for files with an input suffix. What the
walk does not read is counted by reason (`Walk.skipped`, shown in `pair`'s summary), never
dropped without a word:

* `link_outside_inputs`: a symbolic link whose target lies outside the directory given (a link
  to /etc/passwd must not copy it into the dead letters); followed only with `--follow-links`;
* `link_loop`: a link that points back into a directory already being walked, or to itself;
* `dangling_link`: a link whose target does not exist;
* `directory_link`: a link to a directory inside the input tree (walked there already);
* `file_link`: a link to an input file inside the input tree (read there already);
* `run_output`: an earlier run's pairs/orphans/dead_letter.jsonl (all three side by side);
* `state_dir`: the run's `--state` directory (its state file and spool are the engine's memory
  and this run's own records, not input: read back, they were dead letters and phantom orphans);
  a file in it named on the command line is refused; a walk skips any `state.jsonl.gz` (another
  chain's state, or `audit --input` over a tree that holds the --state directory);
* `fifo`, `socket`, `device`: not files; a pipe would block the run until a writer came;
* `unreadable`: a file or directory that cannot be opened (permissions, /proc files).

A file named on the command line is read as asked, after `probe` refused what cannot be read: a
device, a socket, a file that opens but fails to read (/proc/self/mem). A named pipe is read to
its end (never opened twice: a probe's open would consume a writer's data).

Names come from the OS as they are: a name that is not UTF-8 is kept as Python's
surrogate-escaped str (so it opens with the same bytes) and shown escaped (`display_name`).
"""

from __future__ import annotations

import argparse
import glob
import os
import stat
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Final

from stream_pairer.errors import InputError, OutputRefused

# Suffixes of the files a directory walk picks up (other files, e.g. READMEs, are not inputs).
# The three JSONL files a `pair` run writes (files.OUTPUT_FILES names them by kind): in a directory
# that holds all three (an earlier run's --out inside the input tree), they are outputs, not tool
# events, and a walk skips them (`run_output`) instead of reading pairs back as "discovered" calls.
RUN_OUTPUTS: Final = frozenset({"pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl"})
# The state file of a `--state` directory (adapters/state.py): the engine's memory, never input,
# wherever a walk finds it (this run's --state, another chain's, or `audit --input` over the tree).
STATE_FILE: Final = "state.jsonl.gz"
INPUT_SUFFIXES: Final = (".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".ndjson.gz", ".gz")
READ_CHUNK: Final = 1 << 16


def display_name(name: str) -> str:
    """A file name fit for a record or a message: bytes that are not UTF-8 (surrogate-escaped
    by the OS layer) shown as `\\xff`, so the name can be encoded and still tells which file."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return name


def read_ahead(stream: IO[bytes], head: bytes, limit: int) -> bytes:
    """`head` and what follows it in `stream`, up to `limit` bytes or the first line break."""
    buf = bytearray(head)
    while len(buf) < limit:
        block = stream.read(min(READ_CHUNK, limit - len(buf)))
        if not block:
            break
        buf += block
        if b"\n" in block:
            break
    return bytes(buf)


class Walk:
    """The input files of one run and what was skipped finding them, by reason."""

    def __init__(
        self, skip_dir: Path | None = None, *, follow_links: bool = False, state_dir: Path | None = None
    ) -> None:
        self.skip = os.path.realpath(skip_dir) + os.sep if skip_dir is not None else None
        self.state = os.path.realpath(state_dir) if state_dir is not None else None
        self.follow_links = follow_links
        self.skipped: Counter[str] = Counter()
        self.files: list[str] = []

    def wanted(self, path: str) -> bool:
        return self.skip is None or not os.path.realpath(path).startswith(self.skip)

    def in_state(self, path: str) -> bool:
        """Whether `path` is the `--state` directory or lies in it (by real path)."""
        if self.state is None:
            return False
        real = os.path.realpath(path)
        return real == self.state or real.startswith(self.state + os.sep)

    def add(self, names: Sequence[str]) -> list[str]:
        """Files named, directories walked, globs expanded; each group in sorted order, so that a
        rerun reads in the same order. `-` stays as it is. The output directory (`skip_dir`) is
        left out of walks and globs: `pair logs/ --out logs/out` must not read its own outputs."""
        for name in names:
            if name == "-":
                self.files.append(name)
            elif os.path.isdir(name):
                found: list[str] = []
                root = os.path.realpath(name)
                # Walked from the name as pathlib spells it (`./logs/` -> `logs`), as the walk
                # before this one did: the paths become conversation ids and must not change.
                self._walk(str(Path(name)), root, {_dir_id(name)}, found)
                if not found and not self.skipped:
                    raise InputError(
                        f"{display_name(name)} is a directory with no .jsonl/.json(.gz) files in it"
                    )
                self.files += sorted(found)
            elif not os.path.lexists(name) and glob.has_magic(name):
                matches = []
                for p in sorted(glob.glob(name, recursive=True)):
                    if self.in_state(p):
                        self.skipped["state_dir"] += 1
                    elif _is_regular(p) and self.wanted(p):
                        matches.append(p)
                if not matches:
                    raise InputError(f"no file matches {display_name(name)}")
                self.files += matches
            elif self.in_state(name):
                raise OutputRefused(
                    f"refusing input {display_name(name)}: it is in the --state directory (the "
                    "engine's memory and a run's spool, not input)"
                )
            else:
                self.files.append(name)
        return self.files

    def _walk(self, path: str, root: str, active: set[tuple[int, int]], found: list[str]) -> None:
        """Depth first; `active` holds the directories on the way down (a link back to one of
        them is a loop)."""
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            self.skipped["unreadable"] += 1
            return
        outputs = RUN_OUTPUTS.issubset(e.name for e in entries)
        for entry in entries:
            full = entry.path
            if not self.wanted(full):
                continue
            if self.in_state(full) or entry.name == STATE_FILE:
                self.skipped["state_dir"] += 1
                continue
            if outputs and entry.name in RUN_OUTPUTS:
                self.skipped["run_output"] += 1
                continue
            try:
                is_link = entry.is_symlink()
                st = os.stat(full) if is_link else entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                self.skipped["dangling_link"] += 1
                continue
            except OSError as err:
                self.skipped["link_loop" if err.errno == 40 else "unreadable"] += 1  # 40: ELOOP
                continue
            if is_link and not self._follow(full, root, st, active):
                continue
            if stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key in active:
                    self.skipped["link_loop"] += 1
                    continue
                self._walk(full, root, active | {key}, found)
            elif not entry.name.endswith(INPUT_SUFFIXES):
                continue  # not an input by its name (a README...): not counted
            elif stat.S_ISREG(st.st_mode):
                if os.access(full, os.R_OK):
                    found.append(full)
                else:
                    self.skipped["unreadable"] += 1
            else:
                self.skipped[_kind(st.st_mode)] += 1

    def _follow(self, full: str, root: str, st: os.stat_result, active: set[tuple[int, int]]) -> bool:
        """Whether to read a symbolic link's target (counting why not)."""
        target = os.path.realpath(full)
        inside = target == root or target.startswith(root + os.sep)
        if stat.S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) in active:
                self.skipped["link_loop"] += 1
                return False
            if inside:
                self.skipped["directory_link"] += 1  # its target is walked where it lies
                return False
        if inside and target.endswith(INPUT_SUFFIXES) and self.wanted(target):
            self.skipped["file_link"] += 1  # its target is read where it lies: never twice
            return False
        if not inside and not self.follow_links:
            self.skipped["link_outside_inputs"] += 1
            return False
        return True


def _dir_id(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "not_a_file"


def probe(name: str) -> None:
    """Refuse, before anything is written, a named input that cannot be read: missing, a
    device or socket (a device like /dev/zero never ends), or a file that opens but fails on its
    first read. A named pipe is accepted unopened: it is read once, to its end."""
    shown = display_name(name)
    try:
        st = os.stat(name)
    except OSError as err:
        raise InputError(f"cannot open {shown}: {err.strerror or err}") from err
    if stat.S_ISFIFO(st.st_mode):
        return
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"cannot read {shown}: it is a {_kind(st.st_mode)}, not a file or a pipe")
    try:
        with open(name, "rb") as f:
            f.read(1)
    except OSError as err:
        raise InputError(f"cannot read {shown}: {err.strerror or err}") from err


def add_walk_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--follow-links",
        action="store_true",
        default=False,
        help="in directory walks, follow symbolic links that lead outside the directory given "
        "(default: skipped, and counted as link_outside_inputs)",
    )


def skipped_line(skipped: Counter[str]) -> str:
    """One line for what the walks skipped, by reason."""
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
    return f"skipped {sum(skipped.values())} directory entries not read as inputs: {reasons}"
