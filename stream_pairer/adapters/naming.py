"""Input names: what an input file is called in the outputs, whatever way its path was typed.

Why: an input's name is part of two identities the warehouse deduplicates on. It is `source.file`
(hashed into `pair_id`, which also covers the call's lineage so reused call ids never share a
key) and it is the conversation id of records that carry none. When the name was the path as
typed, `pair /abs/logs/a.jsonl`, `pair logs/a.jsonl`, `pair ./logs/a.jsonl` and `cat ... | pair -`
gave the same records four different `pair_id`s (issue 26: 0 of 13 shared).

The rule (README, File mode, *Names and identities*): an input is named by its path **relative to
the argument that brought it in**, with `/` separators:

* a file argument: its base name (`/abs/logs/a.jsonl`, `logs/a.jsonl`, `./logs/a.jsonl` -> `a.jsonl`);
* a gzipped file is named without its `.gz` (`a.jsonl.gz` -> `a.jsonl`): compressing a log keeps
  its pair_ids;
* a directory argument: the path below that directory (`pair logs/` -> `a.jsonl`, `day1/b.jsonl`);
* a glob: the path below the glob's leading directory without wildcards (`logs/**/*.jsonl` ->
  `day1/b.jsonl`);
* stdin (`-`): `--stdin-name NAME` when given, else `-`. Content that carries its own conversation
  ids keeps them from stdin as from a file; `pair_id` also hashes the name, so the same records
  read from stdin give the file's `pair_id`s only under `--stdin-name <the file's name>`.

Two inputs of one run with the same name would merge their id-less records into one conversation
and could share `pair_id`s, so such a run is refused with the two paths (pass their common
directory instead, which names them apart).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path, PurePath

from stream_pairer.adapters.walk import Walk, display_name
from stream_pairer.errors import InputError

STDIN = "-"


def input_name(path: str, argument: str, stdin_name: str | None = None) -> str:
    """The name of `path`, found by expanding `argument` (see the module docstring)."""
    if path == STDIN:
        return stdin_name or STDIN
    if os.path.isdir(argument):
        base = argument
    elif not os.path.exists(argument) and glob.has_magic(argument):
        base = _glob_root(argument)
    else:
        return _uncompressed(os.path.basename(path))
    return _uncompressed(PurePath(os.path.relpath(path, base)).as_posix())


def _uncompressed(name: str) -> str:
    """A gzipped log is named as the log it holds: a rotator that compresses yesterday's
    `a.jsonl` into `a.jsonl.gz` must not change its records' pair_ids (the warehouse
    deduplicates on them)."""
    return name.removesuffix(".gz")


def _glob_root(pattern: str) -> str:
    """The leading directories of a glob pattern that hold no wildcard (`.` if none)."""
    parts: list[str] = []
    for part in Path(pattern).parts[:-1]:
        if glob.has_magic(part):
            break
        parts.append(part)
    return str(Path(*parts)) if parts else "."


def named_inputs(
    arguments: Sequence[str],
    skip_dir: Path | None = None,
    stdin_name: str | None = None,
    walk: Walk | None = None,
) -> list[tuple[str, str]]:
    """(path, name) of every input, in the walk's order; refuses two inputs with one name. `walk`
    (walk.Walk) decides which links are followed and counts what it skipped; the name is shown
    escaped where the OS gave bytes that are not UTF-8 (the path itself keeps them, to open)."""
    walk = walk or Walk(skip_dir)
    out: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for argument in arguments:
        start = len(walk.files)
        for path in walk.add([argument])[start:]:
            name = display_name(input_name(path, argument, stdin_name))
            other = seen.get(name)
            if other is not None:
                same = STDIN not in (other, path) and os.path.realpath(other) == os.path.realpath(path)
                what = "is given twice" if same else f"and {path} are both named {name}"
                raise InputError(
                    f"input {other} {what} (an input is named by its path below the argument that "
                    "brought it in, and names must differ): pass their common directory instead"
                )
            seen[name] = path
            out.append((path, name))
    return out
