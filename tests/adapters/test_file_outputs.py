"""`pair --out` cannot destroy data (issue 14, item 8): an output directory holding an input is
refused before anything is written, outputs appear only when a run completes (temporary files
renamed at the end), a symlink at an output path is refused and its target left untouched, outputs
are private (0600), and a missing input is found before any output is written."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stream_pairer.adapters.outputs import OutputWriter
from stream_pairer.cli.app import main
from stream_pairer.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"
OUTPUTS = ("pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl")


def test_out_dir_holding_an_input_is_refused_and_the_input_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["pair", str(EXAMPLE), "--out", str(out), "-q"]) == 0
    pairs = out / "pairs.jsonl"
    before = pairs.read_bytes()
    assert before  # the scenario of the issue: re-pair a previous output into its own directory
    capsys.readouterr()
    assert main(["pair", str(pairs), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "refusing --out" in err and err.count("\n") == 0
    assert pairs.read_bytes() == before
    # Through a symlinked spelling of the same directory, too.
    alias = tmp_path / "alias"
    alias.symlink_to(out)
    assert main(["pair", str(pairs), "--out", str(alias), "-q"]) == 2
    assert pairs.read_bytes() == before


def test_outputs_are_private_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    old = os.umask(0o022)
    try:
        assert main(["pair", str(EXAMPLE), "--out", str(out), "-q"]) == 0
    finally:
        os.umask(old)
    for name in OUTPUTS:
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)


def test_a_failed_run_leaves_the_previous_outputs_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["pair", str(EXAMPLE), "--out", str(out), "-q"]) == 0
    before = {name: (out / name).read_bytes() for name in OUTPUTS}
    with pytest.raises(RuntimeError), OutputWriter(out) as writer:
        writer.write([b'{"kind":"pair","half":"written"}'])
        raise RuntimeError("the run failed half way")
    assert {name: (out / name).read_bytes() for name in OUTPUTS} == before
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)  # temporaries removed


def test_symlink_at_an_output_path_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "pairs.jsonl").symlink_to(victim)
    assert main(["pair", str(EXAMPLE), "--out", str(out), "-q"]) == 2  # not empty
    assert main(["pair", str(EXAMPLE), "--out", str(out), "-q", "--overwrite"]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious\n"
    assert (out / "pairs.jsonl").is_symlink()
    assert [p.name for p in out.iterdir()] == ["pairs.jsonl"]  # nothing else written
    with pytest.raises(InputError, match="symbolic link"):
        OutputWriter(out)


def test_every_input_is_checked_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["pair", str(EXAMPLE), str(tmp_path / "typo.jsonl"), "--out", str(out), "-q"]) == 1
    assert "typo.jsonl" in capsys.readouterr().err
    assert not out.exists()
