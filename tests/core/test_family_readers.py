"""The edges of the agent-family readers and of ids as the families write them (issue 24):
what must not be read as a tool event, what must stay a dead letter, and when a rewritten id
is, and is not, a copy of an earlier call."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from stream_pairer.core.dedup import HistoryDedup
from stream_pairer.core.formats import parse_record
from stream_pairer.core.model import CALL, RESULT, FormatError, ToolEvent


def parse(record: dict[str, Any] | bytes) -> list[ToolEvent]:
    raw = record if isinstance(record, bytes) else orjson.dumps(record)
    return parse_record(raw, {"file": "t", "line": 1}, key="k")


def ev(kind: str, call_id: str | None, name: str = "get", args: Any = None) -> ToolEvent:
    return ToolEvent(kind, "c", call_id, name, args if args is not None else {"q": 1}, None, "wire", {})  # type: ignore[arg-type]


def test_a_copy_under_an_id_that_merely_ends_with_the_old_one_is_a_new_call() -> None:
    """`21` ends with `1`, but without a separator it is another id: two calls, not a copy."""
    d = HistoryDedup()
    assert d.admit(ev(CALL, "1"))
    assert d.admit(ev(CALL, "21"))
    assert d.copies == 0


def test_a_prefixed_copy_is_the_same_call_and_its_result_answers_it() -> None:
    d = HistoryDedup()
    assert d.admit(ev(CALL, "call_0"))
    assert not d.admit(ev(CALL, "resp_9_call_0"))  # the client's rewrite: a copy
    result = ev(RESULT, "resp_9_call_0")
    assert d.admit(result) and result.id == "call_0"
    assert d.admit(ev(CALL, "call_0", args={"q": 2}))  # the next response's call_0 is new


def test_other_arguments_or_another_tool_are_not_a_copy() -> None:
    d = HistoryDedup()
    assert d.admit(ev(CALL, "call_0"))
    assert d.admit(ev(CALL, "resp_9_call_0", args={"q": 2}))
    assert d.admit(ev(CALL, "resp_8_call_0", name="put"))
    assert d.copies == 0


def test_a_call_seen_again_under_its_own_id_is_never_taken_for_a_rewrite() -> None:
    d = HistoryDedup()
    assert d.admit(ev(CALL, "call_0"))
    assert not d.admit(ev(CALL, "call_0"))  # the usual history copy
    assert d.admit(ev(CALL, "resp_9_call_0"))  # so this one is another call
    assert d.copies == 1


def test_a_direction_prefix_is_taken_off_json_rpc_lines_only() -> None:
    [call] = parse(b'--> {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ls"}}')
    assert (call.type, call.id, call.name) == (CALL, "3", "ls")
    [result] = parse(b'[server->client] {"jsonrpc":"2.0","id":"3","result":{"content":[]}}')
    assert (result.type, result.id) == (RESULT, "3")
    with pytest.raises(FormatError) as err:
        parse(b'--> {"role":"user","content":"hi"}')  # not JSON-RPC: the line stays unreadable
    assert err.value.reason == "invalid_json"


def test_binary_that_is_not_otlp_stays_a_dead_letter() -> None:
    with pytest.raises(FormatError) as err:
        parse(b"\x0a\x05hello\xff\xfe")
    assert err.value.reason in ("invalid_utf8", "invalid_json")


def test_openhands_finish_and_state_changes_are_no_tool_events() -> None:
    finish = {"id": 9, "source": "agent", "message": "done", "action": "finish", "args": {}}
    state = {"id": 10, "source": "environment", "observation": "agent_state_changed", "content": ""}
    uncaused = {"id": 11, "source": "agent", "observation": "run", "content": "x"}
    assert parse(finish) == [] and parse(state) == [] and parse(uncaused) == []
    [obs] = parse({"id": 12, "cause": 7, "observation": "run", "content": "", "success": False})
    assert (obs.type, obs.id, obs.is_error) == (RESULT, "7", True)


def test_swe_agent_result_answers_every_id_of_its_list() -> None:
    found = parse({"role": "tool", "content": "ok", "tool_call_ids": ["call_a", "call_b"]})
    assert [(e.type, e.id, e.payload) for e in found] == [(RESULT, "call_a", "ok"), (RESULT, "call_b", "ok")]
    with pytest.raises(FormatError):
        parse({"role": "tool", "content": "ok", "tool_call_ids": "call_a"})


def test_adk_partial_events_are_not_read() -> None:
    part = {"functionCall": {"id": "adk-p", "name": "f", "args": {}}}
    event = {"author": "agent", "invocationId": "e-1", "content": {"role": "model", "parts": [part]}}
    assert parse({**event, "partial": True}) == []
    [call] = parse(event)
    assert (call.type, call.id, call.format) == (CALL, "adk-p", "adk")


def test_langchain_tool_message_status_error_is_an_error_result() -> None:
    [res] = parse({"type": "tool", "tool_call_id": "call_1", "content": "boom", "status": "error"})
    assert (res.type, res.id, res.is_error, res.format) == (RESULT, "call_1", True, "langchain")


def test_an_openhands_events_api_page_is_read_event_by_event() -> None:
    page = {
        "events": [
            {"id": 4, "timestamp": "2025-06-02T09:14:05Z", "source": "agent", "action": "run", "args": {}},
            {"id": 5, "source": "agent", "cause": 4, "observation": "run", "content": "a.py"},
            {"id": 6, "source": "agent", "action": "message", "args": {"content": "done"}},
        ],
        "has_more": False,
    }
    events = parse(page)
    assert [(e.type, e.id, e.name) for e in events] == [(CALL, "4", "run"), (RESULT, "4", None)]
    assert events[0].ts_ms == 1748855645000.0 and events[1].ts_ms is None  # each event's own time


def test_phoenix_span_json_with_nested_attributes_reads_like_flat_ones() -> None:
    """Phoenix's span JSON nests the attribute tree (`attributes.llm.output_messages[].message`)."""
    span = {
        "name": "ChatCompletion",
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "startTime": "2025-05-20T10:08:20Z",
        "attributes": {
            "openinference": {"span": {"kind": "LLM"}},
            "session": {"id": "sess-1"},
            "llm": {
                "input_messages": [
                    {"message": {"role": "tool", "tool_call_id": "call_a", "content": "18 C"}},
                ],
                "output_messages": [
                    {
                        "message": {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "tool_call": {
                                        "id": "call_b",
                                        "function": {"name": "book", "arguments": "{}"},
                                    }
                                }
                            ],
                        }
                    }
                ],
            },
        },
    }
    found = parse(span)
    assert [(e.type, e.id, e.name, e.format, e.conversation_id) for e in found] == [
        (RESULT, "call_a", None, "openinference", "sess-1"),
        (CALL, "call_b", "book", "openinference", "sess-1"),
    ]


def test_a_reused_id_is_a_new_call_only_once_its_first_call_was_answered() -> None:
    d = HistoryDedup()
    assert d.admit(ev(CALL, "call_0"))
    assert not d.admit(ev(CALL, "call_0", args={"q": 2}))  # first call still open: a copy
    first = ev(RESULT, "call_0", args="one")
    assert d.admit(first)
    assert d.admit(ev(CALL, "call_0", args={"q": 3}))  # answered id, other arguments: a new call
    assert not d.admit(ev(RESULT, "call_0", args="one"))  # the first result's copy
    assert d.admit(ev(RESULT, "call_0", args="three"))  # the new call's result
    assert not d.admit(ev(CALL, "call_0"))  # copies of either call
    assert not d.admit(ev(CALL, "call_0", args={"q": 3}))
