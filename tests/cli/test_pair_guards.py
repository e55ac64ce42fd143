"""`pair` refuses, before writing anything, an output location that could destroy data or fail
after the run (`--summary-json` by the same rules as the three outputs, `--out` that is a file),
and a closed stdout ends the command quietly."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from stream_pairer.cli.app import EXIT_BROKEN_PIPE, main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(EXAMPLE, tmp_path / "in.jsonl")
    return tmp_path


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["pair", "in.jsonl", "-o", "out", "-q", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_summary_json_refuses_the_input(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (work / "in.jsonl").read_bytes()
    err = _refused(capsys, "--summary-json", "in.jsonl")
    assert "--summary-json in.jsonl: it is the input" in err
    assert (work / "in.jsonl").read_bytes() == before
    assert not (work / "out").exists()  # nothing written


def test_summary_json_refuses_an_input_by_another_spelling(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "d").mkdir()
    before = (work / "in.jsonl").read_bytes()
    _refused(capsys, "--summary-json", "d/../in.jsonl")
    assert (work / "in.jsonl").read_bytes() == before


@pytest.mark.parametrize("name", ["pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl"])
def test_summary_json_refuses_an_output_file(
    work: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    err = _refused(capsys, "--summary-json", f"out/{name}")
    assert "it is the output file" in err and not (work / "out").exists()


def test_summary_json_never_follows_a_symlink(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "victim").write_text("keep")
    (work / "link.json").symlink_to(work / "victim")
    err = _refused(capsys, "--summary-json", "link.json")
    assert "symbolic link" in err
    assert (work / "victim").read_text() == "keep" and (work / "link.json").is_symlink()
    assert not (work / "out").exists()


@pytest.mark.parametrize("where", ["missing/summary.json", "."])
def test_summary_json_missing_directory_or_a_directory_is_refused_before_any_output(
    work: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    err = _refused(capsys, "--summary-json", where)
    assert "Traceback" not in err and "--summary-json" in err
    assert not (work / "out").exists()


def test_summary_json_is_private_and_replaced_whole(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "s.json").write_text("old")
    os.chmod(work / "s.json", 0o644)
    assert main(["pair", "in.jsonl", "-o", "out", "-q", "--summary-json", "s.json"]) == 0
    assert stat.S_IMODE(os.stat(work / "s.json").st_mode) == 0o600
    assert b'"records"' in (work / "s.json").read_bytes()
    assert not [p for p in os.listdir(work) if p.endswith(".tmp")]
    # Inside the output directory (created by the run) is fine, next to the three outputs.
    assert main(["pair", "in.jsonl", "-o", "out2", "-q", "--summary-json", "out2/summary.json"]) == 0
    assert sorted(os.listdir(work / "out2")) == [
        "dead_letter.jsonl", "orphans.jsonl", "pairs.jsonl", "summary.json",
    ]  # fmt: skip


def test_out_that_is_a_regular_file_is_refused_with_exit_2(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "out").write_text("a file")
    err = _refused(capsys)
    assert "--out out" in err and "not a directory" in err
    assert (work / "out").read_text() == "a file"


def test_closed_stdout_ends_quietly_with_141(work: Path) -> None:
    """`pair ... | head`: the reader is gone before the summary is printed (the read end of the
    pipe is closed before the child starts, so every write to stdout fails: deterministic)."""
    r, w = os.pipe()
    os.close(r)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "stream_pairer", "pair", "in.jsonl", "-o", "out"],
            check=False, stdout=w, stderr=subprocess.PIPE, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=work,
        )  # fmt: skip
    finally:
        os.close(w)
    assert done.returncode == EXIT_BROKEN_PIPE, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert (work / "out" / "pairs.jsonl").stat().st_size > 0  # the outputs were completed first
