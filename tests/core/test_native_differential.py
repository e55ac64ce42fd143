"""The compiled core against the Python engine, its executable specification.

For any input (interleavings, reorderings, drops, duplicates, id-less runs, small limits that force
evictions, conversations whose clocks are skewed against each other, undated records, ticks) both
pipelines must give the same output records as bytes, in the same order, and the same summary.
The inputs mix records the fast path reads with ones it must hand to the Python format layer
(other formats, whitespace, escapes or floats orjson would re-encode, odd ids), so both of the
core's entry points and the hand-over between them are compared. The strategies are in
differential_helpers.py; failure tagging's differential tests in test_native_tagging_differential.py.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_pairer import _native
from stream_pairer.core import native
from stream_pairer.core.vocab import RawMode
from tests.core.differential_helpers import STREAM_SHAPES, T0, _iso, _run_both, scenarios
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_same_output_bytes_as_the_python_engine(scenario: tuple[EngineConfig, list[Any]]) -> None:
    _run_both(*scenario)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(well_formed_streams=True))
def test_stream_formats_are_read_by_the_fast_path(scenario: tuple[EngineConfig, list[Any]]) -> None:
    """Bedrock, Gemini and MCP traffic (id-less Gemini calls, MCP `error` and `isError` results,
    Bedrock `status: error`, every envelope): identical bytes, and not one record handed to Python."""
    nat = _run_both(*scenario)
    assert nat.fallthrough == {}
    assert nat.core.fast_records == nat.core.records
    assert set(nat.summary.events_by_format) <= set(STREAM_SHAPES)


@pytest.mark.parametrize("mode", list(RawMode))
def test_bench_data_is_read_by_the_fast_path_and_matches(mode: RawMode) -> None:
    """The benchmark's traffic (bench/datagen.py mix) with limits small enough to evict: identical
    bytes in every --raw mode, and every record read by the fast path (none handed to Python)."""
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import datagen  # noqa: PLC0415

    ds = datagen.generate(60, 3000, drain=True)
    cfg = EngineConfig(
        call_timeout_ms=20_000, max_conversations=40, max_held_bytes=150_000, max_closed_ids=80, raw=mode
    )
    ops = [("feed", (raw, key.decode(), None)) for key, raw in ds.all]
    _run_both(cfg, ops)
    nat = native.NativePipeline(cfg)
    for i, (key, raw) in enumerate(ds.all):
        nat.feed(raw, {"offset": i}, key=key.decode())
    assert nat.fallthrough == {}
    assert nat.core.fast_records == nat.core.records


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_encoding_is_orjsons(x: float) -> None:
    assert _native.dumps_float(x) == orjson.dumps(x)


@given(st.text())
def test_string_encoding_is_orjsons(s: str) -> None:
    assert _native.dumps_str(s) == orjson.dumps(s)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(_json, st.sampled_from(["orjson", "spaced", "ascii"]))
def test_canonical_check_agrees_with_an_orjson_round_trip(value: Any, how: str) -> None:
    """The splice rule: bytes are kept as they are only when orjson would write them back unchanged."""
    try:
        raw = {
            "orjson": lambda: orjson.dumps(value),
            "spaced": lambda: json.dumps(value, ensure_ascii=False).encode(),
            "ascii": lambda: json.dumps(value, separators=(",", ":")).encode(),
        }[how]()
        round_trip = orjson.dumps(orjson.loads(raw))
    except (TypeError, ValueError, OverflowError):
        return  # not JSON orjson reads (an integer beyond 64 bits, an infinity): nothing to compare
    assert _native.is_canonical(raw) == (round_trip == raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"a":2}',  # orjson keeps the last: not the same bytes
        b'{"a":"\\u00e9"}',  # orjson writes the character itself
        b'{"a":"\\/"}',
        b'{"a":1.50}',
        b'{"a":-0}',
        b'{"a":18446744073709551616}',
        b'{"a": 1}',
        orjson.dumps({f"k{i}": i for i in range(40)})[:-1] + b',"k3":0}',  # past the pairwise check
    ],
)
def test_non_canonical_values_are_refused(raw: bytes) -> None:
    assert not _native.is_canonical(raw)


def test_large_objects_without_duplicates_are_canonical() -> None:
    assert _native.is_canonical(orjson.dumps({f"k{i}": [i, {"k1": i}] for i in range(100)}))


FAST = {
    "canonical": {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "n", "arguments": {}},
    "anthropic": {
        "conversation_id": "c",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "n", "input": {}}],
        },
    },
    "claude_code": {
        "type": "user",
        "sessionId": "c",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}],
        },
    },
    "openai_chat": {
        "conversation_id": "c",
        "message": {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "n", "arguments": '{"x":1}'}}
            ],
        },
    },
    "openai_responses": {
        "conversation_id": "c",
        "type": "function_call_output",
        "call_id": "a",
        "output": "ok",
    },
    "openai_legacy": {"conversation_id": "c", "message": {"role": "function", "name": "n", "content": "ok"}},
}


# One record of each stream format and envelope: (record, the format its events are counted under).
STREAM_FAST: dict[str, tuple[dict[str, Any], str]] = {
    "bedrock_bare_call": (
        {
            "conversation_id": "c",
            "role": "assistant",
            "content": [{"text": "x"}, {"toolUse": {"toolUseId": "a", "name": "n", "input": {"q": 1}}}],
        },
        "bedrock",
    ),
    "bedrock_converse_response": (
        {
            "session_id": "c",
            "ts": "2025-02-11T07:30:01.218Z",
            "output": {
                "message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": "a", "name": "n"}}]}
            },
            "stopReason": "tool_use",
        },
        "bedrock",
    ),
    "bedrock_wrapped_error_result": (
        {
            "conversation_id": "c",
            "message": {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "a", "content": [{"text": "no"}], "status": "error"}}
                ],
            },
        },
        "bedrock",
    ),
    "gemini_idless_call": (
        {"conversation_id": "c", "role": "model", "parts": [{"functionCall": {"name": "n", "args": {}}}]},
        "gemini",
    ),
    "gemini_candidates": (
        {
            "conversation_id": "c",
            "createTime": "2025-06-18T13:21:44.809105Z",
            "candidates": [
                {"content": {"role": "model", "parts": [{"functionCall": {"id": "a", "name": "n"}}]}}
            ],
        },
        "gemini",
    ),
    "gemini_wrapped_snake_error": (
        {
            "conversation_id": "c",
            "message": {
                "role": "user",
                "parts": [{"function_response": {"id": None, "name": "n", "response": {"error": "boom"}}}],
            },
        },
        "gemini",
    ),
    "mcp_wrapped_call": (
        {
            "session_id": "c",
            "ts": "2025-06-20T10:00:03.100Z",
            "message": {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "n", "arguments": {}},
            },
        },
        "mcp",
    ),
    "mcp_bare_is_error": (
        {"conversation_id": "c", "jsonrpc": "2.0", "id": "r", "result": {"content": [], "isError": True}},
        "mcp",
    ),
    "mcp_error_member": (
        {"conversation_id": "c", "message": {"jsonrpc": "2.0", "id": 4, "error": {"code": -32602}}},
        "mcp",
    ),
    "openai_bare_tool_message": (
        {"conversation_id": "c", "role": "tool", "tool_call_id": "a", "content": "ok"},
        "openai_chat",
    ),
}


@pytest.mark.parametrize("case", sorted(STREAM_FAST))
def test_each_stream_shape_is_read_without_python(case: str) -> None:
    rec, fmt = STREAM_FAST[case]
    nat = native.NativePipeline()
    raw = orjson.dumps(rec)
    want = [orjson.dumps(r) for r in Pipeline(Engine()).feed(raw, {"line": 1})]
    assert nat.feed(raw, {"line": 1}) == want
    assert nat.fallthrough == {}
    assert nat.summary.events_by_format == {fmt: 1}


@pytest.mark.parametrize("fmt", sorted(FAST))
def test_each_fast_format_is_read_without_python(fmt: str) -> None:
    nat = native.NativePipeline()
    raw = orjson.dumps(FAST[fmt])
    want = [orjson.dumps(r) for r in Pipeline(Engine()).feed(raw, {"line": 1})]
    assert nat.feed(raw, {"line": 1}) == want
    assert nat.fallthrough == {}
    assert nat.summary.events_by_format == {fmt: 1}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (json.dumps(FAST["canonical"]).encode(), "not_canonical"),  # spaces orjson would drop
        (b'{"conversation_id":"c","candidates":[{"content":{"parts":[]}}]}', "no_events"),  # Gemini
        (b'{"conversation_id":"c","choices":[{"message":{"role":"assistant"}}]}', "other_format"),
        # a Vercel AI SDK part in a content array: the walk leaves it to Python's reader
        (
            b'{"conversation_id":"c","role":"assistant","content":[{"type":"tool-call",'
            b'"toolCallId":"a","toolName":"n","input":{}}]}',
            "other_format",
        ),
        # arguments orjson would write differently: decoded by Python
        (
            b'{"conversation_id":"c","output":[{"type":"function_call","call_id":"a","name":"n",'
            b'"arguments":"{\\"x\\": 1}"}]}',
            "arguments",
        ),
        (
            b'{"conversation_id":"c","output":[{"type":"function_call","call_id":true,"name":"n"}]}',
            "field_type",
        ),
        (
            b'{"conversation_id":"c","role":"assistant","content":[{"toolUse":{"toolUseId":"a"}}]}',
            "missing_name",
        ),
        (b'{"conversation_id":"c","role":"user","content":[{"toolResult":{"status":true}}]}', "field_type"),
        (b'{"conversation_id":"c","role":"user","parts":[{"text":"hi"}]}', "no_events"),  # a request start
        (b'{"conversation_id":"c","role":"model","parts":{"functionCall":{"name":"n"}}}', "field_type"),
        (b'{"conversation_id":"c","jsonrpc":"2.0","method":"notifications/progress"}', "no_events"),
        (
            b'{"conversation_id":"c","jsonrpc":"2.0","id":1,"result":{"content":[],"isError":"no"}}',
            "field_type",
        ),
        (b'{"conversation_id":"c","message":{"jsonrpc":"2.0","id":1}}', "unknown_shape"),
        (
            b'{"conversation_id":"c","message":{"jsonrpc":"2.0","id":1,"method":"tools/call"}}',
            "missing_field",
        ),
        (b'{"conversation_id":"c","jsonrpc":"2.0","id":true,"error":{"code":1}}', "field_type"),
        # a bare message whose time would be read from a wire exchange's request: Python's
        (b'{"conversation_id":"c","request":{"ts":1},"jsonrpc":"2.0","id":1,"error":{}}', "other_format"),
        (b'{"conversation_id":"c","type":"tool_call","name":"n","ts":"15 June 2025"}', "ts"),
        (b"[1]", "not_an_object"),
    ],
)
def test_records_handed_to_python_are_counted_by_reason(raw: bytes, reason: str) -> None:
    nat = native.NativePipeline()
    py = Pipeline(Engine())
    assert nat.feed(raw, {"line": 1}) == [orjson.dumps(r) for r in py.feed(raw, {"line": 1})]
    assert nat.fallthrough == {reason: 1}


@pytest.mark.parametrize(
    ("raw", "events"),
    [
        # a Bedrock block beside Anthropic ones: the one content walk reads both kinds
        (
            b'{"conversation_id":"c","role":"assistant","content":[{"type":"text","text":"hi"},'
            b'{"toolUse":{"toolUseId":"a","name":"n","input":{}}},{"type":"tool_use","id":"b","name":"m"}]}',
            2,
        ),
        # a Responses `output` array, bare and wrapped: the one output walk, arguments decoded
        (
            b'{"conversation_id":"c","output":[{"type":"reasoning"},{"type":"function_call","call_id":"a",'
            b'"name":"n","arguments":"{\\"x\\":1}"},{"type":"custom_tool_call","call_id":"b","name":"m",'
            b'"input":"{}"},{"type":"mcp_call","id":"d","name":"k","arguments":"{}","output":"ok"}]}',
            4,
        ),
        (
            b'{"conversation_id":"c","ts":1,"message":{"output":[{"type":"function_call_output",'
            b'"call_id":"a","output":"done"}]}}',
            1,
        ),
    ],
)
def test_walked_arrays_are_read_without_python(raw: bytes, events: int) -> None:
    nat = native.NativePipeline()
    py = Pipeline(Engine())
    want = [orjson.dumps(r) for r in py.feed(raw, {"line": 1})]
    assert nat.feed(raw, {"line": 1}) == want
    assert nat.fallthrough == {}
    assert sum(nat.summary.events_by_format.values()) == events


def test_time_model_scenarios_match() -> None:
    """The issue-11 time model, step by step: conversations hours apart keep their own clocks (no
    cross-conversation timeout), an id-less result written before its call waits the grace and pairs
    FIFO, a clock moved past a deadline fires it, and the processing-time tick closes a quiet one."""
    hour = 3_600_000

    def rec(conv: str, typ: str, ts: int, **kw: Any) -> tuple[bytes, None, None]:
        body = {"conversation_id": conv, "type": typ, "ts": _iso(T0 + ts, "Z"), **kw}
        return orjson.dumps(body), None, None

    cfg = EngineConfig(call_timeout_ms=60_000, result_grace_ms=10_000)
    ops: list[Any] = [
        ("feed", rec("late", "tool_call", 0, id="a", name="read")),
        ("feed", rec("early", "tool_call", 5 * hour, id="b", name="read")),  # hours ahead: no timeout
        ("feed", rec("late", "tool_result", 1_000, id="a", content="ok")),  # still pairs by id
        ("feed", rec("late", "tool_result", 2_000, name="write", content="x")),  # id-less, no call yet
        ("feed", rec("late", "tool_call", 2_500, name="write")),  # takes it: fifo by name
        ("feed", rec("late", "tool_call", 3_000, id="c", name="read")),
        ("feed", rec("late", "tool_result", 200_000, name="shell", content="y")),  # clock passes c's deadline
        ("advance", float(T0)),  # processing time starts: held events count from here
        ("advance", float(T0 + 120_000)),  # quiet for longer than every timeout: all closed
    ]
    _run_both(cfg, ops)
    py = Pipeline(Engine(cfg))
    reasons = []
    for i, (op, arg) in enumerate(ops):
        out = py.feed(arg[0], {"line": i}) if op == "feed" else py.advance(arg)
        reasons += [(r["kind"], r.get("reason") or r.get("fifo_by") or r["match"]) for r in out]
    assert reasons == [
        ("pair", "id"),
        ("pair", "name"),
        ("orphan_call", "timeout"),  # c: its own conversation's clock passed its deadline
        ("orphan_result", "no_call"),  # the tick, oldest processing deadline first: grace 10 s
        ("orphan_call", "timeout"),  # b: timeout 60 s of processing time
    ]


def test_canonical_result_with_id_and_call_id_reads_alike() -> None:
    """On a result `call_id` wins over `id` in both cores (canonical.py)."""
    nat = native.NativePipeline()
    py = Pipeline(Engine())
    lines = [
        b'{"conversation_id":"c","type":"tool_call","id":"k2","name":"t","arguments":{}}',
        b'{"conversation_id":"c","type":"tool_result","id":"evt-99","call_id":"k2","content":"x"}',
    ]
    for n, raw in enumerate(lines):
        got = nat.feed(raw, {"line": n})
        assert got == [orjson.dumps(r) for r in py.feed(raw, {"line": n})]
    assert nat.fallthrough == {}
    assert b'"match":"id"' in got[0]


@pytest.mark.parametrize(
    "source",
    [
        {"topic": "t", "partition": 3, "offset": 7},  # the usual one: keys out of order
        {'z"q': 1, "z": 2, "a\\b": 3, "\u00e9": 4, "\x01": 5, "ü": 6, "\U0001f600": 7},  # escaped, non-ASCII
        {"b": {"y": [1, {"d": 1, "c": 2.5}], "x": None}, "a": [], "c": {}},  # nested, empty
    ],
)
def test_pair_ids_sort_source_keys_as_orjson_does(source: dict[str, Any]) -> None:
    """`pair_id` hashes the source with its keys sorted (OPT_SORT_KEYS): the core sorts unescaped
    keys by their bytes and decodes escaped ones; both must give the Python engine's id."""
    nat = native.NativePipeline()
    py = Pipeline(Engine())
    lines = [
        b'{"conversation_id":"c","type":"tool_call","id":"k","name":"t","arguments":{}}',
        b'{"conversation_id":"c","type":"tool_result","call_id":"k","content":"x"}',
    ]
    for raw in lines:
        got = nat.feed(raw, source)
        assert got == [orjson.dumps(r) for r in py.feed(raw, source)]
    assert orjson.loads(got[0])["kind"] == "pair"


@pytest.mark.parametrize("field", ["conversation_id", "id", "name"])
def test_an_id_over_max_id_bytes_is_the_same_dead_letter(field: str) -> None:
    """--max-id-bytes (issue 13): the fast path hands such a record to Python, which dead-letters it."""
    rec: dict[str, object] = {
        "conversation_id": "c",
        "type": "tool_call",
        "id": "a",
        "name": "n",
        "arguments": {},
    }
    rec[field] = "x" * 2000
    raw = orjson.dumps(rec)
    nat = native.NativePipeline()
    want = [orjson.dumps(r) for r in Pipeline(Engine()).feed(raw, {"line": 1})]
    assert [orjson.loads(w)["kind"] for w in want] == ["dead_letter"]
    assert nat.feed(raw, {"line": 1}) == want
    assert nat.fallthrough == {"long_id": 1}


@pytest.mark.parametrize("raw", list(RawMode))
def test_raw_modes_shape_the_sides_alike(raw: RawMode) -> None:
    """--raw on examples/mixed.jsonl (every format, most through the Python format layer): the same
    bytes from both engines, and `raw` on exactly the sides the mode keeps it on."""
    from pathlib import Path  # noqa: PLC0415

    lines = (Path(__file__).resolve().parents[2] / "examples" / "mixed.jsonl").read_bytes().splitlines()
    cfg = EngineConfig(raw=raw)
    py, nat = Pipeline(Engine(cfg)), native.NativePipeline(cfg)
    got: list[bytes] = []
    for i, line in enumerate(lines):
        if line.strip():
            src = {"file": "mixed.jsonl", "line": i + 1}
            want = [orjson.dumps(r) for r in py.feed(line, src, key="k")]
            out = nat.feed(line, src, key="k")
            assert out == want, i
            got += out
    want = [orjson.dumps(r) for r in py.flush("end_of_input", result_reason="no_call")]
    assert nat.flush("end_of_input", result_reason="no_call") == want
    got += want
    sides = 0
    for rec in map(orjson.loads, got):
        pairs = [(True, rec["call"]), (False, rec["result"])] if rec["kind"] == "pair" else []
        if rec["kind"].startswith("orphan"):
            pairs = [(rec["kind"] == "orphan_call", rec["event"])]
        for is_call, side in pairs:
            sides += 1
            assert ("raw" in side) == raw.keeps(is_call)
    assert sides >= 30 and nat.core.fast_records > 0
