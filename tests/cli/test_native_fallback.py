"""Where the compiled core is not built, stream-pairer runs on the Python engine; where it is, it
writes the same records as the Python pipeline for every sample log format.

The first tests need no extension at all (they hide it); the comparison needs it built.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from stream_pairer.core import native
from stream_pairer.core.engine import Engine, EngineConfig
from stream_pairer.core.pipeline import Pipeline

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "tests" / "samples").glob("*.jsonl"))

# A `pair` run in a fresh interpreter where `import stream_pairer._native` fails, as it does in an
# install built without a Rust toolchain (sys.modules[name] = None makes the import raise).
NO_EXTENSION = (
    "import sys; sys.modules['stream_pairer._native'] = None\n"
    "from stream_pairer.core import native\n"
    "assert not native.available()\n"
    "try:\n"
    "    native.NativePipeline()\n"
    "except native.NativeUnavailable:\n"
    "    pass\n"
    "else:\n"
    "    raise AssertionError('NativePipeline without the extension')\n"
    "from stream_pairer.cli.app import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_without_the_extension_nothing_native_is_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_Core", None)
    assert not native.available()
    with pytest.raises(native.NativeUnavailable, match="not built"):
        native.NativePipeline()


def test_pair_runs_without_the_extension(tmp_path: Path) -> None:
    """The whole file job in an interpreter that cannot import the extension: it pairs."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = ["pair", *map(str, SAMPLES), "--out", str(tmp_path), "-q"]
    proc = subprocess.run(
        [sys.executable, "-c", NO_EXTENSION, *argv], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pairs.jsonl").read_bytes().count(b"\n") > 10


@pytest.mark.skipif(not native.available(), reason="stream_pairer._native is not built")
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


@pytest.mark.skipif(not native.available(), reason="stream_pairer._native is not built")
@pytest.mark.parametrize("name", ["bedrock.jsonl", "gemini.jsonl", "mcp.jsonl"])
def test_stream_format_samples_take_the_fast_path(name: str) -> None:
    """The Bedrock, Gemini and MCP sample logs (written from each format's public docs): the same
    bytes as the Python pipeline, and every line that carries a tool event is read by the compiled
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
