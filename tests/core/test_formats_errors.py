"""Unreadable records: every FormatError reason, with the detail an operator needs. The
conversation-id, id, timestamp and detection rules on small hand-made records are
test_formats_fields.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_pairer.core.formats import FormatConfig
from tests.core.formats_helpers import DEAD_LETTER_REASONS, anthropic_call, error, parse

# ------------------------------------------------------------------ reasons


def test_too_large() -> None:
    raw = orjson.dumps({"conversation_id": "c", "type": "tool_call", "name": "x", "arguments": "a" * 200})
    err = error(raw, config=FormatConfig(max_record_bytes=100))
    assert err.reason == "too_large"
    assert err.detail == f"the record is {len(raw)} bytes, more than the 100 byte limit"
    assert parse(raw, config=FormatConfig(max_record_bytes=len(raw)))  # exactly at the limit: fine


def test_invalid_utf8() -> None:
    raw = b'{"conversation_id": "caf\xe9", "type": "tool_call"}'
    err = error(raw)
    assert err.reason == "invalid_utf8"
    assert err.detail == f"the record is not valid UTF-8: byte 0xe9 at offset {raw.index(0xE9)}"


@pytest.mark.parametrize(
    ("raw", "detail_part"),
    [
        (b'{"conversation_id": "c", "type": "tool_call",', "line 1 column"),
        (b"{'conversation_id': 'c'}", "not valid JSON"),
        (b'{"a": NaN}', "not valid JSON"),
    ],
)
def test_invalid_json(raw: bytes, detail_part: str) -> None:
    err = error(raw)
    assert err.reason == "invalid_json"
    assert err.detail.startswith("the record is not valid JSON: ")
    assert detail_part in err.detail


def nested(depth: int) -> bytes:
    """A Claude Code-like assistant line whose tool input nests `depth` levels below the record."""
    inner = b'{"k":' * (depth - 4) + b"1" + b"}" * (depth - 4)
    return (
        b'{"sessionId":"s","type":"assistant","message":{"role":"assistant","content":'
        b'[{"type":"tool_use","id":"toolu_1","name":"Deep","input":' + inner + b"}]}}"
    )


def test_too_large_nesting() -> None:
    """orjson reads 1024 levels but writes only 254: a block that deep would pass here and then
    crash whoever serializes the output. The limit is 200 levels for a kept block."""
    (ev,) = parse(nested(203))  # the tool_use block is 4 levels below the record's top
    assert ev.name == "Deep"
    # the event, wrapped as an output record would wrap it, still serializes
    orjson.dumps({"kind": "pair", "call": ev.to_side(), "result": ev.to_side()})
    err = error(nested(204))
    assert err.reason == "too_large"
    assert err.detail == "the block of tool event 0 nests more than 200 levels of arrays and objects"
    # deep nesting outside the kept blocks does not matter: nothing of it is written out
    rec = orjson.loads(nested(3))
    assert parse(orjson.dumps(rec)[:-1] + b',"meta":' + b"[" * 300 + b"]" * 300 + b"}")
    # beyond orjson's own read limit: same reason
    err = error(b"[" * 5000 + b"]" * 5000)
    assert err.reason == "too_large"
    assert err.detail.startswith("the record nests too deeply to be read")


def test_many_brackets_but_shallow_is_fine() -> None:
    items = [{"title": f"r{i}", "tags": ["a", "b"]} for i in range(400)]
    rec = {"conversation_id": "c", "type": "tool_result", "id": "x", "content": items}
    (ev,) = parse(rec)
    assert len(ev.payload) == 400


def canonical_call(levels: int) -> bytes:
    """A canonical call record (the record is the kept block: level 1) whose arguments add
    `levels - 1` levels: exactly `levels` opening brackets in all, padded past the size check."""
    args = b'{"k":' * (levels - 1) + b"1" + b"}" * (levels - 1)
    return (
        b'{"conversation_id":"c","type":"tool_call","id":"a","name":"f","pad":"'
        + b"x" * 500
        + b'","arguments":'
        + args
        + b"}"
    )


def test_depth_limit_is_exact_at_the_bracket_prefilter() -> None:
    """The walk is skipped when the bytes hold at most MAX_DEPTH opening brackets: a block
    exactly 200 deep passes, 201 deep is refused."""
    assert canonical_call(200).count(b"{") + canonical_call(200).count(b"[") == 200
    (ev,) = parse(canonical_call(200))
    orjson.dumps({"kind": "pair", "call": ev.to_side(), "result": ev.to_side()})
    err = error(canonical_call(201))
    assert err.reason == "too_large"
    assert err.detail == "the block of tool event 0 nests more than 200 levels of arrays and objects"


def test_depth_walk_skipped_for_ordinary_records(monkeypatch: pytest.MonkeyPatch) -> None:
    from stream_pairer.core import formats  # noqa: PLC0415 - the module whose hook is replaced

    walked: list[Any] = []
    monkeypatch.setattr(formats, "too_deep", lambda block: walked.append(block) or False)
    rec = anthropic_call(input={"query": "x" * 600, "opts": [{"a": 1}, {"b": [2, 3]}]})
    assert parse(rec)
    assert walked == []
    # brackets inside strings count too: a shallow record full of them is walked, and passes
    rec = anthropic_call(input={"query": "{[" * 150})
    assert parse(rec)
    assert len(walked) == 1


@pytest.mark.parametrize("raw", [b"", b"   ", b"\n"])
def test_empty_record_is_invalid_json(raw: bytes) -> None:
    err = error(raw)
    assert (err.reason, err.detail) == ("invalid_json", "the record is empty")


def test_byte_order_mark_is_tolerated() -> None:
    rec = {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "n"}
    (ev,) = parse(b"\xef\xbb\xbf" + orjson.dumps(rec))
    assert ev.id == "a"
    assert error(b"\xef\xbb\xbf{").reason == "invalid_json"


@pytest.mark.parametrize(
    ("raw", "what"),
    [(b"[1, 2]", "an array"), (b'"tool_call"', "a string"), (b"42", "an integer"), (b"null", "null")],
)
def test_not_an_object(raw: bytes, what: str) -> None:
    err = error(raw)
    assert err.reason == "not_an_object"
    assert err.detail == f"the record is {what}, expected a JSON object"


@pytest.mark.parametrize(
    "rec",
    [
        {},
        {"conversation_id": "c"},
        {"conversation_id": "c", "level": "info", "msg": "started"},
        {"conversation_id": "c", "content": "text but no role"},
    ],
)
def test_unknown_shape(rec: dict[str, Any]) -> None:
    err = error(rec)
    assert err.reason == "unknown_shape"
    assert "matches no supported format" in err.detail
    for k in rec:
        assert k in err.detail  # the keys that were seen are listed


def test_anthropic_streaming_event_is_unknown_shape_not_an_unknown_type() -> None:
    """A typed record is normally skipped as an unknown type, but a streamed message fragment
    may hold a tool call's input: it is dead-lettered with a hint instead of vanishing."""
    err = error({"conversation_id": "c", "type": "content_block_delta", "delta": {"type": "text_delta"}})
    assert err.reason == "unknown_shape"
    assert "Anthropic streaming event (content_block_delta)" in err.detail


def test_unknown_shape_names_the_type_and_the_wrapper() -> None:
    err = error({"conversation_id": "c", "message": {"type": "response.output_text.delta", "delta": "Hi"}})
    assert err.reason == "unknown_shape"
    assert err.detail.startswith("message matches no supported format (type 'response.output_text.delta')")


def test_streaming_chat_chunk_is_unknown_shape_with_a_reason() -> None:
    chunk = {
        "conversation_id": "c",
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}}],
    }
    err = error(chunk)
    assert err.reason == "unknown_shape"
    assert "streaming chunk" in err.detail


def test_jsonrpc_without_method_result_or_error() -> None:
    err = error({"session_id": "s", "message": {"jsonrpc": "2.0", "id": 3}})
    assert err.reason == "unknown_shape"
    # the reader's sentence first, then what discovery saw (formats/discover.py)
    assert err.detail.startswith("message is a JSON-RPC message with none of method, result, error; ")


def test_missing_conversation_id() -> None:
    err = error({"type": "tool_call", "id": "a", "name": "n"})
    assert err.reason == "missing_conversation_id"
    assert err.detail == (
        "none of the conversation id fields (conversation_id, sessionId, session_id, thread_id, "
        "conversation.id, metadata.conversation_id) holds a non-empty value, and no message key was given"
    )
    err = error({"type": "tool_call", "id": "a", "name": "n", "conversation_id": "  "}, key=" ")
    assert err.reason == "missing_conversation_id"
    assert err.detail.endswith("and the message key is blank")


@pytest.mark.parametrize(
    ("value", "what"),
    [(["c1"], "an array"), ({"id": "c1"}, "an object"), (True, "a boolean"), (1.5, "a number")],
)
def test_conversation_id_wrong_type(value: Any, what: str) -> None:
    err = error({"conversation_id": value, "type": "tool_call", "name": "n"}, key="fallback")
    assert err.reason == "wrong_type"
    assert err.detail == f"conversation id field 'conversation_id' is {what}, expected a string or an integer"


@pytest.mark.parametrize(
    ("rec", "detail"),
    [
        (anthropic_call(id=["toolu_01"]), "message.content[1].id is an array, expected a string id"),
        (anthropic_call(name=7), "message.content[1].name is an integer, expected a string tool name"),
        (anthropic_call(is_error="no"), None),  # is_error on a call is not read: no error
        (
            {"conversation_id": "c", "role": "user", "content": [{"type": "tool_result", "is_error": "yes"}]},
            "content[0].is_error is a string, expected a boolean",
        ),
        (
            {"conversation_id": "c", "role": "user", "content": ["just a string"]},
            "content[0] is a string, expected a content block object",
        ),
        (
            {"conversation_id": "c", "role": "user", "content": {"type": "text"}},
            "content is an object, expected a string or an array of content blocks",
        ),
        (
            {"conversation_id": "c", "role": "assistant", "tool_calls": {"id": "call_1"}},
            "tool_calls is an object, expected an array",
        ),
        (
            {"conversation_id": "c", "role": "assistant", "tool_calls": [{"id": "c1", "function": 7}]},
            "tool_calls[0].function is an integer, expected an object",
        ),
        (
            {"conversation_id": "c", "role": "tool", "tool_call_id": 1.5, "content": "x"},
            "tool_call_id is a number, expected a string id",
        ),
        (
            {
                "conversation_id": "c",
                "output": {"message": {"role": "user", "content": [{"toolResult": []}]}},
            },
            "output.message.content[0].toolResult is an array, expected an object",
        ),
        (
            {
                "conversation_id": "c",
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "t", "status": 1}}],
            },
            'content[0].toolResult.status is an integer, expected "success" or "error"',
        ),
        (
            {"conversation_id": "c", "candidates": [{"content": {"parts": [{"functionCall": ["f"]}]}}]},
            "candidates[0].content.parts[0].functionCall is an array, expected an object",
        ),
        (
            {
                "conversation_id": "c",
                "message": {"jsonrpc": "2.0", "id": [1], "method": "tools/call", "params": {"name": "x"}},
            },
            "message.id is an array, expected a string id",
        ),
        (
            {
                "conversation_id": "c",
                "message": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []},
            },
            "message.params is an array, expected an object",
        ),
        (
            {"conversation_id": "c", "jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": "true"}},
            "result.isError is a string, expected a boolean",
        ),
        (
            {"conversation_id": "c", "type": "function_call", "call_id": {"a": 1}, "name": "f"},
            "call_id is an object, expected a string id",
        ),
        (
            {"conversation_id": "c", "output": [{"type": "function_call", "call_id": "a", "name": ["f"]}]},
            "output[0].name is an array, expected a string tool name",
        ),
        (
            {"conversation_id": "c", "type": "tool_call", "name": "n", "ts": [2025]},
            "ts is an array, expected an RFC 3339 string or an epoch number",
        ),
        (
            {"conversation_id": "c", "type": "tool_call", "name": "n", "timestamp": "yesterday"},
            "timestamp is the string 'yesterday', "
            "expected an RFC 3339 timestamp or epoch seconds/milliseconds",
        ),
        (
            {"conversation_id": "c", "type": "tool_call", "name": "n", "ts": -5},
            "ts is '-5', outside the years 1970..9999",
        ),
        (
            {"conversation_id": "c", "type": "tool_call", "name": "n", "ts": 1e300},
            "ts is '1e+300', outside the years 1970..9999",
        ),
        ({"type": "user", "sessionId": "s", "message": "hello"}, "message is a string, expected an object"),
    ],
)
def test_wrong_type(rec: dict[str, Any], detail: str | None) -> None:
    if detail is None:
        assert parse(rec)
        return
    err = error(rec)
    assert err.reason == "wrong_type"
    assert err.detail == detail


@pytest.mark.parametrize(
    ("rec", "detail"),
    [
        (
            {"conversation_id": "c", "type": "tool_call", "id": "a"},
            "name is missing: a tool call needs a tool name",
        ),
        (anthropic_call(name="   "), "message.content[1].name is missing: a tool call needs a tool name"),
        (
            {
                "conversation_id": "c",
                "role": "assistant",
                "tool_calls": [{"id": "call_1", "type": "function"}],
            },
            "tool_calls[0].function is missing: a tool call needs function.name",
        ),
        (
            {"conversation_id": "c", "role": "assistant", "function_call": {"arguments": "{}"}},
            "function_call.name is missing: a tool call needs a tool name",
        ),
        (
            {"conversation_id": "c", "jsonrpc": "2.0", "id": 1, "method": "tools/call"},
            "params is missing: a tools/call request needs params.name",
        ),
        (
            {"conversation_id": "c", "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}},
            "params.name is missing: a tool call needs a tool name",
        ),
        (
            {
                "conversation_id": "c",
                "output": {"message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t"}}]}},
            },
            "output.message.content[0].toolUse.name is missing: a tool call needs a tool name",
        ),
        (
            {
                "conversation_id": "c",
                "role": "model",
                "parts": [{"text": "x"}, {"functionCall": {"args": {}}}],
            },
            "parts[1].functionCall.name is missing: a tool call needs a tool name",
        ),
    ],
)
def test_missing_field(rec: dict[str, Any], detail: str) -> None:
    err = error(rec)
    assert err.reason == "missing_field"
    assert err.detail == detail


def test_every_reason_has_a_test_above() -> None:
    """The reason codes are metric label values: the set must not drift silently."""
    reasons = DEAD_LETTER_REASONS
    src = Path(__file__).read_text(encoding="utf-8")
    for r in reasons:
        assert f"def test_{r}" in src
