"""Every supported format, read from the realistic sample files in tests/samples/.

Each test states what a person reading the sample would expect: which lines carry events,
the ids (trimmed), names, error flags, payload decoding, timestamps and conversation ids.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import jsonschema_rs
import orjson
import pytest

from stream_pairer.core.formats import FORMATS, parse_record
from stream_pairer.core.model import CALL, RESULT, ToolEvent
from tests.core.formats_helpers import SAMPLES, brief, parse_file, sample_lines


def ms(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp() * 1000


def flat(by_line: list[list[ToolEvent]]) -> list[ToolEvent]:
    return [ev for evs in by_line for ev in evs]


SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.jsonl"))


def test_there_is_one_sample_file_per_format_family() -> None:
    assert set(SAMPLE_FILES) >= {
        "canonical.jsonl",
        "anthropic.jsonl",
        "claude_code.jsonl",
        "openai_chat.jsonl",
        "openai_legacy.jsonl",
        "openai_responses.jsonl",
        "bedrock.jsonl",
        "gemini.jsonl",
        "mcp.jsonl",
    }


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_sample_invariants(name: str) -> None:
    """Record-level fields are filled consistently for every event of every sample."""
    for n, (raw, evs) in enumerate(zip(sample_lines(name), parse_file(name, key="k"), strict=True), 1):
        record_size = len(raw)
        assert [ev.block for ev in evs] == list(range(len(evs)))
        for ev in evs:
            assert ev.source == {"file": name, "line": n}
            assert ev.format in FORMATS
            assert ev.type in (CALL, RESULT)
            assert ev.conversation_id and ev.conversation_id == ev.conversation_id.strip()
            assert ev.id is None or (ev.id and ev.id == ev.id.strip())
            if ev.is_call:
                assert ev.name and ev.is_error is None
            assert isinstance(ev.raw, dict)
            assert ev.size == record_size // len(evs)
            # the side is what gets written: it must serialize
            orjson.dumps(ev.to_side())


@pytest.mark.parametrize("name", [n for n in SAMPLE_FILES if n != "openai_legacy.jsonl"])
def test_every_id_result_answers_a_call_in_the_same_conversation(name: str) -> None:
    """The samples are complete conversations: each id-carrying result's id was issued by a call
    of the same conversation. This fails if either side's id is read or trimmed differently."""
    calls: defaultdict[str, set[str]] = defaultdict(set)
    results: list[ToolEvent] = []
    for ev in flat(parse_file(name, key="k")):
        if ev.is_call and ev.id is not None:
            calls[ev.conversation_id].add(ev.id)
        elif not ev.is_call and ev.id is not None:
            results.append(ev)
    assert results
    for ev in results:
        assert ev.id in calls[ev.conversation_id], (ev.source, ev.id)


def test_legacy_sample_has_no_ids_at_all() -> None:
    evs = flat(parse_file("openai_legacy.jsonl"))
    assert evs and all(ev.id is None for ev in evs)


def test_canonical() -> None:
    lines = parse_file("canonical.jsonl")
    assert [[brief(e) for e in evs] for evs in lines] == [
        [("call", "call_01", "get_weather", None)],
        [("call", "call_02", "get_time", None)],
        [("result", "call_02", "get_time", False)],
        [("result", "call_01", None, False)],  # `call_id` alias, "  call_01 " trimmed
        [("call", None, "lookup_order", None)],  # blank id -> None
        [("result", None, "lookup_order", True)],
        [("call", "77", "search_docs", None)],  # integer id and conversation id
        [("result", "77", None, None)],
    ]
    evs = flat(lines)
    assert {e.format for e in evs} == {"canonical"}
    assert evs[0].payload == {"city": "Seoul", "unit": "celsius"}
    assert evs[3].payload == {"temp_c": 11.5, "sky": "clear"}
    assert evs[0].ts_ms == ms("2025-03-14T09:26:53.589")  # RFC 3339
    assert evs[3].ts_ms == 1741944414311  # epoch ms
    assert evs[4].ts_ms == 1741944500 * 1000  # epoch seconds
    assert evs[5].ts_ms == 1741944501250  # fractional epoch seconds
    assert evs[6].ts_ms is None
    assert evs[6].conversation_id == "4512"
    assert evs[0].raw == json.loads(sample_lines("canonical.jsonl")[0])


def test_anthropic_messages() -> None:
    lines = parse_file("anthropic.jsonl")
    assert lines[0] == []  # a plain user prompt
    assert lines[3] == []  # a text-only assistant answer
    calls = lines[1]
    assert [brief(e) for e in calls] == [
        ("call", "toolu_01A09q90qw90lq917835lq9", "get_weather", None),
        ("call", "toolu_01BqJ6KfQ3Lc3XxM1w4zv8Tn", "get_weather", None),
    ]
    assert calls[0].payload == {"location": "Paris, FR", "unit": "celsius"}
    assert calls[1].raw["type"] == "tool_use" and calls[1].raw["input"]["location"] == "Tokyo, JP"
    assert {e.ts_ms for e in calls} == {ms("2025-05-20T11:02:05.844")}  # the wrapper's ts
    results = lines[2]
    assert [brief(e) for e in results] == [
        ("result", "toolu_01BqJ6KfQ3Lc3XxM1w4zv8Tn", None, False),
        ("result", "toolu_01A09q90qw90lq917835lq9", None, True),  # trailing space trimmed; is_error
    ]
    assert results[0].payload == [{"type": "text", "text": '{"temp_c": 22, "conditions": "humid"}'}]
    assert results[1].payload.startswith("Error: upstream")
    # a bare response object: conversation id from metadata, server tool pair in the same message
    bare = lines[4]
    assert [brief(e) for e in bare] == [
        ("call", "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE", "web_search", None),
        ("result", "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE", None, False),
        ("call", "toolu_01VxP7c2bDgqE4k8Ywn9hR3s", "save_note", None),
    ]
    assert {e.conversation_id for e in bare} == {"conv_anth_02"}
    assert {e.ts_ms for e in bare} == {None}
    # a result whose tool_use_id is whitespace only: no id, the FIFO case
    assert [brief(e) for e in lines[5]] == [("result", None, None, False)]
    assert {e.format for e in flat(lines)} == {"anthropic"}


def test_claude_code_session() -> None:
    lines = parse_file("claude_code.jsonl")
    s1 = "8f2c6a4e-1b7d-4c3e-9a0f-5d2e7b1c9f80"
    s2 = "c41d9e02-77ab-4f15-8e3a-2b6f0d9a1c57"
    # summary, user prompt, text-only assistant line, system line, file-history-snapshot: no events
    assert [n for n, evs in enumerate(lines, 1) if not evs] == [1, 2, 3, 9, 13]
    assert all(len(evs) == 1 and evs[0].block == 0 for evs in lines if evs)
    evs = flat(lines)
    assert {e.format for e in evs} == {"claude_code"}
    assert [(e.conversation_id == s1, *brief(e)) for e in evs] == [
        (True, "call", "toolu_01Nw5Lq2pXh7YdKc3Rv8Mb4T", "Read", None),
        (True, "call", "toolu_01Gs9Kd4vQy2WmE6Tn1Hc8Zb", "Grep", None),
        (True, "result", "toolu_01Gs9Kd4vQy2WmE6Tn1Hc8Zb", None, False),
        (True, "result", "toolu_01Nw5Lq2pXh7YdKc3Rv8Mb4T", None, False),
        (True, "call", "toolu_01Pb3Xe7Lk2Qz9Wd5Rm4Ny6C", "Bash", None),
        # resumed session: the same tool_use id again, under the new sessionId
        (False, "call", "toolu_01Pb3Xe7Lk2Qz9Wd5Rm4Ny6C", "Bash", None),
        (False, "result", "toolu_01Pb3Xe7Lk2Qz9Wd5Rm4Ny6C", None, True),
        (False, "call", "toolu_01Wn4Fz8Qk3Lm7Xc2Vb9Rt5D", "Bash", None),
        (False, "result", "toolu_01Wn4Fz8Qk3Lm7Xc2Vb9Rt5D", None, False),
    ]
    assert {e.conversation_id for e in evs[5:]} == {s2}
    assert evs[0].ts_ms == ms("2025-06-02T18:46:56.412")
    assert evs[0].payload == {"file_path": "/home/dev/shop-api/tests/test_refund.py"}
    assert evs[6].payload.startswith("F\nFAILED")
    assert evs[6].raw == {
        "type": "tool_result",
        "tool_use_id": "toolu_01Pb3Xe7Lk2Qz9Wd5Rm4Ny6C",
        "content": evs[6].payload,
        "is_error": True,
    }


def test_openai_chat() -> None:
    lines = parse_file("openai_chat.jsonl")
    assert lines[0] == [] and lines[1] == [] and lines[7] == []  # system, user, final answer
    assert [brief(e) for e in lines[2]] == [
        ("call", "call_abc123XYZrestaurant01", "book_table", None),
        ("call", "call_def456UVWweather0002", "get_weather", None),
    ]
    book, weather = lines[2]
    assert book.payload == {"city": "Lisbon", "party_size": 2, "time": "20:00"}  # JSON string decoded
    assert book.raw["function"]["arguments"].startswith('{"city"')  # the original stays in raw
    assert book.ts_ms == 1718031203 * 1000  # wrapper has no ts: the completion's `created`
    assert weather.block == 1
    assert [brief(e) for e in lines[3]] == [("result", "call_def456UVWweather0002", None, None)]
    assert lines[3][0].ts_ms == pytest.approx(1718031204090)
    # " call_abc...\n" trimmed; the optional name is read
    assert [brief(e) for e in lines[4]] == [("result", "call_abc123XYZrestaurant01", "book_table", None)]
    assert lines[4][0].payload == '{"error":"no availability at 20:00"}'  # result content kept verbatim
    # arguments cut short by max_tokens are not valid JSON: kept as the string
    (cut,) = lines[5]
    assert cut.payload == '{"from":"LIS","to":"OPO","da'
    assert cut.conversation_id == "thr_chat_7730"
    assert cut.ts_ms == ms("2024-06-10T15:00:02")
    assert {e.format for e in flat(lines)} == {"openai_chat"}


def test_openai_legacy_functions() -> None:
    lines = parse_file("openai_legacy.jsonl")
    assert [[brief(e) for e in evs] for evs in lines] == [
        [],
        [("call", None, "calculate", None)],
        [("result", None, "calculate", None)],
        [("call", None, "convert_currency", None)],
        [("result", None, "convert_currency", None)],
        [],
    ]
    evs = flat(lines)
    assert {e.format for e in evs} == {"openai_legacy"}
    assert evs[0].payload == {"expression": "2340 * 0.17"}
    assert evs[1].payload == "397.8"
    assert evs[2].payload == {"amount": 397.8, "from": "USD", "to": "EUR"}


def test_openai_responses() -> None:
    lines = parse_file("openai_responses.jsonl")
    conv = "conv_68a2f1c9e4b08190a3d7"
    # response object: the reasoning item is skipped; conversation id from `conversation.id`
    assert [brief(e) for e in lines[0]] == [
        ("call", "call_12345xyz", "get_weather", None),
        ("call", "call_67890abc", "get_weather", None),
    ]
    assert {e.conversation_id for e in lines[0]} == {conv}
    assert lines[0][1].payload == {"location": "Bogotá, Colombia"}
    assert lines[0][0].ts_ms == 1741476542 * 1000  # created_at
    assert [brief(e) for e in lines[1] + lines[2]] == [
        ("result", "call_67890abc", None, None),
        ("result", "call_12345xyz", None, None),
    ]
    assert lines[1][0].payload == '{"temp_c": 14}'
    assert lines[3] == []  # an assistant message item
    assert [brief(e) for e in lines[4] + lines[5]] == [
        ("call", "call_aEuRSzS7q2FgSLPgGH1R7wYp", "code_exec", None),
        ("result", "call_aEuRSzS7q2FgSLPgGH1R7wYp", None, None),
    ]
    assert lines[4][0].payload == "print(sum(range(1, 101)))"  # custom tool input is free text
    # remote MCP calls hold their own output: a call and a result per item
    mcp_ok = "mcp_682d437d90a88191bf88cd03aae0c3e503937d5f622d7a90"
    mcp_err = "mcp_682d437d90a88191bf88cd03aae0c3e503937d5f622d7b11"
    assert [brief(e) for e in lines[6]] == [
        ("call", mcp_ok, "ask_question", None),
        ("result", mcp_ok, "ask_question", False),
        ("call", mcp_err, "read_wiki_structure", None),
        ("result", mcp_err, "read_wiki_structure", True),
    ]
    assert lines[6][3].payload == "Repository not found"
    assert {e.conversation_id for e in lines[6]} == {"conv_mcp_remote_3"}
    assert {e.format for e in flat(lines)} == {"openai_responses"}


def test_bedrock_converse() -> None:
    lines = parse_file("bedrock.jsonl")
    assert lines[0] == [] and lines[3] == []
    assert [brief(e) for e in lines[1]] == [
        ("call", "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "top_song", None),
        ("call", "tooluse_Qm3xTz9pS8uWcL2vNe4Ry0", "top_song", None),
    ]
    assert lines[1][0].payload == {"sign": "WZPZ"}
    assert lines[1][0].raw == {
        "toolUse": {
            "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
            "name": "top_song",
            "input": {"sign": "WZPZ"},
        }
    }
    assert [brief(e) for e in lines[2]] == [
        ("result", "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", None, False),  # status success
        ("result", "tooluse_Qm3xTz9pS8uWcL2vNe4Ry0", None, True),  # status error, id trimmed
    ]
    assert lines[2][0].payload == [{"json": {"song": "Elemental Hotel", "artist": "8 Storey Hike"}}]
    assert [brief(e) for e in lines[4] + lines[5]] == [
        ("call", "tooluse_8fHk2LmNq4RsTu6VwXy1Za", "get_stock_price", None),
        ("result", "tooluse_8fHk2LmNq4RsTu6VwXy1Za", None, None),  # no status: unknown
    ]
    assert {e.conversation_id for e in flat(lines)} == {"br-sess-0c9a77", "br-conv-51"}
    assert {e.format for e in flat(lines)} == {"bedrock"}


def test_gemini() -> None:
    lines = parse_file("gemini.jsonl")
    assert lines[0] == []
    assert [brief(e) for e in lines[1]] == [
        ("call", None, "set_light", None),
        ("call", None, "set_thermostat", None),
    ]
    assert lines[1][1].payload == {"celsius": 21}
    assert [brief(e) for e in lines[2]] == [
        ("result", None, "set_thermostat", False),
        ("result", None, "set_light", True),  # {"error": ...} response
    ]
    gid = "adk-6f1c2b3a-9d7e-4f10-b8c5-2e4a6d8f0b13"
    assert [brief(e) for e in lines[3] + lines[4]] == [
        ("call", gid, "list_events", None),
        ("result", gid, "list_events", False),
    ]
    assert lines[3][0].ts_ms == pytest.approx(ms("2025-06-18T13:21:44.809105"))  # createTime
    assert lines[3][0].raw["thoughtSignature"] == "CiQB0e2Kb7dVb0AzoWMP"  # the whole part is kept
    # snake_case spelling of the Python SDK
    assert [brief(e) for e in lines[5] + lines[6]] == [
        ("call", None, "create_event", None),
        ("result", None, "create_event", False),
    ]
    assert {e.format for e in flat(lines)} == {"gemini"}


def test_mcp() -> None:
    lines = parse_file("mcp.jsonl", key="kafka-key-7")
    # initialize, its result, a notification, tools/list and its result, progress, ping, ping result
    assert [n for n, evs in enumerate(lines, 1) if not evs] == [1, 2, 3, 4, 5, 8, 13, 14]
    evs = flat(lines)
    assert [brief(e) for e in evs] == [
        ("call", "2", "get_forecast", None),
        ("call", "req-3", "get_forecast", None),
        ("result", "req-3", None, True),  # result.isError
        ("result", "2", None, False),
        ("call", "4", "get_tide", None),
        ("result", "4", None, True),  # JSON-RPC error member
        ("call", "9", "get_forecast", None),
        ("result", "9", None, False),
    ]
    assert evs[0].payload == {"city": "Oslo"}
    assert evs[3].payload == [{"type": "text", "text": '{"city":"Oslo","high_c":17,"low_c":9}'}]
    assert evs[5].payload == {"code": -32602, "message": "Unknown tool: get_tide"}
    assert evs[0].raw["method"] == "tools/call"  # raw is the JSON-RPC message, not the wrapper
    assert {e.conversation_id for e in evs[:6]} == {"mcp-sess-4fd2a7c0e9b1"}
    assert {e.conversation_id for e in evs[6:]} == {"kafka-key-7"}  # bare messages: the Kafka key
    assert evs[0].ts_ms == ms("2025-06-20T10:00:03.100")
    assert {e.format for e in evs} == {"mcp"}


def test_size_is_the_record_split_over_its_events() -> None:
    raw = sample_lines("openai_responses.jsonl")[6]
    evs = parse_record(raw, {"file": "x", "line": 1})
    assert len(evs) == 4
    assert {e.size for e in evs} == {len(raw) // 4}
    assert sum(e.size for e in evs) <= len(raw) < sum(e.size for e in evs) + 4


def test_canonical_samples_match_the_json_schema() -> None:
    schema_path = Path(__file__).parents[2] / "stream_pairer" / "schemas" / "canonical_event.schema.json"
    validator = jsonschema_rs.Draft202012Validator(json.loads(schema_path.read_text()))
    for raw in sample_lines("canonical.jsonl"):
        validator.validate(json.loads(raw))
    for example in json.loads(schema_path.read_text())["examples"]:
        validator.validate(example)
        assert parse_record(orjson.dumps(example), {"file": "schema", "line": 1})
    # what the parser rejects, the schema rejects too
    assert not validator.is_valid({"conversation_id": "c", "type": "tool_call", "id": "x"})  # no name
    assert not validator.is_valid({"conversation_id": "c", "type": "tool_call", "name": "  "})
    assert not validator.is_valid({"conversation_id": "c", "type": "tool_result", "is_error": "yes"})
    assert not validator.is_valid({"conversation_id": "c", "type": "call"})
    assert not validator.is_valid({"conversation_id": ["c"], "type": "tool_result"})


def test_toolevent_field_order_matches_the_positional_construction() -> None:
    """parse_record builds ToolEvent positionally for speed; this pins the order it assumes."""
    names = [f.name for f in dataclasses.fields(ToolEvent)]
    assert names[:12] == [
        "type",
        "conversation_id",
        "id",
        "name",
        "payload",
        "ts_ms",
        "format",
        "source",
        "block",
        "is_error",
        "raw",
        "size",
    ]


def test_canonical_result_call_id_wins_over_its_own_event_id() -> None:
    """Logs often give every event an `id` of its own; on a result `call_id` can only mean the call
    answered, so it wins (a result with both used to reference its own event id and never pair)."""
    raw = b'{"conversation_id":"c","type":"tool_result","id":"evt-99","call_id":"k2","content":"x"}'
    (ev,) = parse_record(raw, {"file": "f", "line": 1})
    assert ev.id == "k2"
    call_raw = b'{"conversation_id":"c","type":"tool_call","id":"k2","call_id":"zzz","name":"t"}'
    (call,) = parse_record(call_raw, {"file": "f", "line": 2})
    assert call.id == "k2"  # on a call, `id` is the call's own id and still wins
