"""Stable identities (issue 26, item 3): `pair_id`, `source.file` and the fallback conversation id
of the same records do not depend on how the input path was spelled (adapters/naming.py)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stream_pairer.adapters.naming import input_name, named_inputs
from stream_pairer.cli.app import main
from stream_pairer.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"


def _ids(out: Path) -> list[tuple[str, str, str]]:
    recs = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
    recs += [json.loads(x) for x in (out / "orphans.jsonl").read_text().splitlines()]
    return sorted(
        (r.get("pair_id", ""), r["conversation_id"], (r.get("call") or r.get("event"))["source"]["file"])
        for r in recs
    )


def _pair_in(cwd: Path, arg: str, out: Path, *extra: str, stdin: bytes | None = None) -> list[Any]:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "stream_pairer", "pair", arg, "--out", str(out), "-q", *extra]
    subprocess.run(cmd, cwd=cwd, env=env, input=stdin, check=True, timeout=120)
    return _ids(out)


def test_three_spellings_and_stdin_give_the_same_pair_ids(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(EXAMPLE, logs / "mixed.jsonl")
    absolute = _pair_in(tmp_path, str(logs / "mixed.jsonl"), tmp_path / "o1")
    relative = _pair_in(tmp_path, "logs/mixed.jsonl", tmp_path / "o2")
    dotted = _pair_in(logs, "./mixed.jsonl", tmp_path / "o3")
    directory = _pair_in(tmp_path, "logs/", tmp_path / "o4")
    named_stdin = _pair_in(
        tmp_path, "-", tmp_path / "o5", "--stdin-name", "mixed.jsonl", stdin=EXAMPLE.read_bytes()
    )
    assert len([i for i in absolute if i[0]]) >= 5  # pairs, with ids to compare
    assert absolute == relative == dotted == directory == named_stdin
    # The example's id-less record lands in its file's conversation: the name, not the path typed.
    assert {c for _, c, _ in absolute} >= {"mixed.jsonl"}
    assert {f for _, _, f in absolute} == {"mixed.jsonl"}


def test_stdin_without_a_name_keeps_the_contents_own_conversation_ids(tmp_path: Path) -> None:
    plain = _pair_in(tmp_path, str(EXAMPLE), tmp_path / "a")
    piped = _pair_in(tmp_path, "-", tmp_path / "b", stdin=EXAMPLE.read_bytes())
    own = {c for _, c, _ in plain} - {"mixed.jsonl"}
    assert own and own == {c for _, c, _ in piped} - {"-"}
    # the documented difference: the name `-` is in source.file (and so in pair_id)
    assert {f for _, _, f in piped} == {"-"}
    assert {p for p, _, _ in piped if p}.isdisjoint({p for p, _, _ in plain if p})


def test_names_below_a_directory_and_a_glob(tmp_path: Path) -> None:
    (tmp_path / "logs" / "d1").mkdir(parents=True)
    (tmp_path / "logs" / "d2").mkdir()
    for d in ("d1", "d2"):
        (tmp_path / "logs" / d / "s.jsonl").write_text("{}\n")
    got = named_inputs([str(tmp_path / "logs")])
    assert [n for _, n in got] == ["d1/s.jsonl", "d2/s.jsonl"]
    got = named_inputs([str(tmp_path / "logs" / "*" / "s.jsonl")])
    assert [n for _, n in got] == ["d1/s.jsonl", "d2/s.jsonl"]
    assert input_name("-", "-", None) == "-" and input_name("-", "-", "x.jsonl") == "x.jsonl"


def test_two_inputs_with_one_name_are_refused(tmp_path: Path) -> None:
    for d in ("d1", "d2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "s.jsonl").write_text("{}\n")
    with pytest.raises(InputError, match=r"both named s\.jsonl"):
        named_inputs([str(tmp_path / "d1" / "s.jsonl"), str(tmp_path / "d2" / "s.jsonl")])
    out = tmp_path / "out"
    both = [str(tmp_path / "d1" / "s.jsonl"), str(tmp_path / "d2" / "s.jsonl")]
    assert main(["pair", *both, "--out", str(out)]) == 1
    assert not out.exists()


def test_a_gzipped_log_keeps_its_pair_ids(tmp_path: Path) -> None:
    """A log rotator compresses yesterday's file: its records keep their pair_ids and conversation
    ids (the name is the log's, without `.gz`)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "a" / "mixed.jsonl")
    (tmp_path / "b" / "mixed.jsonl.gz").write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    plain = _pair_in(tmp_path, "a/mixed.jsonl", tmp_path / "o1")
    packed = _pair_in(tmp_path, "b/mixed.jsonl.gz", tmp_path / "o2")
    assert plain and plain == packed
    assert input_name("logs/x.jsonl.gz", "logs/") == "x.jsonl"
