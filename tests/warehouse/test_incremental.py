"""Incremental runs (issue 26, item 4): `--state DIR` carries held calls and results, and their
conversations' clocks, from one run to the next, so two runs over a file split in two give the
records of one run over both halves (adapters/state.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from stream_pairer.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
FAILURE_FIELDS = ("failure", "failure_detail", "failures")


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
    # The tool-call cap (termination tagging) counts calls per request, a counter --state does not
    # carry (README, Incremental runs): lifted here, so every field must be equal.
    two, one = _two_runs_and_one(tmp_path, halves, "--max-tool-calls", "1000000")
    assert sorted(map(_key, two)) == sorted(map(_key, one))
    # and the cut mattered: pairs whose call was read in day 1 and result in day 2
    across = [
        r for r in two if r["kind"] == "pair" and r["call"]["source"]["file"] != r["result"]["source"]["file"]
    ]
    assert len(across) >= 10
    assert not [r for r in two if r.get("reason") == "no_call"]


def test_with_default_tagging_only_the_failure_fields_may_differ(
    tmp_path: Path, halves: tuple[Path, Path]
) -> None:
    two, one = _two_runs_and_one(tmp_path, halves)
    assert sorted(_key(r, FAILURE_FIELDS) for r in two) == sorted(_key(r, FAILURE_FIELDS) for r in one)


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
