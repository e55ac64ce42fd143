"""Discovery (formats/discover.py): what no reader claims is looked into for what the families have
in common, paired by id only, labelled `discovered`; and a record it cannot make sense of is an
`unknown_shape` dead letter that says what was seen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_pairer.cli.app import main
from stream_pairer.core.formats import FormatError, parse_record
from stream_pairer.core.formats.discover import MAX_DEPTH
from tests.reference.engine import Engine
from tests.reference.engines import pair_on
from tests.reference.pipeline import Pipeline

SRC = {"file": "x.jsonl", "line": 1}


def _read(record: Any, key: str | None = "conv") -> list[Any]:
    return parse_record(orjson.dumps(record), SRC, key=key)


def _explain(record: Any) -> str:
    with pytest.raises(FormatError) as err:
        _read(record)
    assert err.value.reason == "unknown_shape"
    return err.value.detail


# Shapes no reader claims (in-house agent logs), one record each: a call and the result that
# points back at its id. (Families that now have a reader, such as LangChain, Google ADK and the
# Vercel AI SDK's messages, are read by it instead: see the test after this one.)
CALL_EVENT = {
    "event": "tool_started",
    "invocation": {"callId": "call_7", "function": "add", "kwargs": '{"a": 1}'},
}
RESULT_EVENT = {"event": "tool_finished", "invocation": {"callId": "call_7", "result": "2"}}
STEP_CALL = {"step": {"invoke": {"tool": "weather", "params": {"city": "Oslo"}, "call_id": "inv-1"}}}
STEP_RESULT = {"step": {"reply": {"call_id": "inv-1", "output": {"c": 4}}}}
# A message list nested under a key no reader knows; the tool-role message's `id` names its call.
NESTED_CALL = {
    "transcript": {"turns": [{"role": "assistant", "requests": [{"id": "tr-1", "tool": "f", "args": {}}]}]}
}
NESTED_RESULT = {"transcript": {"turns": [{"role": "tool", "id": "tr-1", "content": {"r": 1}}]}}


@pytest.mark.parametrize(
    ("call", "result", "call_id", "name", "payload", "content"),
    [
        (CALL_EVENT, RESULT_EVENT, "call_7", "add", {"a": 1}, "2"),
        (STEP_CALL, STEP_RESULT, "inv-1", "weather", {"city": "Oslo"}, {"c": 4}),
        (NESTED_CALL, NESTED_RESULT, "tr-1", "f", {}, {"r": 1}),
    ],
)
def test_unnamed_families_pair_by_id_labelled_discovered(
    call: Any, result: Any, call_id: str, name: str, payload: Any, content: Any
) -> None:
    (c,) = _read(call)
    (r,) = _read(result)
    assert (c.type, c.id, c.name, c.payload, c.format) == ("tool_call", call_id, name, payload, "discovered")
    assert (r.type, r.id, r.payload, r.format) == ("tool_result", call_id, content, "discovered")
    pipeline = Pipeline(Engine())
    out = pipeline.feed(orjson.dumps(result), SRC, key="k") + pipeline.feed(orjson.dumps(call), SRC, key="k")
    (pair,) = out  # result first: it waited for its call by id
    assert (pair["kind"], pair["match"], pair["call"]["format"]) == ("pair", "id", "discovered")
    assert pipeline.summary.events_by_format == {"discovered": 2}


# Records of families that were once only discovered (before issue 24's readers): each is now read
# by its own reader, under its own format, and never looked into by discovery.
LANGCHAIN_RESULT = {
    "type": "tool",
    "content": "2",
    "tool_call_id": "call_7",
    "name": "add",
    "status": "success",
}
ADK_CALL = {
    "author": "agent",
    "content": {"parts": [{"function_call": {"id": "adk-1", "name": "f", "args": {}}}]},
}
ADK_RESULT = {
    "author": "agent",
    "content": {"parts": [{"function_response": {"id": "adk-1", "name": "f", "response": {"r": 1}}}]},
}
VERCEL_CALL = {
    "role": "assistant",
    "content": [{"type": "tool-call", "toolCallId": "tc1", "toolName": "weather", "input": {"city": "Oslo"}}],
}
VERCEL_RESULT = {
    "role": "tool",
    "content": [
        {
            "type": "tool-result",
            "toolCallId": "tc1",
            "toolName": "weather",
            "output": {"type": "json", "value": 4},
        }
    ],
}


@pytest.mark.parametrize(
    ("records", "family", "expected"),
    [
        ([LANGCHAIN_RESULT], "langchain", [("tool_result", "call_7")]),
        ([ADK_CALL, ADK_RESULT], "adk", [("tool_call", "adk-1"), ("tool_result", "adk-1")]),
        ([VERCEL_CALL, VERCEL_RESULT], "vercel_ai", [("tool_call", "tc1"), ("tool_result", "tc1")]),
    ],
)
def test_families_with_a_reader_are_read_by_it_not_discovered(
    records: list[Any], family: str, expected: list[tuple[str, str]]
) -> None:
    events = [ev for record in records for ev in _read(record)]
    assert [(ev.type, ev.id) for ev in events] == expected
    assert {ev.format for ev in events} == {family}
    pipeline = Pipeline(Engine())
    out = [r for record in records for r in pipeline.feed(orjson.dumps(record), SRC, key="k")]
    assert all(p["match"] == "id" for p in out if p["kind"] == "pair")
    assert pipeline.summary.events_by_format == {family: len(expected)}


def test_a_list_of_ids_gives_one_result_per_id_and_a_whole_invocation_both_sides() -> None:
    evs = _read({"step": {"observation": "done", "tool_call_ids": ["a", "b"]}})
    assert [(e.type, e.id, e.payload) for e in evs] == [
        ("tool_result", "a", "done"),
        ("tool_result", "b", "done"),
    ]
    evs = _read({"span": {"id": "t1", "tool": "search", "args": {"q": 1}, "result": [3], "status": "error"}})
    assert [(e.type, e.id, e.is_error) for e in evs] == [
        ("tool_call", "t1", None),
        ("tool_result", "t1", True),
    ]


def test_inside_a_document_json_text_and_metadata() -> None:
    doc = {
        "trajectory": [
            {
                "role": "assistant",
                "text": "x",
                "tool_calls": [{"id": "c1", "function": {"name": "ls", "arguments": "{}"}}],
            },
            {"role": "tool", "id": "c1", "content": "a.py"},  # a tool-role message's id names its call
            {"http": {"body": '{"content": "ok", "callId": "c2", "ts": "2025-01-01T00:00:05Z"}'}},
            {"observation": "run", "content": "out", "tool_call_metadata": {"tool_call_id": "c3"}},
        ]
    }
    evs = _read(doc)
    assert [(e.type, e.id) for e in evs] == [
        ("tool_call", "c1"),
        ("tool_result", "c1"),
        ("tool_result", "c2"),  # found in JSON text inside a string
        ("tool_result", "c3"),  # its call id in a metadata object beside it
    ]
    assert evs[2].ts_ms == 1735689605000.0  # its own time


def test_a_record_of_an_unknown_type_is_looked_into_and_else_still_skipped() -> None:
    (ev,) = _read(
        {"type": "agent_step", "action": {"tool_name": "grep", "params": {"p": "x"}, "call_id": "g1"}}
    )
    assert (ev.id, ev.name, ev.format) == ("g1", "grep", "discovered")
    pipeline = Pipeline(Engine())
    assert pipeline.feed(b'{"type": "heartbeat", "n": 1}', SRC, key="k") == []
    assert pipeline.summary.skipped_types == {"heartbeat": 1}


def test_named_readers_are_never_second_guessed() -> None:
    (ev,) = _read(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}
    )
    assert ev.format == "anthropic"


def test_idless_look_alikes_are_reported_not_paired() -> None:
    detail = _explain({"kind": "step", "calls": [{"tool": "grep", "input": {"pattern": "x"}}]})
    assert "1 call-like object(s) (a tool name and arguments) without an id: not paired by guess" in detail


def test_the_walk_is_bounded() -> None:
    deep: Any = {"tool_name": "x", "params": {}, "call_id": "deep"}
    for _ in range(MAX_DEPTH + 5):
        deep = {"n": deep}
    assert "no tool call or result was found" in _explain(deep)
    shallow: Any = {"tool_name": "x", "params": {}, "call_id": "ok"}
    for _ in range(MAX_DEPTH - 2):
        shallow = {"n": shallow}
    assert [e.id for e in _read(shallow)] == ["ok"]


def test_repeated_copies_are_counted_once() -> None:
    pipeline = Pipeline(Engine())
    rec = orjson.dumps({"history": [STEP_CALL]})
    pipeline.feed(rec, SRC, key="k")
    pipeline.feed(rec, SRC, key="k")  # the next request repeats the history
    assert pipeline.summary.events == {"tool_call": 1} and pipeline.summary.duplicate_copies == 1


# ------------------------------------------------------------------------------ never FIFO


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(8)), st.sets(st.integers(0, 3), max_size=4))
def test_an_id_is_never_paired_by_position(order: list[int], unanswered: set[int]) -> None:
    """Calls 0..3 and results 0..3 (some missing), in any order: every pair is by id and joins a
    call with its own result; what has no partner stays an orphan."""
    events = [{"ev": {"toolCallId": f"id{i}", "toolName": "t", "args": {"i": i}}} for i in range(4)]
    events += [{"ev": {"toolCallId": f"id{i}", "output": i}} for i in range(4)]
    pipeline = Pipeline(Engine())
    out = []
    for k in order:
        if k >= 4 and k - 4 in unanswered:
            continue
        out += pipeline.feed(orjson.dumps(events[k]), SRC, key="k")
    out += pipeline.flush("end_of_input", "no_call")
    pairs = [r for r in out if r["kind"] == "pair"]
    assert all(p["match"] == "id" and p["call"]["arguments"]["i"] == p["result"]["content"] for p in pairs)
    assert len(pairs) == 4 - len(unanswered)
    assert sum(r["kind"] == "orphan_call" for r in out) == len(unanswered)


# ------------------------------------------------------------------------------ explaining


def test_an_unknown_shape_names_its_keys_and_nearest_family() -> None:
    detail = _explain({"conversation_id": "c", "toolUse": {"toolUseId": "x"}})
    assert "nearest known format: bedrock (shares keys conversation_id, toolUse, toolUseId" in detail
    assert "keys seen: [conversation_id, toolUse, toolUseId]" in detail
    assert "--map FILE" in detail


def test_an_unknown_shape_like_no_family_says_a_mapping_is_needed() -> None:
    detail = _explain({"foo": 1, "bar": {"baz": 2}})
    assert detail.startswith("the record matches no supported format: keys [bar, foo]")
    assert "nearest" not in detail
    assert "keys seen: [bar, baz, foo]; to read this shape, write a mapping (--map FILE" in detail


def test_a_discovered_file_audits_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "agent.jsonl"
    lines = [CALL_EVENT, STEP_CALL, {"foo": 1}, RESULT_EVENT, {"ev": {"toolCallId": "zz", "output": 1}}]
    log.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    out = tmp_path / "out"
    for engine in ("python", "native"):
        with pair_on(engine):  # the reference model (tests/reference) in place of the core, then the core
            code = main(["pair", str(log), "--out", str(out), "--overwrite"])
        printed = capsys.readouterr()
        assert code == 0
        assert "format discovered" in printed.out and "(ok)" in printed.out
        kinds = sorted(
            orjson.loads(x)["kind"] for f in out.glob("*.jsonl") for x in f.read_bytes().splitlines()
        )
        assert kinds == ["dead_letter", "orphan_call", "orphan_result", "pair"]
        assert main(["audit", "--input", str(log), "--outputs", str(out), "-q"]) == 0
        capsys.readouterr()


def test_discovered_events_have_their_own_metric_series() -> None:
    from stream_pairer.ops.metrics import Metrics  # noqa: PLC0415 - the sidecar's observer

    metrics = Metrics()
    pipeline = Pipeline(Engine(), observer=metrics)
    pipeline.feed(orjson.dumps(STEP_CALL), SRC, key="k")
    pipeline.feed(orjson.dumps(STEP_RESULT), SRC, key="k")
    sample = metrics.registry.get_sample_value
    assert sample("stream_pairer_events_read_total", {"format": "discovered", "type": "tool_call"}) == 1
    assert sample("stream_pairer_events_read_total", {"format": "discovered", "type": "tool_result"}) == 1
    assert sample("stream_pairer_records_read_total", {"format": "discovered"}) == 2


def test_the_discovered_sample_pairs_as_a_reader_would() -> None:
    """tests/samples/discovered.jsonl: shapes no reader claims: an in-house agent's steps (calls
    under `step.invoke`, results and a failure under `step.reply`), a message list nested under an
    unknown key (a tool-role message's `id` names its call), callback events of a `type` no reader
    knows, and an in-house span logged whole."""
    from tests.core.formats_helpers import sample_lines  # noqa: PLC0415

    pipeline = Pipeline(Engine())
    out: list[dict[str, Any]] = []
    for n, raw in enumerate(sample_lines("discovered.jsonl"), 1):
        out += pipeline.feed(raw, {"file": "discovered.jsonl", "line": n}, key="file")
    out += pipeline.flush("end_of_input", "no_call")
    pairs = sorted(
        (p["conversation_id"], p["call"]["id"], p["match"], p["result"]["is_error"])
        for p in out
        if p["kind"] == "pair"
    )
    assert pairs == [
        ("cb-9", "toolu_cb_1", "id", False),  # status "success"
        ("inhouse-3", "sp-1", "id", False),  # status "ok"
        ("th-agent-1", "call_bergen_2", "id", None),
        ("th-agent-1", "call_oslo_1", "id", True),  # its `error` is the result
        ("tr-sess-42", "tr-fc-7", "id", None),
    ]
    assert [r["kind"] for r in out if r["kind"] != "pair"] == []
    assert pipeline.summary.events_by_format == {"discovered": 10}


def test_the_summary_says_discovered_events_are_guesses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "a.jsonl"
    log.write_bytes(orjson.dumps(STEP_CALL) + b"\n")
    assert main(["pair", str(log), "--out", str(tmp_path / "out")]) == 0
    assert "note: `discovered` events are guesses" in capsys.readouterr().out
    log.write_bytes(b'{"conversation_id": "c", "type": "tool_call", "id": "x", "name": "n"}\n')
    assert main(["pair", str(log), "--out", str(tmp_path / "out"), "--overwrite"]) == 0
    assert "discovered" not in capsys.readouterr().out
