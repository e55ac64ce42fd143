"""`--raw all|call|omit` (the lean record shapes) and output bytes per input byte, end to end through
`stream-pairer pair`: every mode's records are valid against the published JSON Schemas, carry `raw`
exactly on the sides their mode says, differ from the default records in nothing else, and the
summary's byte counts are the bytes the files hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stream_pairer.cli.app import main
from stream_pairer.core.vocab import RawMode
from tests.cli.test_pair_command import EXAMPLE, _validators

OUTPUTS = ("pairs", "orphans", "dead_letter")


def _pair(tmp_path: Path, name: str, *extra: str) -> tuple[dict[str, bytes], dict[str, Any]]:
    out = tmp_path / name
    summary = tmp_path / f"{name}.json"
    assert main(["pair", str(EXAMPLE), "--out", str(out), "-q", "--summary-json", str(summary), *extra]) == 0
    files = {o: (out / f"{o}.jsonl").read_bytes() for o in OUTPUTS}
    return files, json.loads(summary.read_text())


def _records(files: dict[str, bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for o in OUTPUTS for line in files[o].splitlines() if line]


def _sides(rec: dict[str, Any]) -> list[tuple[bool, dict[str, Any]]]:
    """(is a call side, side) of a pair or orphan."""
    if rec["kind"] == "pair":
        return [(True, rec["call"]), (False, rec["result"])]
    if rec["kind"] in ("orphan_call", "orphan_result"):
        return [(rec["kind"] == "orphan_call", rec["event"])]
    return []


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAM_PAIRER_RAW", raising=False)


@pytest.mark.parametrize("mode", list(RawMode))
def test_every_mode_is_valid_and_keeps_raw_where_it_says(tmp_path: Path, mode: RawMode) -> None:
    files, _ = _pair(tmp_path, "out", "--raw", mode.value)
    validators = _validators()
    recs = _records(files)
    kinds = {r["kind"] for r in recs}
    assert kinds == {"pair", "orphan_call", "orphan_result", "dead_letter"}  # every shape is checked
    sides = 0
    for rec in recs:
        errors = sorted(validators[rec["kind"]].iter_errors(rec), key=str)
        assert not errors, (mode, rec["kind"], [e.message for e in errors][:3])
        for is_call, side in _sides(rec):
            sides += 1
            assert ("raw" in side) == mode.keeps(is_call), (mode, rec["kind"], is_call)
            assert "source" in side  # the lineage is kept in every mode
        if rec["kind"] == "dead_letter":
            assert "raw" in rec or "raw_base64" in rec  # its only copy of the input: always kept
    assert sides >= 30


def test_the_modes_differ_only_in_raw_and_all_is_the_default(tmp_path: Path) -> None:
    default, _ = _pair(tmp_path, "default")
    full, _ = _pair(tmp_path, "all", "--raw", "all")
    assert full == default  # byte for byte: the default records did not change
    for mode in (RawMode.CALL, RawMode.OMIT):
        lean, _ = _pair(tmp_path, mode.value, "--raw", mode.value)
        got, want = _records(lean), _records(full)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            for is_call, side in _sides(w):
                if not mode.keeps(is_call):
                    del side["raw"]
            assert g == w


def test_summary_counts_the_bytes_the_files_hold(tmp_path: Path) -> None:
    lines = [line.rstrip(b"\r") for line in EXAMPLE.read_bytes().split(b"\n")]
    input_bytes = sum(len(line) for line in lines if line.strip())
    ratios = {}
    for mode in RawMode:
        files, s = _pair(tmp_path, mode.value, "--raw", mode.value)
        assert s["input_bytes"] == input_bytes
        by_file = {o: len(b) - b.count(b"\n") for o, b in files.items()}  # records without line breaks
        by_kind = s["output_bytes_by_kind"]
        assert by_kind["pair"] == by_file["pairs"]
        assert by_kind["orphan_call"] + by_kind["orphan_result"] == by_file["orphans"]
        assert by_kind["dead_letter"] == by_file["dead_letter"]
        assert s["output_bytes"] == sum(by_file.values())
        assert s["output_bytes_per_input_byte"] == round(s["output_bytes"] / input_bytes, 4)
        ratios[mode] = s["output_bytes_per_input_byte"]
    assert ratios[RawMode.OMIT] < ratios[RawMode.CALL] < ratios[RawMode.ALL]


def test_summary_table_shows_the_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pair", str(EXAMPLE), "--out", str(tmp_path / "o"), "--raw", "omit"]) == 0
    text = capsys.readouterr().out
    assert "input bytes" in text and "output bytes" in text
    (row,) = [line for line in text.splitlines() if line.startswith("output bytes per input byte")]
    assert float(row.split()[-1]) > 0


def test_mode_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_PAIRER_RAW", "call")
    files, _ = _pair(tmp_path, "env")
    for rec in _records(files):
        for is_call, side in _sides(rec):
            assert ("raw" in side) == is_call


def test_an_unknown_mode_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["pair", str(EXAMPLE), "--out", str(tmp_path / "o"), "--raw", "some"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_run_takes_the_mode_from_its_flag_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidecar's engine config carries the mode (its records are built by the same engine)."""
    from stream_pairer.cli.app import build_parser  # noqa: PLC0415
    from stream_pairer.cli.commands.run import config_from_args  # noqa: PLC0415

    required = ["run", "--bootstrap-servers", "127.0.0.1:9092", "--input-topic", "t", "--group-id", "g"]
    got = config_from_args(build_parser("run").parse_args([*required, "--raw", "omit"]))
    assert got.engine.raw is RawMode.OMIT
    monkeypatch.setenv("STREAM_PAIRER_RAW", "call")
    got = config_from_args(build_parser("run").parse_args(required))
    assert got.engine.raw is RawMode.CALL
