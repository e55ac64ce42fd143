"""Property: `parse_record` on ANY input returns a list of well-formed ToolEvents or raises
FormatError; never another exception. A stray TypeError/KeyError here would crash the consumer
loop (or, worse, be caught generically and lose the record's precise dead-letter reason).

Inputs: arbitrary bytes, arbitrary JSON built from the keys and values the parsers look at (so
that the dispatch branches are actually reached), and the sample records with one value anywhere
replaced by a value of another type, deleted, or the bytes damaged.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_pairer.core.formats import FORMATS, FormatConfig, parse_record
from stream_pairer.core.model import CALL, RESULT, FormatError, ToolEvent, format_ts
from tests.core.formats_helpers import DEAD_LETTER_REASONS, SAMPLES, family_records

REASONS = DEAD_LETTER_REASONS
SRC = {"file": "fuzz.jsonl", "line": 1}

KEYS = [
    "type", "role", "content", "message", "tool_calls", "function", "custom", "function_call", "id",
    "call_id", "tool_use_id", "tool_call_id", "name", "input", "arguments", "args", "response",
    "jsonrpc", "method", "params", "result", "error", "isError", "structuredContent", "output",
    "choices", "delta", "candidates", "parts", "functionCall", "functionResponse", "function_call",
    "toolUse", "toolResult", "toolUseId", "status", "is_error", "conversation_id", "sessionId",
    "session_id", "thread_id", "conversation", "metadata", "ts", "timestamp", "created_at", "created",
    "createTime",
]  # fmt: skip
STRINGS = [
    "tool_call", "tool_result", "tool_use", "server_tool_use", "mcp_tool_use", "web_search_tool_result",
    "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", "mcp_call",
    "message", "response", "assistant", "user", "tool", "function", "model", "summary", "system",
    "tools/call", "tools/list", "2.0", "success", "error", "text", "  ", "", " id ", "2025-01-01T00:00:00Z",
    '{"a": 1}', "{", "\x00", "\ud7ff", "\U0001d54f" * 3,
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(STRINGS)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)
json_objects = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8)


def check(raw: bytes, key: str | None = None, config: FormatConfig | None = None) -> None:
    kw: dict[str, Any] = {"key": key}
    if config is not None:
        kw["config"] = config
    try:
        events = parse_record(raw, SRC, **kw)
    except FormatError as err:
        assert err.reason in REASONS
        assert isinstance(err.detail, str) and err.detail
        return
    assert isinstance(events, list)
    for i, ev in enumerate(events):
        check_event(ev, i, len(raw), len(events))


def check_event(ev: ToolEvent, block: int, n_bytes: int, n_events: int) -> None:
    assert isinstance(ev, ToolEvent)
    assert ev.type in (CALL, RESULT)
    assert isinstance(ev.conversation_id, str) and ev.conversation_id == ev.conversation_id.strip()
    assert ev.conversation_id
    assert ev.id is None or (isinstance(ev.id, str) and ev.id and ev.id == ev.id.strip())
    assert ev.name is None or (isinstance(ev.name, str) and ev.name)
    if ev.is_call:
        assert ev.name is not None
    assert ev.is_error in (None, True, False)
    assert ev.format in FORMATS
    assert ev.block == block
    assert ev.size == max(n_bytes // n_events, 1)
    assert ev.source == SRC
    if ev.ts_ms is not None:
        assert isinstance(ev.ts_ms, float)
        format_ts(ev.ts_ms)  # renderable
    orjson.dumps(ev.to_side())  # the output record can be written


@given(st.binary(max_size=300))
def test_arbitrary_bytes(raw: bytes) -> None:
    check(raw)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.none() | st.text(max_size=5))
def test_arbitrary_json(value: Any, key: str | None) -> None:
    check(orjson.dumps(value), key)


@settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(json_objects, st.none() | st.text(max_size=5))
def test_arbitrary_objects_with_known_keys(value: dict[str, Any], key: str | None) -> None:
    check(orjson.dumps(value), key)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_values_inside_every_wrapper(value: Any) -> None:
    """The same junk where each format expects its structure, to reach the inner parsers."""
    c = "conversation_id"
    for rec in [
        {c: "c", "message": value},
        {c: "c", "message": {"role": "assistant", "content": value}},
        {c: "c", "role": "user", "content": [value]},
        {
            c: "c",
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": value, "is_error": value}],
        },
        {c: "c", "role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": value}]},
        {c: "c", "role": "assistant", "tool_calls": value},
        {c: "c", "role": "assistant", "tool_calls": [value]},
        {c: "c", "role": "assistant", "tool_calls": [{"id": value, "function": value}]},
        {c: "c", "role": "assistant", "function_call": value},
        {c: "c", "choices": value},
        {c: "c", "choices": [{"message": value}]},
        {c: "c", "candidates": [{"content": {"parts": value}}]},
        {c: "c", "parts": [{"functionCall": value}, {"functionResponse": value}]},
        {c: "c", "output": value},
        {c: "c", "output": [value]},
        {c: "c", "output": {"message": value}},
        {c: "c", "content": [{"toolUse": value}, {"toolResult": value}]},
        {c: "c", "jsonrpc": "2.0", "id": value, "method": "tools/call", "params": value},
        {c: "c", "jsonrpc": "2.0", "id": 1, "result": value},
        {c: "c", "jsonrpc": "2.0", "id": 1, "error": value},
        {c: "c", "type": "function_call", "call_id": value, "name": value, "arguments": value},
        {c: "c", "type": "mcp_call", "id": "x", "name": "n", "output": value, "error": value},
        {c: value, "type": "tool_call", "name": "n"},
        {"conversation": value, "type": "tool_result"},
        {c: "c", "type": "tool_call", "name": "n", "ts": value},
        {c: "c", "type": "tool_call", "name": "n", "timestamp": value, "message": value},
        {"type": "assistant", "sessionId": value, "message": value},
    ]:
        check(orjson.dumps(rec), key="k")


def _sample_records() -> list[Any]:
    records = [
        orjson.loads(line) for p in sorted(SAMPLES.glob("*.jsonl")) for line in p.read_bytes().splitlines()
    ]
    return records + [orjson.loads(r) for r in family_records() if r.startswith(b"{")]


SAMPLE_RECORDS = _sample_records()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    if delete and not rest:
        del copy[head]
    else:
        copy[head] = _replace(copy[head], rest, new, delete)
    return copy


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_sample_records_with_one_value_changed(data: st.DataObject) -> None:
    """Wrong types everywhere: any one value of a real record replaced by any JSON value."""
    rec = data.draw(st.sampled_from(SAMPLE_RECORDS))
    path = data.draw(st.sampled_from(_paths(rec)))
    new = data.draw(json_values)
    delete = bool(path) and data.draw(st.booleans())
    check(orjson.dumps(_replace(rec, path, new, delete)), key=data.draw(st.none() | st.just("k")))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_sample_bytes_damaged(data: st.DataObject) -> None:
    raw = bytearray(orjson.dumps(data.draw(st.sampled_from(SAMPLE_RECORDS))))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(raw)))
    check(bytes(raw[:cut]))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(SAMPLE_RECORDS),
    st.integers(1, 1100),
    st.sampled_from(["ts", "message", "content", "id", "input", "arguments", "params"]),
)
def test_deep_nesting_and_huge_strings(rec: dict[str, Any], depth: int, field: str) -> None:
    # built as text: orjson itself cannot write more than 254 levels
    deep = b'[{"content":' * (depth // 2) + b'"x"' + b"}]" * (depth // 2)
    body = orjson.dumps({k: v for k, v in rec.items() if k != field})
    check(body[:-1] + b',"' + field.encode() + b'":' + deep + b"}", key="k")
    marker = "\u0000deep\u0000"
    for path in _paths(rec)[1:]:  # also at every place inside the record where `field` is
        if path[-1] == field:
            text = orjson.dumps(_replace(rec, path, marker, False))
            check(text.replace(orjson.dumps(marker), deep, 1), key="k")
    huge = " " + "z" * 300_000 + " "
    check(orjson.dumps({**rec, field: huge}), key="k")
    check(orjson.dumps({**rec, field: huge}), key="k", config=FormatConfig(max_record_bytes=1000))


@given(
    st.sampled_from(["ts", "timestamp", "created_at", "created", "createTime"]),
    st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.text(max_size=40)
    | st.datetimes().map(lambda d: d.isoformat())
    | st.floats(min_value=0, max_value=1e21).map(str),
)
def test_any_timestamp_value_is_read_or_rejected(field: str, value: Any) -> None:
    """An accepted timestamp is always renderable (format_ts) by the output writer."""
    check(orjson.dumps({"conversation_id": "c", "type": "tool_call", "name": "n", field: value}))
