"""The compiled core is required: where it is not built, importing it (or running a command that
pairs) fails at once with a message that says what to do, never a traceback or a silent fallback.
Where it is built, it writes the same records as the reference model for every sample log format.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from stream_pairer.core import native
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "tests" / "samples").glob("*.jsonl"))

# A fresh interpreter where `import stream_pairer._native` fails, as it does in an install built
# without a Rust toolchain (sys.modules[name] = None makes the import raise ImportError).
HIDDEN = "import sys; sys.modules['stream_pairer._native'] = None\n"


def _run(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", HIDDEN + code, *argv], env=env, capture_output=True, text=True, check=False
    )


def test_without_the_extension_the_import_says_what_to_do() -> None:
    proc = _run(
        "from stream_pairer.errors import NativeUnavailable\n"
        "try:\n"
        "    import stream_pairer.core.native\n"
        "except NativeUnavailable as err:\n"
        "    assert isinstance(err, ImportError)\n"
        "    print(err)\n"
        "else:\n"
        "    raise AssertionError('imported without the extension')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "not built" in proc.stdout
    assert "pip install" in proc.stdout and "rustup" in proc.stdout and "dev_native.sh" in proc.stdout


def test_pair_without_the_extension_exits_2_with_one_line(tmp_path: Path) -> None:
    argv = ["pair", *map(str, SAMPLES), "--out", str(tmp_path / "out"), "-q"]
    proc = _run("from stream_pairer.cli.app import main\nsys.exit(main(sys.argv[1:]))\n", *argv)
    assert proc.returncode == 2
    assert proc.stderr.startswith("stream-pairer: stream_pairer._native, the compiled core, is not built")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_every_sample_format_gives_the_same_records(tmp_path: Path) -> None:
    """Every sample log (the fast path's shapes and the ones it hands to Python, re-sent history
    included), one after the other through one engine: the same bytes, summary and coverage."""
    cfg = EngineConfig(call_timeout_ms=5_000)
    py = Pipeline(Engine(cfg))
    nat = native.NativePipeline(cfg)
    n = 0
    for path in SAMPLES:
        for line_no, line in enumerate(path.read_bytes().splitlines(), 1):
            if not line.strip():
                continue
            src = {"file": path.name, "line": line_no}
            want = [orjson.dumps(r) for r in py.feed(line, src, key=path.name)]
            assert nat.feed(line, src, key=path.name) == want, f"{path.name}:{line_no}"
            n += len(want)
    want = [orjson.dumps(r) for r in py.flush("end_of_input", result_reason="no_call")]
    assert nat.flush("end_of_input", result_reason="no_call") == want
    assert nat.summary.as_dict() == py.summary.as_dict()
    assert n > 20
    assert nat.core.fast_records > 0 and sum(nat.fallthrough.values()) > 0  # both paths were taken


@pytest.mark.parametrize("name", ["bedrock.jsonl", "gemini.jsonl", "mcp.jsonl"])
def test_stream_format_samples_take_the_fast_path(name: str) -> None:
    """The Bedrock, Gemini and MCP sample logs (written from each format's public docs): the same
    bytes as the reference model, and every line that carries a tool event is read by the compiled
    core itself; only lines without one (prompts, `initialize`, notifications) go to Python."""
    from stream_pairer.core.formats import parse_record  # noqa: PLC0415

    path = REPO / "tests" / "samples" / name
    py = Pipeline(Engine())
    nat = native.NativePipeline()
    with_events = 0
    for line_no, line in enumerate(path.read_bytes().splitlines(), 1):
        src = {"file": name, "line": line_no}
        handed_over = sum(nat.fallthrough.values())
        want = [orjson.dumps(r) for r in py.feed(line, src, key=name)]
        assert nat.feed(line, src, key=name) == want, f"{name}:{line_no}"
        carries_events = bool(parse_record(line, src, key=name))
        with_events += carries_events
        assert sum(nat.fallthrough.values()) == handed_over + (not carries_events), f"{name}:{line_no}"
    want = [orjson.dumps(r) for r in py.flush("end_of_input", result_reason="no_call")]
    assert nat.flush("end_of_input", result_reason="no_call") == want
    assert nat.summary.as_dict() == py.summary.as_dict()
    assert with_events >= 4 and nat.core.fast_records == with_events
    assert set(nat.fallthrough) <= {"no_events"}
