"""The options a `--state` chain must keep from run to run, recorded in its state (issue 26).

Why: N chained runs equal one run only when every run reads and pairs records the same way. A
chain whose first run had `--map inhouse.jq` and whose second had none read the carried records
of run 1 as the built-in readers would: they became dead letters, and the summary said
`conservation ... (MISMATCH)` with exit 0. So the state records, per option, the value that
decides how records are read, paired, tagged and written (a `--map` or `--tool-schemas` file by
the hash of its content, not its path), and a run whose value differs is refused in one line
naming the option and both values, before anything is written.

Not recorded: what selects or names the inputs (`--follow-links`, `--stdin-name`, the inputs
themselves) and where and how the outputs go (`--out`, `--output-format`, `--partition-by-day`):
those may differ between the runs of a chain without changing a record.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from stream_pairer.errors import OutputRefused

# Options (as typed) and their argparse destination: their values are compared as given.
_COMPARED: Final = (
    "--conversation-id",
    "--conversation-field",
    "--max-record-bytes",
    "--max-history-ids",
    "--max-history-conversations",
    "--max-id-bytes",
    "--raw",
    "--call-timeout",
    "--result-grace",
    "--conversation-ttl",
    "--max-conversations",
    "--max-calls-per-conversation",
    "--max-held-bytes",
    "--max-closed-ids",
    "--max-tool-calls",
    "--max-conversation-seconds",
    "--max-repeat-hashes",
)
_BY_CONTENT: Final = ("--map", "--tool-schemas")  # a file (or directory) compared by its content


def _digest(path: str) -> str:
    """sha256 of a file, or of a directory's files (relative name and content, in sorted order)."""
    h = hashlib.sha256()
    p = Path(path)
    try:
        files = [p] if not p.is_dir() else sorted(f for f in p.rglob("*") if f.is_file())
        for f in files:
            h.update(os.fsencode(f.relative_to(p)) + b"\0" if f != p else b"")
            h.update(f.read_bytes())
    except OSError:
        return f"unreadable {path}"  # the option's own reader refuses it, with its reason
    return f"sha256 {h.hexdigest()[:16]}"


def chain_options(args: argparse.Namespace) -> dict[str, str]:
    """The value of each recorded option in this run, as a string (`none` when not given)."""
    out: dict[str, str] = {}
    for option in _COMPARED:
        value = getattr(args, option[2:].replace("-", "_"), None)
        out[option] = "none" if value is None else ",".join(value) if isinstance(value, list) else str(value)
    for option in _BY_CONTENT:
        value = getattr(args, option[2:].replace("-", "_"), None)
        out[option] = "none" if not value else _digest(value)
    return out


def check_options(state_dir: Path, earlier: Mapping[str, str], now: Mapping[str, str]) -> None:
    """Refuse a run whose recorded options differ from the chain's (an option the earlier runs did
    not record, from an older release, is not compared)."""
    for option, value in now.items():
        before = earlier.get(option)
        if before is not None and before != value:
            raise OutputRefused(
                f"--state {state_dir}: {option} differs from the chain's earlier runs ({before} there, "
                f"{value} here): a chain equals one run only with the same options; give the same "
                "value, or end the chain (--flush) and start a new --state directory"
            )
