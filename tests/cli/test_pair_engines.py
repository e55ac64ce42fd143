"""`stream-pairer pair` on the compiled core writes the same files as on the reference model.

The whole file job (reader, session ids of Codex logs, oversize lines refused unread, documents,
the end-of-input flush, the summary) on the examples and every sample log, once on the compiled
core (the command as shipped) and once with the reference model (tests/reference) monkeypatched in
place of the core: the three output files must be byte for byte equal. The `default` case runs
the command's own tagging settings (outcome and failure tags included); the `off` case runs both
with no tagger (a test-only patch of the command's tagger factory).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_pairer import api
from stream_pairer.cli import options
from stream_pairer.cli.app import main
from stream_pairer.cli.commands import pair as pair_command
from tests.reference.engines import reference_pipeline

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "tests" / "samples").glob("*.jsonl"))
DOCUMENTS = sorted((REPO / "tests" / "samples" / "documents").glob("*.json"))
EXAMPLES = [REPO / "examples" / "mixed.jsonl"]
OUTPUTS = ("pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl")


def _default_tagger() -> Any:
    args = argparse.ArgumentParser()
    pair_command.add_arguments(args)
    return options.tagger_from_args(args.parse_args(["x", "--out", "o"]))


def _oversize(tmp_path: Path) -> Path:
    """A log with a line over --max-record-bytes between readable ones (the reader's reject path)."""
    path = tmp_path / "oversize.jsonl"
    call = {"conversation_id": "big", "type": "tool_call", "id": "a", "name": "t", "ts": 1_750_000_000_000}
    result = {"conversation_id": "big", "type": "tool_result", "id": "a", "content": "x" * 5000}
    path.write_bytes(orjson.dumps(call) + b"\n" + orjson.dumps(result) + b"\n" + b"{not json\n")
    return path


def _run(engine: str, inputs: list[Path], out: Path, extra: list[str]) -> dict[str, Any]:
    """`pair` on the compiled core (`native`) or with the reference model in its place (`python`)."""
    summary = out.with_suffix(".summary.json")
    argv = ["pair", *map(str, inputs), "--out", str(out), "-q"]
    with pytest.MonkeyPatch.context() as mp:
        if engine == "python":
            mp.setattr(api, "NativePipeline", reference_pipeline)
        assert main([*argv, "--summary-json", str(summary), *extra]) == 0
    body: dict[str, Any] = orjson.loads(summary.read_bytes())
    assert "engine" not in body  # one engine: nothing to name
    body.pop("seconds")
    return body


@pytest.mark.parametrize("tagging", ["off", "default"])
@pytest.mark.parametrize(
    ("case", "extra"),
    [
        ("examples", []),
        ("samples", ["--call-timeout", "5"]),
        ("samples", ["--raw", "call"]),
        ("oversize", ["--max-record-bytes", "2000", "--raw", "omit"]),
    ],
)
def test_both_engines_write_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tagging: str, case: str, extra: list[str]
) -> None:
    if tagging == "off":
        monkeypatch.setattr(pair_command, "tagger_from_args", lambda _args: None)
    else:
        assert _default_tagger() is not None
    by_case = {"examples": EXAMPLES, "samples": [*SAMPLES, *DOCUMENTS], "oversize": [_oversize(tmp_path)]}
    inputs = by_case[case]
    py = _run("python", inputs, tmp_path / "py", extra)
    nat = _run("native", inputs, tmp_path / "native", extra)
    assert nat == py
    for name in OUTPUTS:
        assert (tmp_path / "native" / name).read_bytes() == (tmp_path / "py" / name).read_bytes(), name
    assert py["records"] > 0
    if case == "oversize":
        assert py["dead_letters"] == {"too_large": 1, "invalid_json": 1}
        assert py["orphans"] == {"orphan_call:end_of_input": 1}
    else:
        assert (tmp_path / "py" / "pairs.jsonl").stat().st_size > 0


def test_codex_session_ids_reach_the_reader_from_both_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Codex `session_meta` names the conversation of the file's later records (`info`): the
    later records must carry it whichever engine read them."""
    monkeypatch.setattr(pair_command, "tagger_from_args", lambda _args: None)
    codex = REPO / "tests" / "samples" / "codex.jsonl"
    _run("native", [codex], tmp_path / "native", [])
    _run("python", [codex], tmp_path / "py", [])
    pairs = (tmp_path / "native" / "pairs.jsonl").read_bytes()
    assert pairs == (tmp_path / "py" / "pairs.jsonl").read_bytes()
    convs = {orjson.loads(line)["conversation_id"] for line in pairs.splitlines()}
    assert convs and all(not c.endswith("codex.jsonl") for c in convs)  # the session id, not the path


def test_the_engine_option_and_variable_are_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One production pipeline: `--engine` is refused as an unknown option, and the variable that
    used to set its default changes nothing (the outputs are the compiled core's)."""
    with pytest.raises(SystemExit) as err:
        main(["pair", str(EXAMPLES[0]), "--out", str(tmp_path / "a"), "--engine", "python"])
    assert err.value.code == 2
    assert "--engine" in capsys.readouterr().err
    monkeypatch.setenv("STREAM_PAIRER_ENGINE", "python")
    assert main(["pair", str(EXAMPLES[0]), "--out", str(tmp_path / "b")]) == 0
    assert " engine)" not in capsys.readouterr().out  # the summary no longer names one


_T = ("2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z")
_STEAL_CANONICAL = [  # the stranger's probe: an id-less result, then call a2, then a2's own result
    {"conversation_id": "s", "type": "tool_result", "name": "f", "content": "stray, no id", "ts": _T[0]},
    {"conversation_id": "s", "type": "tool_call", "id": "a2", "name": "f", "arguments": {}, "ts": _T[1]},
    {"conversation_id": "s", "type": "tool_result", "call_id": "a2", "content": "real", "ts": _T[2]},
]
_STEAL_ANTHROPIC = [  # the same with Anthropic blocks: an empty tool_use_id is no id
    {"conversation_id": "t", "ts": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "", "content": "stray"}]}},
    {"conversation_id": "t", "ts": "2026-01-01T00:00:01Z", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}},
    {"conversation_id": "t", "ts": "2026-01-01T00:00:02Z", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "real"}]}},
]  # fmt: skip


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("lines", [_STEAL_CANONICAL, _STEAL_ANTHROPIC], ids=["canonical", "anthropic"])
def test_a_result_whose_id_was_taken_by_a_fifo_pair_is_a_fifo_conflict(
    tmp_path: Path, engine: str, lines: list[dict[str, Any]]
) -> None:
    """An id-less result FIFO-pairs with the next call; that call's own result (the first carrying
    its id) is then an orphan. It is named `fifo_conflict` (the FIFO pair is probably wrong), not
    `duplicate_result` (which claims a second result for an id already paired by id)."""
    log = tmp_path / "steal.jsonl"
    log.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    _run(engine, [log], tmp_path / "out", [])
    pairs = [orjson.loads(x) for x in (tmp_path / "out" / "pairs.jsonl").read_bytes().splitlines()]
    orphans = [orjson.loads(x) for x in (tmp_path / "out" / "orphans.jsonl").read_bytes().splitlines()]
    assert [(p["match"], p["call"]["id"], p["result"]["id"]) for p in pairs] == [
        ("fifo", lines[1].get("id", "t1"), None)
    ]
    assert [(o["kind"], o["reason"], o["event"]["id"]) for o in orphans] == [
        ("orphan_result", "fifo_conflict", pairs[0]["call"]["id"])
    ]
