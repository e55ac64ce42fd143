"""Where the compiled core is not built, stream-pairer runs on the Python engine; where it is, the
`pair` command gives the same files with either engine.

The first tests need no extension at all (they hide it); the file comparisons need it built.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stream_pairer.cli.app import main
from stream_pairer.core import native

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted(str(p) for p in (REPO / "tests" / "samples").glob("*.jsonl"))
needs_native = pytest.mark.skipif(not native.available(), reason="stream_pairer._native is not built")

# A `pair` run in a fresh interpreter where `import stream_pairer._native` fails, as it does in an
# install built without a Rust toolchain (sys.modules[name] = None makes the import raise).
NO_EXTENSION = (
    "import sys; sys.modules['stream_pairer._native'] = None\n"
    "from stream_pairer.core import native\n"
    "assert not native.available()\n"
    "from stream_pairer.cli.app import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_without_the_extension_auto_chooses_python_and_native_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native, "_native", None)
    assert not native.available()
    assert native.choose_engine("auto", tagging=False) == "python"
    assert native.choose_engine("auto", tagging=True) == "python"
    with pytest.raises(ValueError, match="not built"):
        native.choose_engine("native", tagging=False)
    with pytest.raises(native.NativeUnavailable):
        native.NativePipeline()


def test_engine_choice_with_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_native", object())  # "built": only its presence is consulted
    assert native.choose_engine("auto", tagging=False) == "native"
    assert native.choose_engine("auto", tagging=True) == "python"  # tagging is Python-only
    assert native.choose_engine("python", tagging=False) == "python"
    with pytest.raises(ValueError, match="--no-tagging"):
        native.choose_engine("native", tagging=True)


def _pair(out: Path, *extra: str, hide_extension: bool = False) -> dict[str, bytes]:
    argv = ["pair", *SAMPLES, "--out", str(out), "-q", *extra]
    if hide_extension:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.run(
            [sys.executable, "-c", NO_EXTENSION, *argv], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
    else:
        assert main(argv) == 0
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_pair_runs_without_the_extension(tmp_path: Path) -> None:
    """The whole file job in an interpreter that cannot import the extension: it pairs."""
    files = _pair(tmp_path / "py", "--no-tagging", hide_extension=True)
    assert files["pairs.jsonl"].count(b"\n") > 10
    assert b'"outcome"' not in files["pairs.jsonl"]


@needs_native
def test_pair_files_are_identical_with_either_engine(tmp_path: Path) -> None:
    """Every sample format (the fast path's and the ones it hands to Python) through the file job:
    the compiled core writes the same bytes as the Python engine, and as an install without it."""
    nat = _pair(tmp_path / "native", "--no-tagging", "--engine", "native", "--call-timeout", "5")
    py = _pair(tmp_path / "python", "--no-tagging", "--engine", "python", "--call-timeout", "5")
    bare = _pair(tmp_path / "bare", "--no-tagging", "--call-timeout", "5", hide_extension=True)
    assert nat == py == bare
    assert nat["pairs.jsonl"].count(b"\n") > 10
    assert nat["orphans.jsonl"].count(b"\n") > 0


@needs_native
def test_native_engine_with_tagging_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pair", *SAMPLES, "--out", str(tmp_path), "-q", "--engine", "native"]) == 2
    assert "--no-tagging" in capsys.readouterr().err
