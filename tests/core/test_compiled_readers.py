"""The compiled readers (canonical, MCP, Bedrock, Gemini, Anthropic, OpenAI) against their oracles (#23).

The package reads those shapes with one reader, in Rust: the fast path on a record's bytes, the
Python format layer through `_native.read_parts` (formats/compiled.py). The Python readers it
used before are the oracle (tests/reference/formats). Every record here goes through both
`parse_record`s (same events, or the same dead letter reason and detail) and through the compiled
pipeline beside the reference pipeline (the same output bytes): the sample logs, the fuzz seeds
with values replaced, and generated records of both shapes in spellings orjson would re-encode,
with fields of every JSON type, wrapped or not, nested past the depth limit.
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
from stream_pairer.core.formats import parse_record
from stream_pairer.core.model import FormatError, ToolEvent
from tests.core.formats_helpers import SAMPLES, family_records
from tests.reference import formats as oracle
from tests.reference.engine import Engine
from tests.reference.pipeline import Pipeline

SRC = {"file": "readers.jsonl", "line": 1}
# A value of every JSON type, and strings a reader trims or refuses.
VALUES: list[Any] = [None, True, False, 0, 7, -3, 1.5, "", "  ", " a ", "a", [], [1], {}, {"k": 1}]
IDS: list[Any] = [None, "a", " b ", "", 1, 1.5, True, [], {"x": "a"}]


def outcome(raw: bytes, read: Any, key: str | None = "k") -> tuple[Any, ...]:
    """What a format layer makes of `raw`: its events as bytes-comparable tuples, or its refusal."""
    try:
        events: list[ToolEvent] = read(raw, SRC, key=key)
    except FormatError as err:
        return ("dead", err.reason, err.detail)
    return tuple(
        (e.type, e.conversation_id, e.id, e.name, orjson.dumps(e.payload), e.ts_ms, e.format, e.block,
         e.is_error, orjson.dumps(e.raw), e.size)
        for e in events
    )  # fmt: skip


def check(records: list[bytes], key: str | None = "k") -> None:
    """Both format layers agree on each record; both pipelines write the same bytes for all."""
    nat = native.NativePipeline()
    ref = Pipeline(Engine())
    for line, raw in enumerate(records, 1):
        assert outcome(raw, parse_record, key) == outcome(raw, oracle.parse_record, key), raw
        src = {"file": "readers.jsonl", "line": line}
        want = [orjson.dumps(r) for r in ref.feed(raw, src, key=key)]
        assert nat.feed(raw, src, key=key) == want, raw
    want = [orjson.dumps(r) for r in ref.flush("end_of_input", result_reason="no_call")]
    assert nat.flush("end_of_input", result_reason="no_call") == want
    assert nat.summary.as_dict() == ref.summary.as_dict()


def spellings(obj: dict[str, Any]) -> list[bytes]:
    """`obj` as orjson writes it and as other writers do: spaces, ASCII escapes, keys reordered,
    a key given twice (the last one counts), exponent floats, a byte order mark."""
    first = orjson.dumps(obj)
    out = [
        first,
        json.dumps(obj).encode(),
        json.dumps(obj, ensure_ascii=True, indent=1).encode(),
        orjson.dumps(dict(reversed(list(obj.items())))),
        b"\xef\xbb\xbf" + first,
        b"  " + first + b"\r\n",
    ]
    if len(first) > 2:
        out.append(b'{"type":"decoy",' + first[1:])  # a duplicate key: orjson keeps the last
        out.append(first.replace(b"1.5", b"15E-1"))
    return out


def test_every_sample_line_reads_the_same() -> None:
    lines = [ln for p in sorted(SAMPLES.glob("*.jsonl")) for ln in p.read_bytes().splitlines() if ln.strip()]
    assert any(b'"jsonrpc"' in ln for ln in lines) and any(b'"tool_call"' in ln for ln in lines)
    check(lines + [r for r in family_records() if r.startswith(b"{")])


# A record of each shape the compiled readers own, with a tool event in it.
BASES: list[dict[str, Any]] = [
    {"conversation_id": "c1", "type": "tool_call", "id": "a", "name": "read", "arguments": {"p": 1.5}},
    {"conversation_id": "c1", "type": "tool_result", "call_id": "a", "content": "ok", "is_error": False},
    {"conversation_id": "c1", "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "n"}},
    {"conversation_id": "c1", "jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": False}},
    {"conversation_id": "c1", "jsonrpc": "2.0", "id": 1, "error": {"code": -1}},
    {
        "conversation_id": "c1",
        "role": "assistant",
        "content": [{"text": "hi"}, {"toolUse": {"toolUseId": "t", "name": "n", "input": {"q": 1}}}],
    },
    {
        "conversation_id": "c1",
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "t", "content": [{"text": "x"}], "status": "error"}}],
    },
    {
        "conversation_id": "c1",
        "output": {"message": {"role": "assistant", "content": [{"toolUse": {"name": "n"}}]}},
    },
    {
        "conversation_id": "c1",
        "role": "model",
        "parts": [
            {"text": "t"},
            {"functionCall": {"id": "g", "name": "n", "args": {}}},
            {"function_call": {"name": "m"}},
        ],
    },
    {
        "conversation_id": "c1",
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "n", "response": {"error": "e"}}},
            {"function_response": {"id": "h"}},
        ],
    },
    {"conversation_id": "c1", "candidates": [{"content": {"parts": [{"functionCall": {"name": "n"}}]}}, {}]},
    {
        "conversation_id": "c1",
        "role": "assistant",
        "content": [{"type": "text", "text": "t"}, {"type": "tool_use", "id": "u", "name": "n", "input": {}}],
    },
    {
        "conversation_id": "c1",
        "role": "assistant",
        "content": [
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {"q": "x"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": "s",
                "content": {"type": "web_search_tool_result_error"},
            },
        ],
    },
    {
        "conversation_id": "c1",
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "u", "content": [{"type": "text"}], "is_error": True}
        ],
    },
    {
        "type": "assistant",
        "sessionId": "s1",
        "timestamp": "2025-06-15T10:00:00.000Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "u", "name": "Bash", "input": {}}],
        },
    },
    {
        "conversation_id": "c1",
        "role": "assistant",
        "content": [
            {"type": "tool-call", "toolCallId": "v", "toolName": "w", "input": {}},
            {"type": "tool_use", "id": "a", "name": "n", "input": {}},
        ],
    },
    {"conversation_id": "c1", "type": "function_call", "call_id": "f", "name": "n", "arguments": '{"a": 1}'},
    {"conversation_id": "c1", "type": "function_call_output", "call_id": "f", "output": "ok"},
    {"conversation_id": "c1", "type": "custom_tool_call", "call_id": "k", "name": "n", "input": "x"},
    {"conversation_id": "c1", "type": "custom_tool_call_output", "call_id": "k", "output": [1]},
    {"conversation_id": "c1", "type": "mcp_call", "id": "m", "name": "n", "arguments": "{}", "output": "o"},
    {
        "conversation_id": "c1",
        "type": "mcp_call",
        "id": "m",
        "name": "n",
        "arguments": "x",
        "error": {"e": 1},
    },
    {
        "conversation_id": "c1",
        "output": [
            {"type": "reasoning"},
            {"type": "function_call", "call_id": "f", "name": "n", "arguments": '{"a":1}'},
            {"type": "mcp_call", "id": "m", "name": "n", "arguments": "{}", "output": "o"},
        ],
    },
    {
        "conversation_id": "c1",
        "role": "assistant",
        "tool_calls": [
            {"id": "o", "type": "function", "function": {"name": "n", "arguments": '{"a": [1, 2.50]}'}},
            {"id": "p", "type": "custom", "custom": {"name": "m", "input": "x"}},
            {"id": "q", "function": "inspect_tool", "arguments": {"a": 1}},
        ],
    },
    {"conversation_id": "c1", "role": "tool", "tool_call_id": "o", "name": "n", "content": "ok"},
    {"conversation_id": "c1", "role": "tool", "tool_call_id": "q", "function": "f", "error": {"type": "x"}},
    {"conversation_id": "c1", "role": "tool", "tool_call_ids": ["o", " ", "p"], "content": "both"},
    {"conversation_id": "c1", "role": "assistant", "function_call": {"name": "n", "arguments": "{}"}},
    {"conversation_id": "c1", "role": "function", "name": "n", "content": "r"},
    {
        "conversation_id": "c1",
        "choices": [{"message": {"role": "assistant", "tool_calls": [{"id": "o", "function": {}}]}}],
    },
    {"conversation_id": "c1", "role": "CHATBOT", "tool_calls": [{"name": "n", "parameters": {"a": 1}}]},
    {"conversation_id": "c1", "type": "tool_call_output_item", "raw_item": {"call_id": "f", "output": "x"}},
    {
        "conversation_id": "c1",
        "type": "tool_call_item",
        "raw_item": {"type": "mcp_call", "id": "m", "name": "n"},
    },
    # a record-level time read from a wire exchange's request beside the event
    {"conversation_id": "c1", "type": "tool_call", "id": "a", "name": "n", "request": {"ts": 1_750_000_000}},
    {"conversation_id": "c1", "type": "function_call", "call_id": "f", "name": "n", "request": {"ts": 5}},
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value nested in `value` (keys of objects, indices of arrays)."""
    items = value.items() if type(value) is dict else enumerate(value) if type(value) is list else []
    out = []
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """`value` with the value at `path` replaced by `new` (removed when `new` is DELETE)."""
    copy = orjson.loads(orjson.dumps(value))
    at = copy
    for k in path[:-1]:
        at = at[k]
    if new is DELETE:
        del at[path[-1]]
    else:
        at[path[-1]] = new
    return copy


DELETE = object()


def one_value_changed() -> list[dict[str, Any]]:
    """Each base record with one value anywhere in it set to each of VALUES, or removed."""
    return [_replaced(base, path, v) for base in BASES for path in _paths(base) for v in [*VALUES, DELETE]]


@pytest.mark.parametrize("wrap", [False, True])
def test_each_value_of_each_shape_reads_the_same(wrap: bool) -> None:
    records = one_value_changed()
    assert len(records) > 1000
    check([orjson.dumps(wrapped(r) if wrap else r) for r in records])
    check([json.dumps(wrapped(r) if wrap else r).encode() for r in records])  # re-encoded first


def canonical_events() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "conversation_id": st.sampled_from(["c1", " c2 ", 5]),
            "type": st.sampled_from(["tool_call", "tool_result"]),
        },
        optional={
            "id": st.sampled_from(IDS),
            "call_id": st.sampled_from(IDS),
            "name": st.sampled_from([*VALUES, "read"]),
            "arguments": st.sampled_from(VALUES),
            "content": st.sampled_from(VALUES),
            "is_error": st.sampled_from(VALUES),
            "ts": st.sampled_from(
                [None, 1_750_000_000, 1.5, "2025-06-15T10:00:00Z", "2025-06-15 10:00", "x", []]
            ),
        },
    )


def mcp_messages() -> st.SearchStrategy[dict[str, Any]]:
    params = st.one_of(
        st.sampled_from(VALUES),
        st.fixed_dictionaries(
            {}, optional={"name": st.sampled_from([*VALUES, "search"]), "arguments": st.sampled_from(VALUES)}
        ),
    )
    result = st.one_of(
        st.sampled_from(VALUES),
        st.fixed_dictionaries(
            {},
            optional={
                "content": st.sampled_from(VALUES),
                "isError": st.sampled_from(VALUES),
                "structuredContent": st.sampled_from(VALUES),
            },
        ),
    )
    return st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "conversation_id": st.just("c1")},
        optional={
            "id": st.sampled_from(IDS),
            "method": st.sampled_from([None, "tools/call", "tools/list", 3]),
            "params": params,
            "result": result,
            "error": st.sampled_from(VALUES),
        },
    )  # fmt: skip


def wrapped(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` in a logging wrapper: its conversation id (if any) and a time beside it."""
    inner = {k: v for k, v in obj.items() if k != "conversation_id"}
    outer = {"conversation_id": obj["conversation_id"]} if "conversation_id" in obj else {}
    return {**outer, "ts": 1_750_000_000_000, "message": inner}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(canonical_events(), mcp_messages()), st.booleans())
def test_generated_records_in_every_spelling(obj: dict[str, Any], wrap: bool) -> None:
    check(spellings(wrapped(obj) if wrap else obj))


@pytest.mark.parametrize("levels", [150, 199, 200, 201, 300, 1000])
@pytest.mark.parametrize(
    "head",
    [
        b'{"conversation_id":"c","type":"tool_call","id":"a","name":"n","arguments":',
        b'{"conversation_id":"c","type":"tool_call","id":[],"name":"n","arguments":',
        b'{"conversation_id":"c","type":"tool_result","call_id":"a","content":',
        b'{"conversation_id":"c","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":',
        b'{"conversation_id":"c","jsonrpc":"2.0","id":1,"result":{"content":',
        b'{"conversation_id":"c","role":"user","parts":[{"text":"t"},{"functionResponse":{"name":"n","response":',
        b'{"conversation_id":"c","candidates":[{"content":{"parts":[{"functionCall":{"name":"n","args":',
        b'{"conversation_id":"c","role":"user","content":[{"toolResult":{"toolUseId":"t","content":',
    ],
)
def test_records_nested_past_the_limit(head: bytes, levels: int) -> None:
    """Deeper than the fast path reads, deeper than orjson writes: the same dead letter (or event)."""
    open_: list[int] = []
    for c in head:  # the heads hold no brackets inside strings
        if c in b"{[":
            open_.append(c)
        elif c in b"}]":
            open_.pop()
    raw = head + b"[" * levels + b"]" * levels + bytes(c + 2 for c in reversed(open_))  # { -> }, [ -> ]
    assert levels > 900 or orjson.loads(raw)
    check([raw])


def test_read_parts_words_refusals_and_finds_blocks() -> None:
    """The native entry point itself: a worded refusal, and where each part's values are."""
    data = b'{"jsonrpc":"2.0","id":[1],"error":{"code":1}}'
    refused = ("wrong_type", "message.id is an array, expected a string id")
    assert _native.read_parts("mcp", data, "message.") == refused
    data = b'{"type":"tool_call","id":" a ","name":"n","arguments":{"x":1}}'
    found = [(True, "a", "n", ("arguments",), None, (), "canonical")]
    assert _native.read_parts("canonical", data, "") == found
    data = b'{"parts":[{"text":"t"},{"functionResponse":{"name":"n"}}]}'
    found = [(False, None, "n", None, False, ("parts", 1), "gemini")]
    assert _native.read_parts("gemini", data, "") == found
    with pytest.raises(ValueError, match="no compiled reader"):
        _native.read_parts("langchain", data, "")


def test_read_parts_walks_arrays_once() -> None:
    """The array walks the fast path uses, from Python: each element's refusal worded at its path,
    Bedrock and Anthropic blocks read in one array, a Vercel part left to Python (format "")."""
    data = b'{"content":[{"type":"text"},7]}'
    refused = ("wrong_type", "message.content[1] is an integer, expected a content block object")
    assert _native.read_parts("anthropic_content", data, "message.content") == refused
    data = (
        b'{"content":[{"toolUse":{"toolUseId":"a","name":"n"}},{"type":"tool-call"},'
        b'{"type":"tool_use","id":"b","name":"m"}]}'
    )
    found = _native.read_parts("claude_code_content", data, "content")
    assert [(p[0], p[1], p[5], p[6]) for p in found] == [
        (True, "a", ("content", 0), "bedrock"),
        (False, None, ("content", 1), ""),
        (True, "b", ("content", 2), "claude_code"),
    ]
    data = (
        b'{"output":[{"type":"reasoning"},'
        b'{"type":"function_call","call_id":"a","name":"n","arguments":"{}"}]}'
    )
    found = [(True, "a", "n", ("output", 1, "arguments"), None, ("output", 1), "openai_responses")]
    assert _native.read_parts("openai_responses_output", data, "output") == found
    refused = ("wrong_type", "output[0] is null, expected an item object")
    assert _native.read_parts("openai_responses_output", b'{"output":[null]}', "output") == refused
