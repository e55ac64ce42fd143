"""Incremental runs (issue 26, item 4): `--state DIR` carries held calls and results, the
conversations' clocks and the engine's memory from one run to the next, so two runs over a file
split in two give exactly the records of one run over both halves, with the default tagging caps
(adapters/state.py; what finished before the cut: test_incremental_memory.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stream_pairer.cli.app import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def halves(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Bench traffic (interleaved conversations, parallel calls, id-less FIFO pairs, unanswered
    calls), cut in the middle: half the calls open at the cut are answered in the second half."""
    sys.path.insert(0, str(ROOT / "bench"))
    import datagen  # noqa: PLC0415 - the bench's generator, not a package

    d = tmp_path_factory.mktemp("days")
    lines = [v for _, v in datagen.generate(60, 3000, seed=7).all]
    cut = len(lines) // 2
    (d / "day1.jsonl").write_bytes(b"\n".join(lines[:cut]) + b"\n")
    (d / "day2.jsonl").write_bytes(b"\n".join(lines[cut:]) + b"\n")
    return d / "day1.jsonl", d / "day2.jsonl"


def _records(*outs: Path) -> list[dict[str, Any]]:
    recs = []
    for out in outs:
        for name in ("pairs", "orphans", "dead_letter"):
            recs += [json.loads(x) for x in (out / f"{name}.jsonl").read_text().splitlines()]
    return recs


def _key(rec: dict[str, Any], drop: tuple[str, ...] = ()) -> str:
    return json.dumps({k: v for k, v in rec.items() if k not in drop}, sort_keys=True)


def _two_runs_and_one(tmp_path: Path, halves: tuple[Path, Path], *extra: str) -> tuple[list[Any], list[Any]]:
    day1, day2 = halves
    state = tmp_path / "state"
    assert main(["pair", str(day1), "--out", str(tmp_path / "o1"), "--state", str(state), "-q", *extra]) == 0
    o1 = _records(tmp_path / "o1")
    assert not [r for r in o1 if r.get("reason") == "end_of_input"]  # held, not ended
    argv = ["pair", str(day2), "--out", str(tmp_path / "o2"), "--state", str(state), "--flush", "-q", *extra]
    assert main(argv) == 0
    assert main(["pair", str(day1), str(day2), "--out", str(tmp_path / "one"), "-q", *extra]) == 0
    return _records(tmp_path / "o1", tmp_path / "o2"), _records(tmp_path / "one")


def test_two_runs_with_state_equal_one_run(tmp_path: Path, halves: tuple[Path, Path]) -> None:
    # The default caps: the tagger's per-request counters are carried, so every field is equal,
    # the termination tags included.
    two, one = _two_runs_and_one(tmp_path, halves)
    assert sorted(map(_key, two)) == sorted(map(_key, one))
    assert [r for r in two if r.get("failure") == "termination"]
    # and the cut mattered: pairs whose call was read in day 1 and result in day 2
    across = [
        r for r in two if r["kind"] == "pair" and r["call"]["source"]["file"] != r["result"]["source"]["file"]
    ]
    assert len(across) >= 10
    assert not [r for r in two if r.get("reason") == "no_call"]


def test_without_state_the_split_loses_pairs(tmp_path: Path, halves: tuple[Path, Path]) -> None:
    """What --state fixes: two plain runs turn the pairs across the cut into orphans."""
    day1, day2 = halves
    assert main(["pair", str(day1), "--out", str(tmp_path / "a"), "-q"]) == 0
    assert main(["pair", str(day2), "--out", str(tmp_path / "b"), "-q"]) == 0
    reasons = [r.get("reason") for r in _records(tmp_path / "a", tmp_path / "b")]
    assert reasons.count("no_call") >= 10 and reasons.count("end_of_input") >= 10


def test_an_input_name_already_read_is_refused(tmp_path: Path, halves: tuple[Path, Path]) -> None:
    day1, _ = halves
    state = tmp_path / "state"
    assert main(["pair", str(day1), "--out", str(tmp_path / "o1"), "--state", str(state), "-q"]) == 0
    assert main(["pair", str(day1), "--out", str(tmp_path / "o2"), "--state", str(state), "-q"]) == 2
    assert not (tmp_path / "o2").exists()


def _canon(conv: str, kind: str, ident: str, ts: str | None = None) -> str:
    rec: dict[str, Any] = {"conversation_id": conv, "type": kind, "name": "n", "arguments": {"k": ident}}
    rec["id" if kind == "tool_call" else "call_id"] = ident
    if ts is not None:
        rec["ts"] = ts
    return json.dumps(rec) + "\n"


def test_the_conversation_clock_is_carried(tmp_path: Path) -> None:
    """Day 1 ends with conversation c's clock at 00:08:20 (a finished pair) while only an older
    call A (00:00:00) is held. Day 2's undated call D takes its conversation's clock as its time;
    a later event times both A and D out. Only a carried clock gives D the one run's time."""
    day1 = tmp_path / "clock1.jsonl"
    day1.write_text(
        _canon("c", "tool_call", "A", "2026-01-01T00:00:00Z")
        + _canon("c", "tool_call", "B", "2026-01-01T00:08:20Z")
        + _canon("c", "tool_result", "B", "2026-01-01T00:08:20Z")
    )
    day2 = tmp_path / "clock2.jsonl"
    day2.write_text(_canon("c", "tool_call", "D") + _canon("c", "tool_call", "E", "2026-01-01T00:30:00Z"))
    state = tmp_path / "state"
    assert main(["pair", str(day1), "--out", str(tmp_path / "o1"), "--state", str(state), "-q"]) == 0
    argv = ["pair", str(day2), "--out", str(tmp_path / "o2"), "--state", str(state), "--flush", "-q"]
    assert main(argv) == 0
    assert main(["pair", str(day1), str(day2), "--out", str(tmp_path / "one"), "-q"]) == 0
    two, one = _records(tmp_path / "o1", tmp_path / "o2"), _records(tmp_path / "one")
    assert sorted(map(_key, two)) == sorted(map(_key, one))
    d = next(r for r in two if r.get("event", {}).get("id") == "D")
    assert d["reason"] == "timeout" and d["ts"] == "2026-01-01T00:08:20.000Z"  # the carried clock


def test_three_runs_and_stdin_equal_one(tmp_path: Path, halves: tuple[Path, Path]) -> None:
    """Held events carried across two boundaries; the middle day read from stdin under a name."""
    day1, day2 = halves
    lines = day2.read_bytes().splitlines(keepends=True)
    mid, last = tmp_path / "mid.jsonl", tmp_path / "last.jsonl"
    mid.write_bytes(b"".join(lines[: len(lines) // 2]))
    last.write_bytes(b"".join(lines[len(lines) // 2 :]))
    state = str(tmp_path / "state")
    assert main(["pair", str(day1), "--out", str(tmp_path / "a"), "--state", state, "-q"]) == 0
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "stream_pairer", "pair", "-", "--stdin-name", "mid.jsonl"]
    cmd += ["--out", str(tmp_path / "b"), "--state", state, "-q"]
    subprocess.run(cmd, input=mid.read_bytes(), env=env, check=True, timeout=120)
    argv = ["pair", str(last), "--out", str(tmp_path / "c"), "--state", state, "--flush", "-q"]
    assert main(argv) == 0
    assert main(["pair", str(day1), str(mid), str(last), "--out", str(tmp_path / "one"), "-q"]) == 0
    three = _records(tmp_path / "a", tmp_path / "b", tmp_path / "c")
    assert sorted(map(_key, three)) == sorted(map(_key, _records(tmp_path / "one")))
    crossing = {
        (r["call"]["source"]["file"], r["result"]["source"]["file"])
        for r in three
        if r["kind"] == "pair" and r["call"]["source"]["file"] != r["result"]["source"]["file"]
    }
    assert {(day1.name, "mid.jsonl"), ("mid.jsonl", last.name)} <= crossing


def test_a_broken_state_or_flush_without_state_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x.jsonl"
    src.write_text('{"conversation_id":"c","type":"tool_call","id":"a","name":"n"}\n')
    assert main(["pair", str(src), "--out", str(tmp_path / "o"), "--flush", "-q"]) == 2
    assert "--state" in capsys.readouterr().err
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.jsonl.gz").write_bytes(b"not gzip")
    assert main(["pair", str(src), "--out", str(tmp_path / "o"), "--state", str(state), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot read --state" in err
    assert not (tmp_path / "o").exists()
    assert [p.name for p in state.iterdir()] == ["state.jsonl.gz"]  # no spool left behind
