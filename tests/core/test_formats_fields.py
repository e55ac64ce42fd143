"""The conversation-id, id, timestamp and detection rules on small hand-made records (split from
test_formats_errors.py, which holds every FormatError reason)."""

from __future__ import annotations

from typing import Any

import pytest

from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from tests.core.formats_helpers import anthropic_call, error, parse

# ------------------------------------------------------------------ conversation id


def test_kafka_key_is_the_fallback_conversation_id() -> None:
    rec = {"type": "tool_result", "id": "a", "content": "ok"}
    (ev,) = parse(rec, key="  conv-from-key ")
    assert ev.conversation_id == "conv-from-key"
    rec["conversation_id"] = "conv-from-record"
    (ev,) = parse(rec, key="conv-from-key")
    assert ev.conversation_id == "conv-from-record"  # the record wins over the key


def test_conversation_fields_are_tried_in_order_and_may_be_dotted() -> None:
    rec = {
        "type": "tool_call",
        "name": "n",
        "thread_id": "thr",
        "sessionId": "  ",  # blank: skipped
        "meta": {"trace": {"conv": "deep"}},
    }
    assert parse(rec)[0].conversation_id == "thr"
    cfg = FormatConfig(conversation_fields=("meta.trace.conv", "thread_id"))
    assert parse(rec, config=cfg)[0].conversation_id == "deep"
    cfg = FormatConfig(
        conversation_fields=("meta.trace.nothing", "meta.missing.conv", "thread_id.x", "thread_id")
    )
    assert parse(rec, config=cfg)[0].conversation_id == "thr"
    assert DEFAULT_CONFIG.conversation_fields[0] == "conversation_id"


def test_conversation_id_is_not_needed_for_records_without_events() -> None:
    assert parse({"type": "summary", "summary": "x", "leafUuid": "u"}) == []
    assert parse({"role": "user", "content": "hello"}) == []


# ------------------------------------------------------------------ ids and timestamps


@pytest.mark.parametrize(
    ("raw_id", "expected"),
    [
        ("toolu_01", "toolu_01"),
        ("  toolu_01\t\n", "toolu_01"),
        ("", None),
        ("   ", None),
        (None, None),
        (42, "42"),
    ],
)
def test_ids_are_trimmed_and_blank_means_none(raw_id: Any, expected: str | None) -> None:
    (ev,) = parse({"conversation_id": "c", "role": "tool", "tool_call_id": raw_id, "content": "x"})
    assert ev.id == expected
    (ev,) = parse(anthropic_call(id=raw_id))
    assert ev.id == expected


def test_bool_is_not_an_id() -> None:
    assert error(anthropic_call(id=True)).reason == "wrong_type"


@pytest.mark.parametrize(
    ("ts", "expected_ms"),
    [
        (1718031201, 1718031201000.0),  # seconds
        (1718031201.5, 1718031201500.0),
        (1718031201123, 1718031201123.0),  # milliseconds
        (1718031201123456, 1718031201123.456),  # microseconds
        (1718031201123456789, 1718031201123.4568),  # nanoseconds
        ("2024-06-10T14:53:21Z", 1718031201000.0),
        ("2024-06-10T14:53:21.123+00:00", 1718031201123.0),
        ("2024-06-10T23:53:21.123+09:00", 1718031201123.0),
        ("2024-06-10T14:53:21.123456789Z", 1718031201123.456),  # nanosecond digits are cut
        ("2024-06-10 14:53:21", 1718031201000.0),  # no offset: UTC
        ("1718031201", 1718031201000.0),  # a number in a string
        (0, 0.0),
    ],
)
def test_timestamps(ts: Any, expected_ms: float) -> None:
    (ev,) = parse({"conversation_id": "c", "type": "tool_call", "name": "n", "ts": ts})
    assert ev.ts_ms == pytest.approx(expected_ms, abs=0.01)


def test_timestamp_fields_in_order_and_wrapper_fallback() -> None:
    rec: dict[str, Any] = {"conversation_id": "c", "type": "tool_call", "name": "n"}
    assert parse(rec)[0].ts_ms is None
    rec["created"] = 1700000000
    assert parse(rec)[0].ts_ms == 1700000000000
    rec["timestamp"] = "2024-01-01T00:00:00Z"
    assert parse(rec)[0].ts_ms == 1704067200000
    rec["ts"] = 1600000000000
    assert parse(rec)[0].ts_ms == 1600000000000
    # the wrapper's ts wins; else the inner message's
    wrapped: dict[str, Any] = {
        "conversation_id": "c",
        "message": {"role": "tool", "tool_call_id": "a", "content": "x", "created_at": 1700000001},
    }
    assert parse(wrapped)[0].ts_ms == 1700000001000
    wrapped["ts"] = 1700000002
    assert parse(wrapped)[0].ts_ms == 1700000002000


# ------------------------------------------------------------------ detection details


def test_openai_arguments_decoding() -> None:
    def args(value: Any) -> Any:
        rec = {
            "conversation_id": "c",
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": value}}
            ],
        }
        return parse(rec)[0].payload

    assert args('{"a": [1, 2]}') == {"a": [1, 2]}
    assert args('{"a": ') == '{"a": '  # invalid JSON: kept
    assert args("[1, 2]") == "[1, 2]"  # valid JSON but not an object: kept as sent
    assert args('"x"') == '"x"'
    assert args("") == ""
    assert args({"already": "decoded"}) == {"already": "decoded"}
    too_deep = '{"a":' * 201 + "1" + "}" * 201
    assert args(too_deep) == too_deep  # decodable, but too deep to write back out: kept as text
    fine = '{"a":' * 200 + "1" + "}" * 200
    assert isinstance(args(fine), dict)
    assert args(None) is None


def test_chat_custom_tool_call() -> None:
    rec = {
        "conversation_id": "c",
        "role": "assistant",
        "tool_calls": [{"id": "call_9", "type": "custom", "custom": {"name": "grammar", "input": "x = 1"}}],
    }
    (ev,) = parse(rec)
    assert (ev.id, ev.name, ev.payload, ev.format) == ("call_9", "grammar", "x = 1", "openai_chat")


def test_mcp_requests_and_responses_without_tool_events() -> None:
    for msg in [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
        {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {}}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"role": "assistant", "content": {"type": "text", "text": "hi"}},
        },
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "result": None},
    ]:
        assert parse({"session_id": "s", "message": msg}) == [], msg


def test_mcp_structured_content_only_result() -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"t": 1}}}
    (ev,) = parse({"session_id": "s", "message": msg})
    assert (ev.id, ev.payload, ev.is_error) == ("1", {"t": 1}, False)


def test_responses_items_without_tool_events() -> None:
    for t in ["reasoning", "web_search_call", "mcp_list_tools", "message"]:
        rec = {"conversation_id": "c", "type": t, "id": "x", "content": []}
        assert parse(rec) == [], t


def test_claude_code_quiet_line_types() -> None:
    for t in ["summary", "system", "file-history-snapshot", "queue-operation", "result"]:
        assert parse({"type": t, "sessionId": "s", "uuid": "u"}) == [], t


def test_anthropic_server_tool_error_result() -> None:
    rec = {
        "conversation_id": "c",
        "role": "assistant",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
            },
        ],
    }
    call, result = parse(rec)
    assert (call.id, result.id, result.is_error) == ("srvtoolu_1", "srvtoolu_1", True)


def test_raw_is_the_original_block_object() -> None:
    rec = anthropic_call()
    (ev,) = parse(rec)
    assert ev.raw == rec["message"]["content"][1]


def test_claude_code_stream_json_lines() -> None:
    """`claude -p --output-format stream-json` writes `session_id` (snake case) per line."""
    sid = "9d1f0c2e-3b4a-4c5d-8e6f-7a8b9c0d1e2f"
    init = {
        "type": "system",
        "subtype": "init",
        "session_id": sid,
        "tools": ["Bash"],
        "model": "claude-sonnet-4",
    }
    assert parse(init) == []
    call = {
        "type": "assistant",
        "session_id": sid,
        "parent_tool_use_id": None,
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_01S", "name": "Bash", "input": {"command": "ls"}}],
        },
    }
    result = {
        "type": "user",
        "session_id": sid,
        "message": {
            "role": "user",
            "content": [{"tool_use_id": "toolu_01S", "type": "tool_result", "content": "a.txt"}],
        },
    }
    ((c,), (r,)) = parse(call), parse(result)
    assert (c.format, c.conversation_id, c.id, r.id, r.is_error) == (
        "claude_code",
        sid,
        "toolu_01S",
        "toolu_01S",
        False,
    )
    assert parse({"type": "result", "subtype": "success", "session_id": sid, "result": "done"}) == []


def test_canonical_event_inside_a_wrapper() -> None:
    rec = {
        "conversation_id": "c",
        "ts": 1700000000,
        "message": {"type": "tool_call", "call_id": "k", "name": "n"},
    }
    (ev,) = parse(rec)
    assert (ev.format, ev.id, ev.ts_ms, ev.raw) == ("canonical", "k", 1700000000000, rec["message"])
