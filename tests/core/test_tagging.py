"""Failure-point tagging: every rule of docs/FAILURES.md, on payloads shaped as each format delivers them.

Events are built the way `stream_pairer.core.formats` builds them (payload = decoded arguments / raw
result content, `is_error` = the format's flag, `raw` = the original block), so each test states
which real-world record it stands for. One test at the end runs real records through the formats
layer and the engine, to prove the hook contract end to end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_pairer.core.model import CALL, RESULT, ToolEvent
from stream_pairer.core.toolschemas import ToolSchemaRegistry
from tests.reference.engine import Engine, EngineConfig
from tests.reference.state import Conversation
from tests.reference.tagging import (
    ARGUMENT_CONSTRUCTION,
    EMPTY,
    ERROR,
    EXECUTION,
    MAX_DECODE_CHARS,
    MAX_PENDING_REQUESTS,
    OK,
    POINTS,
    RESULT_INTERPRETATION,
    TERMINATION,
    TOOL_SELECTION,
    FailureTagger,
    classify_result,
    input_rejection,
)

SAMPLES = Path(__file__).parents[1] / "samples" / "tool_schemas" / "shapes"
T0 = 1_735_689_600_000.0  # 2025-01-01T00:00:00Z


def call(
    name: str | None,
    args: Any,
    id: str | None = "call_1",
    *,
    ts: float | None = T0,
    fmt: str = "anthropic",
    raw: Any = None,
    conv: str = "c1",
) -> ToolEvent:
    return ToolEvent(CALL, conv, id, name, args, ts, fmt, {"file": "t.jsonl", "line": 1}, raw=raw)


def result(
    content: Any, is_error: bool | None = None, id: str | None = "call_1", *, fmt: str = "anthropic"
) -> ToolEvent:
    return ToolEvent(
        RESULT, "c1", id, None, content, T0 + 50, fmt, {"file": "t.jsonl", "line": 2}, is_error=is_error
    )


def pair(
    tagger: FailureTagger, c: ToolEvent, r: ToolEvent, conv: Conversation | None = None
) -> dict[str, Any]:
    tagger.on_call(c, conv or Conversation(c.conversation_id))
    rec: dict[str, Any] = {"kind": "pair", "tool": c.name}
    tagger.tag(rec, c, r)
    return rec


@pytest.fixture(scope="module")
def registry() -> ToolSchemaRegistry:
    return ToolSchemaRegistry.load(SAMPLES)


# ---------------------------------------------------------------------------------------------
# outcome: ok / empty / error, per format


OUTCOME_CASES: list[tuple[str, Any, bool | None, str]] = [
    # Anthropic Messages / Claude Code tool_result blocks
    ("anthropic text", "Order ORD-12345678: shipped on 2025-01-02", False, OK),
    ("anthropic empty content list", [], None, EMPTY),
    ("anthropic one blank text block", [{"type": "text", "text": "  \n"}], None, EMPTY),
    ("anthropic text block of [] ", [{"type": "text", "text": "[]"}], False, EMPTY),
    (
        "anthropic text block with canonical empty",
        [{"type": "text", "text": '{"status": "empty", "data": null, "hint": "No order ORD-1. Ask again."}'}],
        False,
        EMPTY,
    ),
    (
        "anthropic image only",
        [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0"}}],
        None,
        OK,
    ),
    ("anthropic is_error", "<tool_use_error>Error: ENOENT: no such file</tool_use_error>", True, ERROR),
    (
        "anthropic server tool error object",
        {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
        True,
        ERROR,
    ),
    (
        "anthropic web search results (data list with types)",
        [{"type": "web_search_result", "url": "https://a", "title": "A"}],
        None,
        OK,
    ),
    # OpenAI Chat: role tool content is a string (or text parts)
    ("openai chat [] string", "[]", None, EMPTY),
    ("openai chat [ ] with spaces", "[ \n ]", None, EMPTY),
    ("openai chat {} string", "{}", None, EMPTY),
    ("openai chat null string", "null", None, EMPTY),
    ("openai chat whitespace", "   ", None, EMPTY),
    ("openai chat empty string", "", None, EMPTY),
    (
        "openai chat canonical error",
        '{"status":"error","data":null,"hint":"The order system is not answering."}',
        None,
        ERROR,
    ),
    (
        "openai chat canonical ok",
        '{"status":"ok","data":{"id":"ORD-12345678"},"hint":"Answer with this."}',
        None,
        OK,
    ),
    ("openai chat zero is an answer", "0", None, OK),
    ("openai chat false is an answer", "false", None, OK),
    ("openai chat text parts []", [{"type": "text", "text": "[]"}], None, EMPTY),
    ("openai chat non-empty JSON list", '[{"sku": "A1", "price": 12}]', None, OK),
    ("openai chat undecodable JSON-looking text", '{"status": "error", oops', None, OK),
    # OpenAI Responses function_call_output
    ("responses double-encoded []", '"[]"', None, EMPTY),
    ("responses input_text part", [{"type": "input_text", "text": ""}], None, EMPTY),
    ("responses mcp_call error string", "tool execution timed out after 30s", True, ERROR),
    # Bedrock Converse toolResult content blocks
    (
        "bedrock json canonical empty",
        [{"json": {"status": "empty", "data": None, "hint": "nothing"}}],
        None,
        EMPTY,
    ),
    ("bedrock text", [{"text": "Seoul: 3 C, clear"}], None, OK),
    ("bedrock status error", [{"text": "ThrottlingException: Rate exceeded"}], True, ERROR),
    ("bedrock json data", [{"json": {"city": "Seoul", "temp": 3}}], None, OK),
    # Gemini functionResponse.response
    ("gemini output []", {"output": []}, False, EMPTY),
    ("gemini result object", {"result": {"store": "Gangnam"}}, False, OK),
    ("gemini error", {"error": {"message": "DEADLINE_EXCEEDED"}}, True, ERROR),
    (
        "gemini output canonical empty",
        {"output": {"status": "empty", "data": None, "hint": "none"}},
        False,
        EMPTY,
    ),
    # MCP tools/call responses (payload = result.content, or the error object)
    ("mcp one empty text", [{"type": "text", "text": ""}], False, EMPTY),
    ("mcp text with JSON data", [{"type": "text", "text": '{"rows": [1, 2]}'}], False, OK),
    ("mcp isError", [{"type": "text", "text": "Error executing tool read_file: EACCES"}], True, ERROR),
    ("mcp JSON-RPC error object", {"code": -32603, "message": "Internal error"}, True, ERROR),
    (
        "mcp whole CallToolResult isError",
        {"content": [{"type": "text", "text": "boom"}], "isError": True},
        None,
        ERROR,
    ),
    (
        "mcp whole CallToolResult structured empty",
        {
            "content": [{"type": "text", "text": "..."}],
            "structuredContent": {"status": "empty", "data": None},
        },
        None,
        EMPTY,
    ),
    # canonical format
    ("canonical null content", None, None, EMPTY),
    ("canonical status ok with empty data", {"status": "ok", "data": [], "hint": "found"}, False, EMPTY),
    (
        "canonical status empty with data null",
        {"status": "empty", "data": None, "hint": "no rows"},
        False,
        EMPTY,
    ),
    (
        "canonical status error overrides is_error false",
        {"status": "error", "data": None, "hint": "timeout"},
        False,
        ERROR,
    ),
    ("error flag wins over an empty payload", [], True, ERROR),
    ("error flag wins over canonical ok", {"status": "ok", "data": {"a": 1}}, True, ERROR),
    ("unknown status value is data", {"status": "shipped", "order": "ORD-12345678"}, None, OK),
    ("unhashable status is data", {"status": ["a"], "data": None}, None, OK),
]


@pytest.mark.parametrize(
    ("case", "content", "is_error", "expected"), OUTCOME_CASES, ids=[c[0] for c in OUTCOME_CASES]
)
def test_outcome(case: str, content: Any, is_error: bool | None, expected: str) -> None:
    assert classify_result(content, is_error).outcome == expected, case


def test_outcome_of_huge_json_text_is_not_decoded() -> None:
    """Documented bound: JSON text past MAX_DECODE_CHARS is not searched for the canonical shape."""
    small = orjson.dumps({"status": "error", "data": "x" * 10}).decode()
    big = orjson.dumps({"status": "error", "data": "x" * MAX_DECODE_CHARS}).decode()
    assert classify_result(small, None).outcome == ERROR
    assert classify_result(big, None).outcome == OK


def test_outcome_on_records() -> None:
    tagger = FailureTagger()
    rec = pair(tagger, call("lookup_order", {"order_id": "ORD-12345678"}), result("[]", fmt="openai_chat"))
    assert rec["outcome"] == EMPTY
    orphan: dict[str, Any] = {"kind": "orphan_call", "reason": "shutdown"}
    c = call("lookup_order", {"order_id": "ORD-12345678"})
    tagger.on_call(c, Conversation("c1"))
    tagger.tag(orphan, c, None)
    assert orphan["outcome"] is None
    assert orphan["failure"] is None and orphan["failures"] == [] and orphan["failure_detail"] is None


# ---------------------------------------------------------------------------------------------
# argument_construction


@pytest.mark.parametrize(
    ("tool", "args", "rule", "path"),
    [
        ("lookup_order", {"order_id": "Kim Minsu"}, "pattern", "/order_id"),  # the article's example
        ("lookup_order", {}, "required", "/"),
        (
            "refund_order",
            {"order_id": "ORD-12345678", "amount_cents": "12.50", "reason": "late"},
            "type",
            "/amount_cents",
        ),
        (
            "refund_order",
            {"order_id": "ORD-12345678", "amount_cents": 1250, "reason": "changed mind"},
            "enum",
            "/reason",
        ),
        (
            "refund_order",
            {"order_id": "ORD-12345678", "amount_cents": 1, "reason": "late", "x": 1},
            "additionalProperties",
            "/",
        ),
        ("get_shipping_eta", {"order_id": "ORD-12345678", "as_of": "tomorrow"}, "format", "/as_of"),
        ("read_file", {"path": "a.txt", "range": [1, "ten"]}, "type", "/range/1"),  # 2020-12 prefixItems
        ("get_weather", {"city": "Seoul", "unit": "kelvin"}, "enum", "/unit"),  # Bedrock toolSpec
        ("find_store", {"postal_code": 6236}, "type", "/postal_code"),  # Gemini OpenAPI parameters
    ],
)
def test_schema_violation_is_argument_construction(
    registry: ToolSchemaRegistry, tool: str, args: dict[str, Any], rule: str, path: str
) -> None:
    rec = pair(FailureTagger(registry), call(tool, args), result("ok"))
    assert rec["failure"] == ARGUMENT_CONSTRUCTION
    assert rec["failure_detail"].startswith(f"schema {rule} at {path}:")
    assert rec["outcome"] == OK  # outcome and failure are separate: the tool accepted bad input


def test_schema_detail_does_not_copy_the_argument_value(registry: ToolSchemaRegistry) -> None:
    rec = pair(
        FailureTagger(registry), call("lookup_order", {"order_id": "Kim Minsu 010-1234-5678"}), result("x")
    )
    assert "Kim" not in rec["failure_detail"] and "010" not in rec["failure_detail"]


def test_conforming_arguments_are_not_tagged(registry: ToolSchemaRegistry) -> None:
    tagger = FailureTagger(registry)
    good = [
        call("lookup_order", {"order_id": "ORD-12345678"}),
        call("search_products", {"query": "running shoes", "category": None, "limit": 5}, fmt="openai_chat"),
        call("read_file", {"path": "README.md", "range": [1, 20]}, fmt="mcp"),
        call("find_store", {"postal_code": "06236", "open_now": None}, fmt="gemini"),
        call("bash", {"command": "ls"}),  # registered without a schema: any arguments
    ]
    for i, c in enumerate(good):
        c.id = f"call_{i}"
        assert pair(tagger, c, result("fine", id=c.id))["failures"] == [], c.name


def test_undecodable_json_arguments(registry: ToolSchemaRegistry) -> None:
    """OpenAI arguments cut by a max_tokens stop: the formats layer keeps the string verbatim."""
    truncated = '{"query": "running shoes", "lim'
    for tagger in (FailureTagger(), FailureTagger(registry)):
        rec = pair(tagger, call("search_products", truncated, fmt="openai_chat"), result("[]"))
        assert rec["failure"] == ARGUMENT_CONSTRUCTION
        assert rec["failure_detail"].startswith("arguments are not valid JSON")
        assert rec["failures"] == [ARGUMENT_CONSTRUCTION, RESULT_INTERPRETATION]


def test_free_form_custom_tool_input_is_not_json(registry: ToolSchemaRegistry) -> None:
    raw = {"id": "call_9", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}
    rec = pair(
        FailureTagger(registry),
        call("apply_patch", "*** Begin Patch", fmt="openai_chat", raw=raw),
        result("done"),
    )
    assert rec["failures"] == []


def test_json_string_of_a_non_object_is_validated(registry: ToolSchemaRegistry) -> None:
    rec = pair(
        FailureTagger(registry), call("lookup_order", '["ORD-12345678"]', fmt="openai_chat"), result("x")
    )
    assert rec["failure"] == ARGUMENT_CONSTRUCTION
    assert rec["failure_detail"].startswith("schema type at /:")
    assert pair(FailureTagger(), call("lookup_order", '["ORD-12345678"]'), result("x"))["failures"] == []


def test_absent_arguments_are_checked_as_empty_object(registry: ToolSchemaRegistry) -> None:
    missing = pair(FailureTagger(registry), call("lookup_order", None, fmt="mcp"), result("x"))
    assert missing["failure_detail"] == 'schema required at /: "order_id" is a required property'
    assert pair(FailureTagger(registry), call("bash", None), result("x"))["failures"] == []


@pytest.mark.parametrize(
    ("content", "is_error"),
    [
        # Claude Code: the harness refuses the input before running the tool.
        (
            "<tool_use_error>InputValidationError: Read failed due to the following issue:\n"
            "The required parameter `file_path` is missing</tool_use_error>",
            True,
        ),
        # The article's repair loop: fed back as a plain tool message, no error flag.
        ("입력이 거부되었다: order_id는 ORD-로 시작하는 8자리 번호여야 한다", None),
        # MCP Python SDK.
        ([{"type": "text", "text": "Input validation error: 'order_id' is a required property"}], True),
        # MCP TypeScript SDK, surfaced as text.
        (
            [{"type": "text", "text": "MCP error -32602: Invalid arguments for tool lookup_order: order_id"}],
            True,
        ),
        # JSON-RPC invalid params as the MCP error payload.
        ({"code": -32602, "message": "Invalid params"}, True),
        # The canonical shape with the rejection in the hint.
        ({"status": "error", "data": None, "hint": "Input rejected: amount_cents must be an integer"}, False),
        ("Error: invalid arguments: limit must be <= 50", None),
    ],
)
def test_input_rejection_is_argument_construction_not_execution(content: Any, is_error: bool | None) -> None:
    rec = pair(FailureTagger(), call("lookup_order", {"order_id": "ORD-12345678"}), result(content, is_error))
    assert rec["failure"] == ARGUMENT_CONSTRUCTION
    assert EXECUTION not in rec["failures"]
    assert rec["failure_detail"].startswith("input rejected")
    assert "input rejected: input rejected" not in rec["failure_detail"].lower()


@pytest.mark.parametrize(
    "text",
    [
        "Found 3 orders. Note: one had an invalid input address and was skipped.",
        "Invalidated cache for ORD-12345678",
        "The validator rejected nothing; all good",
    ],
)
def test_rejection_heuristic_is_anchored(text: str) -> None:
    assert input_rejection(classify_result(text, None)) is None
    assert input_rejection(classify_result(text, True)) is None


# ---------------------------------------------------------------------------------------------
# execution, result_interpretation


def test_error_result_is_execution() -> None:
    rec = pair(
        FailureTagger(),
        call("lookup_order", {"order_id": "ORD-12345678"}),
        result("upstream returned 503", True),
    )
    assert rec["outcome"] == ERROR
    assert rec["failure"] == EXECUTION
    assert rec["failure_detail"] == "error result (error flag): upstream returned 503"


def test_canonical_error_without_flag_is_execution() -> None:
    content = (
        '{"status": "error", "data": null, "hint": "The order system is not answering. Ask to retry later."}'
    )
    rec = pair(
        FailureTagger(),
        call("lookup_order", {"order_id": "ORD-12345678"}, fmt="openai_chat"),
        result(content),
    )
    assert (rec["outcome"], rec["failure"]) == (ERROR, EXECUTION)
    assert "status error" in rec["failure_detail"] and "not answering" in rec["failure_detail"]


@pytest.mark.parametrize(
    ("reason", "tagged"),
    [
        ("timeout", True),
        ("shutdown", False),
        ("evicted", False),
        ("superseded", False),
        ("end_of_input", False),
        ("rebalance", False),
    ],
)
def test_orphan_call_timeout_is_execution(reason: str, tagged: bool) -> None:
    tagger = FailureTagger()
    c = call("lookup_order", {"order_id": "ORD-12345678"})
    tagger.on_call(c, Conversation("c1"))
    rec: dict[str, Any] = {"kind": "orphan_call", "reason": reason}
    tagger.tag(rec, c, None)
    assert rec["outcome"] is None
    assert rec["failure"] == (EXECUTION if tagged else None)


def test_empty_result_is_result_interpretation() -> None:
    rec = pair(
        FailureTagger(), call("search_products", {"query": "x"}), result([{"type": "text", "text": "[]"}])
    )
    assert rec["failure"] == RESULT_INTERPRETATION
    assert rec["failure_detail"] == "empty result (empty list)"


def test_orphan_result_is_tagged_from_its_content() -> None:
    tagger = FailureTagger()
    rec: dict[str, Any] = {"kind": "orphan_result", "reason": "no_call"}
    tagger.tag(rec, None, result({"status": "empty", "data": None}))
    assert (rec["outcome"], rec["failure"]) == (EMPTY, RESULT_INTERPRETATION)
    late: dict[str, Any] = {"kind": "orphan_result", "reason": "late_result"}
    tagger.tag(late, None, result("connection reset", True))
    assert (late["outcome"], late["failure"]) == (ERROR, EXECUTION)


# ---------------------------------------------------------------------------------------------
# termination


def run_calls(
    tagger: FailureTagger, calls: list[ToolEvent], conv: Conversation | None = None
) -> list[ToolEvent]:
    conv = conv or Conversation("c1")
    for c in calls:
        tagger.on_call(c, conv)
    return calls


def test_repeated_identical_call_names_the_earlier_call() -> None:
    tagger = FailureTagger()
    a, b, c = run_calls(
        tagger,
        [
            call(
                "search_products", {"query": "shoes", "filters": {"size": 270, "color": "black"}}, "toolu_01"
            ),
            call(
                "search_products", {"filters": {"color": "black", "size": 270}, "query": "shoes"}, "toolu_02"
            ),
            call(
                "search_products", {"query": "shoes", "filters": {"size": 270, "color": "black"}}, "toolu_03"
            ),
        ],
    )
    assert a.failures == []
    assert b.failure == TERMINATION and c.failure == TERMINATION
    assert (
        b.failure_detail is not None
        and "repeats call toolu_01" in b.failure_detail
        and "#2" in b.failure_detail
    )
    assert (
        c.failure_detail is not None
        and "repeats call toolu_01" in c.failure_detail
        and "#3" in c.failure_detail
    )


def test_openai_string_arguments_repeat_a_decoded_object() -> None:
    tagger = FailureTagger()
    _, b = run_calls(
        tagger, [call("s", {"q": "x", "n": 1}, "a"), call("s", '{"n": 1, "q": "x"}', "b", fmt="openai_chat")]
    )
    assert b.failure == TERMINATION


@pytest.mark.parametrize(
    ("name", "args", "conv_id"),
    [
        ("search_products", {"query": "shoes", "limit": 11}, "c1"),  # arguments differ
        ("search_products", {"query": "shoes", "limit": 10.5}, "c1"),  # a value differs
        ("lookup_order", {"query": "shoes", "limit": 10}, "c1"),  # tool differs
        ("search_products", {"query": "shoes", "limit": 10}, "c2"),  # conversation differs
    ],
)
def test_not_a_repeat(name: str, args: dict[str, Any], conv_id: str) -> None:
    tagger = FailureTagger()
    convs = {"c1": Conversation("c1"), "c2": Conversation("c2")}
    tagger.on_call(call("search_products", {"query": "shoes", "limit": 10}, "a"), convs["c1"])
    second = call(name, args, "b", conv=conv_id)
    tagger.on_call(second, convs[conv_id])
    assert second.failures == []


def test_redelivered_call_is_neither_a_repeat_nor_counted() -> None:
    tagger = FailureTagger(max_calls_per_conversation=2)
    conv = Conversation("c1")
    a = call("s", {"q": 1}, "same")
    again = call("s", {"q": 1}, "same")
    b = call("s", {"q": 2}, "b")
    run_calls(tagger, [a, again, b], conv)
    assert again.failures == [] and b.failures == []  # b is call 2 of 2, not 3


def test_calls_without_ids_repeat_by_position() -> None:
    tagger = FailureTagger()
    _, b = run_calls(
        tagger,
        [
            call("get_weather", {"city": "Seoul"}, None, fmt="openai_legacy"),
            call("get_weather", {"city": "Seoul"}, None, fmt="openai_legacy"),
        ],
    )
    assert b.failure_detail is not None and "repeats call #1 (no id)" in b.failure_detail


@pytest.mark.parametrize("cap", [1, 3, 12])
def test_call_cap_tags_only_the_crossing_call(cap: int) -> None:
    tagger = FailureTagger(max_calls_per_conversation=cap)
    calls = run_calls(tagger, [call("s", {"page": i}, f"id{i}") for i in range(cap + 3)])
    tagged = [i + 1 for i, c in enumerate(calls) if c.failure == TERMINATION]
    assert tagged == [cap + 1]  # the call that crosses the cap; later ones are not tagged again
    assert calls[cap].failure_detail == f"call {cap + 1} in this request, past the cap of {cap}"
    assert tagger.crossings == {"calls": 1}


def test_default_cap_is_twelve() -> None:
    calls = run_calls(FailureTagger(), [call("s", {"page": i}, f"id{i}") for i in range(13)])
    assert [c.failure for c in calls[:12]] == [None] * 12
    assert calls[12].failure == TERMINATION


def test_call_cap_counts_per_request() -> None:
    """The issue's case: 30 requests of 7 calls each under a cap of 12 cross nothing (counting
    per conversation tagged 198 of those 210 calls); a request of 13 crosses once."""
    tagger = FailureTagger(max_calls_per_conversation=12)
    conv = Conversation("c1")
    calls = []
    for r in range(30):
        tagger.on_request(conv, T0 + r * 60_000)
        calls += run_calls(
            tagger, [call("s", {"r": r, "i": i}, f"r{r}-{i}", ts=T0 + r * 60_000 + i) for i in range(7)], conv
        )
    assert [c for c in calls if c.failures] == []
    tagger.on_request(conv, T0 + 31 * 60_000)
    last = run_calls(tagger, [call("s", {"x": i}, f"x{i}", ts=T0 + 31 * 60_000 + i) for i in range(14)], conv)
    assert [i for i, c in enumerate(last) if c.failure == TERMINATION] == [12]
    assert tagger.crossings == {"calls": 1}


def test_wall_time_cap_from_the_request_start() -> None:
    tagger = FailureTagger(max_conversation_ms=60_000)
    conv = Conversation("c1")
    tagger.on_request(conv, T0 - 30_000)  # the prompt, 30 s before the first call
    calls = run_calls(
        tagger,
        [
            call("s", {"p": 0}, "a", ts=T0),
            call("s", {"p": 1}, "b", ts=T0 + 30_000),  # exactly at the cap: not past it
            call("s", {"p": 2}, "c", ts=None),  # no time: cannot be judged
            call("s", {"p": 3}, "d", ts=T0 + 30_001),
            call("s", {"p": 4}, "e", ts=T0 + 90_000),  # past it too, but this request already crossed
        ],
        conv,
    )
    assert [c.failure for c in calls] == [None, None, None, TERMINATION, None]
    assert calls[3].failure_detail == "call at +60.0 s after the start of this request, past the 60 s cap"
    tagger.on_request(conv, T0 + 100_000)  # the next request starts the clock again
    (f,) = run_calls(tagger, [call("s", {"p": 5}, "f", ts=T0 + 120_000)], conv)
    assert f.failures == []
    assert tagger.crossings == {"time": 1}


def test_without_request_marks_time_counts_from_the_first_call() -> None:
    tagger = FailureTagger(max_conversation_ms=60_000)
    calls = run_calls(tagger, [call("s", {"p": 0}, "a", ts=T0), call("s", {"p": 1}, "b", ts=T0 + 60_001)])
    assert [c.failure for c in calls] == [None, TERMINATION]


def test_zero_disables_a_brake() -> None:
    tagger = FailureTagger(max_calls_per_conversation=0, max_conversation_ms=0)
    calls = run_calls(tagger, [call("s", {"p": i}, f"i{i}", ts=T0 + i * 3_600_000) for i in range(30)])
    assert all(c.failures == [] for c in calls)


def test_repeat_memory_is_bounded() -> None:
    tagger = FailureTagger(max_hashes_per_conversation=2)
    conv = Conversation("c1")
    calls = run_calls(
        tagger,
        [
            call("s", {"p": 1}, "a"),
            call("s", {"p": 2}, "b"),
            call("s", {"p": 3}, "c"),
            call("s", {"p": 1}, "d"),  # its original was forgotten: not detected (documented bound)
            call("s", {"p": 3}, "e"),
        ],
        conv,
    )
    assert len(conv.tags.seen) <= 2
    assert [c.failure for c in calls] == [None, None, None, None, TERMINATION]


def test_state_lives_in_the_conversation() -> None:
    tagger = FailureTagger()
    c1 = call("s", {"q": 1}, "a")
    tagger.on_call(c1, Conversation("c1"))
    c2 = call("s", {"q": 1}, "b")
    tagger.on_call(c2, Conversation("c1"))  # a new (evicted and recreated) conversation: state gone
    assert c2.failures == []


# ---------------------------------------------------------------------------------------------
# tool_selection and priority


def test_unknown_tool_is_tool_selection_only_with_a_registry(registry: ToolSchemaRegistry) -> None:
    rec = pair(FailureTagger(registry), call("cancel_order", {"order_id": "ORD-12345678"}), result("done"))
    assert rec["failure"] == TOOL_SELECTION
    assert rec["failure_detail"] == "tool 'cancel_order' is not among the 9 registered tools"
    assert pair(FailureTagger(), call("cancel_order", {"order_id": "x"}), result("done"))["failures"] == []


def test_priority_follows_the_life_of_a_call(registry: ToolSchemaRegistry) -> None:
    assert POINTS == (TOOL_SELECTION, ARGUMENT_CONSTRUCTION, EXECUTION, RESULT_INTERPRETATION, TERMINATION)
    tagger = FailureTagger(registry)
    conv = Conversation("c1")
    # unknown tool that then errors
    rec = pair(tagger, call("cancel_order", {}, "a"), result("HTTP 500", True, "a"), conv)
    assert rec["failures"] == [TOOL_SELECTION, EXECUTION] and rec["failure"] == TOOL_SELECTION
    assert rec["failure_detail"].startswith("tool 'cancel_order'")
    # bad arguments, repeated, empty result: three points, the schema one first
    pair(tagger, call("lookup_order", {"order_id": "Kim"}, "b"), result("[]", id="b"), conv)
    rec = pair(tagger, call("lookup_order", {"order_id": "Kim"}, "c"), result("[]", id="c"), conv)
    assert rec["failures"] == [ARGUMENT_CONSTRUCTION, RESULT_INTERPRETATION, TERMINATION]
    assert rec["failure_detail"].startswith("schema pattern")
    # a well-formed repeat of an empty lookup: the empty result is the primary point
    pair(tagger, call("lookup_order", {"order_id": "ORD-00000001"}, "d"), result("[]", id="d"), conv)
    rec = pair(tagger, call("lookup_order", {"order_id": "ORD-00000001"}, "e"), result("[]", id="e"), conv)
    assert rec["failures"] == [RESULT_INTERPRETATION, TERMINATION]
    assert rec["failure_detail"] == "empty result (empty list)"


def test_no_clock_read_same_input_same_output(registry: ToolSchemaRegistry) -> None:
    def once() -> list[Any]:
        tagger = FailureTagger(registry, max_calls_per_conversation=2)
        conv = Conversation("c1")
        out = []
        for i in range(4):
            out.append(
                pair(
                    tagger,
                    call("lookup_order", {"order_id": "ORD-1"}, f"x{i}"),
                    result("[]", id=f"x{i}"),
                    conv,
                )
            )
        return out

    assert once() == once()


def test_tagger_rejects_bad_limits() -> None:
    with pytest.raises(ValueError):
        FailureTagger(max_calls_per_conversation=-1)
    with pytest.raises(ValueError):
        FailureTagger(max_hashes_per_conversation=0)


# ---------------------------------------------------------------------------------------------
# the hook contract, end to end: real records -> formats layer -> engine -> tagged records


def test_engine_emits_tagged_records(registry: ToolSchemaRegistry) -> None:
    from stream_pairer.core.formats import parse_record  # noqa: PLC0415
    from tests.reference.engine import Engine, EngineConfig  # noqa: PLC0415 - the lead's module

    lines = [
        {
            "conversation_id": "s1",
            "type": "tool_call",
            "id": "t1",
            "name": "lookup_order",
            "arguments": {"order_id": "Kim Minsu"},
            "ts": "2025-01-01T00:00:00Z",
        },
        {
            "conversation_id": "s1",
            "type": "tool_result",
            "id": "t1",
            "content": "[]",
            "is_error": False,
            "ts": "2025-01-01T00:00:01Z",
        },
        {
            "conversation_id": "s1",
            "type": "tool_call",
            "id": "t2",
            "name": "lookup_order",
            "arguments": {"order_id": "Kim Minsu"},
            "ts": "2025-01-01T00:00:02Z",
        },
        {
            "conversation_id": "s1",
            "type": "tool_call",
            "id": "t3",
            "name": "teleport",
            "arguments": {},
            "ts": "2025-01-01T00:00:03Z",
        },
        {
            "conversation_id": "s1",
            "type": "tool_result",
            "id": "t3",
            "content": "no such tool",
            "is_error": True,
            "ts": "2025-01-01T00:00:04Z",
        },
    ]
    engine = Engine(EngineConfig(call_timeout_ms=60_000), tagger=FailureTagger(registry))
    out: list[dict[str, Any]] = engine.advance(0.0)  # processing time starts
    for i, line in enumerate(lines, 1):
        for ev in parse_record(orjson.dumps(line), {"file": "x.jsonl", "line": i}):
            out.extend(engine.process(ev))
    out.extend(engine.advance(3_600_000))  # t2 never answered: timeout (processing time)
    by_id = {(r["call"] if r["kind"] == "pair" else r["event"])["id"]: r for r in out}
    assert by_id["t1"]["failures"] == [ARGUMENT_CONSTRUCTION, RESULT_INTERPRETATION]
    assert by_id["t2"]["kind"] == "orphan_call" and by_id["t2"]["reason"] == "timeout"
    assert by_id["t2"]["failures"] == [ARGUMENT_CONSTRUCTION, EXECUTION, TERMINATION]
    assert by_id["t3"]["failures"] == [TOOL_SELECTION, EXECUTION]
    assert "repeats call t1" not in by_id["t2"]["failure_detail"]  # primary is the schema rule
    assert by_id["t2"]["failure_detail"].startswith("schema pattern at /order_id")
    assert all(r["outcome"] in (OK, EMPTY, ERROR, None) for r in out)


# ---------------------------------------------------------------------------------------------
# tool schema registry


def test_registry_reads_every_definition_shape(registry: ToolSchemaRegistry) -> None:
    assert list(registry) == sorted(
        [
            "lookup_order",
            "refund_order",
            "bash",  # Anthropic (bash: built-in, no schema)
            "search_products",  # OpenAI Chat {"type": "function", "function": ...} in a request body
            "get_shipping_eta",
            "apply_patch",  # OpenAI Responses flat + custom
            "read_file",  # MCP tools/list response
            "get_weather",  # Bedrock toolSpec
            "find_store",  # Gemini functionDeclarations
        ]
    )
    bash = registry.get("bash")
    assert bash is not None and bash.schema is None
    find_store = registry.get("find_store")
    assert find_store is not None and isinstance(find_store.schema, dict)
    assert find_store.schema["properties"]["open_now"]["type"] == ["boolean", "null"]


def test_registry_single_file_and_flat_openai(tmp_path: Path) -> None:
    f = tmp_path / "legacy.json"
    f.write_text(
        '{"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}'
    )
    reg = ToolSchemaRegistry.load(f)
    tool = reg.get("get_time")
    assert tool is not None and tool.check({"tz": 9}) is not None and tool.check({"tz": "Asia/Seoul"}) is None
    assert "get_time" in reg and "other" not in reg and len(reg) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('[{"description": "no name"}]', "needs a non-empty string 'name'"),
        ('{"name": "x", "input_schema": {"type": "strin"}}', "unusable JSON Schema"),
        (
            '{"name": "x", "input_schema": {"type": "object", '
            '"properties": {"a": {"pattern": "(unclosed"}}}}',
            "unusable JSON Schema",
        ),
        ('{"name": "x", "input_schema": {"$ref": "https://example.com/s.json"}}', "unusable JSON Schema"),
        ('{"name": "x", "input_schema": "object"}', "must be a JSON object"),
        ("42", "expected a tool definition object"),
        ("[]", "no tool definitions found"),
        (
            '[{"name": "x", "input_schema": {"type": "object"}}, '
            '{"name": "x", "input_schema": {"type": "array"}}]',
            "already defined with a different schema",
        ),
    ],
)
def test_registry_errors_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    from stream_pairer.core.toolschemas import ToolSchemaError  # noqa: PLC0415

    f = tmp_path / "tools.json"
    f.write_text(content)
    with pytest.raises(ToolSchemaError, match=message) as info:
        ToolSchemaRegistry.load(f)
    assert str(f) in str(info.value)


def test_registry_path_errors(tmp_path: Path) -> None:
    from stream_pairer.core.toolschemas import ToolSchemaError  # noqa: PLC0415

    with pytest.raises(ToolSchemaError, match="no such file"):
        ToolSchemaRegistry.load(tmp_path / "missing.json")
    with pytest.raises(ToolSchemaError, match=r"no \*\.json"):
        ToolSchemaRegistry.load(tmp_path)


def test_identical_duplicate_definitions_are_accepted() -> None:
    d = {"name": "x", "input_schema": {"type": "object"}}
    reg = ToolSchemaRegistry.from_definitions(
        [d, {"type": "function", "function": {"name": "x", "parameters": {"type": "object"}}}]
    )
    assert len(reg) == 1


# ---------------------------------------------------------------------------------------------
# the repeat check's key and memory


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"n": 1}, {"n": 1.0}),  # JSON text differs: 1 vs 1.0
        ({"n": 1}, {"n": True}),
        ({"n": 1}, {"n": "1"}),
        ({"n": -1}, {"n": -2}),  # hash(-1) == hash(-2) in CPython: must not make a repeat
        ({"n": 5}, {"n": 5 + 2**61 - 1}),  # int hashes wrap modulo 2^61 - 1
        ({"n": 0.0}, {"n": -0.0}),
        ({"n": None}, {"n": []}),
        ({"l": [1, 2]}, {"l": [2, 1]}),  # array order matters
        ({"a": {"b": 1}}, {"a": {"b": 2}}),
        ({"a": 1, "b": 2}, {"a": 2, "b": 1}),
        ({"v": list(range(100))}, {"v": list(range(99))}),  # long arrays (serialized, not walked)
        ({"v": list(range(100))}, {"v": [*range(99), 100]}),
    ],
)
def test_repeat_key_tells_different_arguments_apart(first: Any, second: Any) -> None:
    _, b = run_calls(FailureTagger(), [call("s", first, "a"), call("s", second, "b")])
    assert b.failures == []


@pytest.mark.parametrize(
    "args",
    [
        {"q": "검색어 with ASCII", "n": 1, "f": 1.5, "t": True, "z": None},
        {"nested": {"b": [1, {"c": "x"}], "a": []}},
        {"big": {f"k{i}": i for i in range(40)}},  # a large object: serialized with sorted keys
        {"v": [0.5] * 50},
        "plain text",
        ["a", 1],
        {},
    ],
)
def test_repeat_key_is_canonical(args: Any) -> None:
    """The same arguments, rebuilt (fresh objects, object keys in reverse order), are a repeat."""

    def rebuilt(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: rebuilt(x) for k, x in reversed(list(v.items()))}
        if isinstance(v, list):
            return [rebuilt(x) for x in v]
        return orjson.loads(orjson.dumps(v))

    _, b = run_calls(FailureTagger(), [call("s", args, "a"), call("s", rebuilt(args), "b")])
    assert TERMINATION in b.failures  # (plain text is also argument_construction: not JSON)


def test_repeat_check_does_not_pin_utf8_copies_in_held_arguments() -> None:
    """Serializing a non-ASCII str makes CPython keep its UTF-8 form inside the string for its
    life; the repeat check must not do that to the arguments of every held call."""
    import tracemalloc  # noqa: PLC0415 - only this test traces allocations

    tagger = FailureTagger()
    text = "한국어 검색어 " * 500  # 4,000 characters, ~9 KB as UTF-8
    convs = [Conversation(f"c{i}") for i in range(20)]
    calls = [call("s", orjson.loads(orjson.dumps({"q": text + str(i)})), f"id{i}") for i in range(20)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for c, conv in zip(calls, convs, strict=True):
            tagger.on_call(c, conv)
        retained = (tracemalloc.get_traced_memory()[0] - before) / len(calls)
    finally:
        tracemalloc.stop()
    assert retained < 2_000  # the tagger's own entries; a pinned UTF-8 copy alone would be ~9 KB


def test_repeat_memory_is_bounded_across_conversations() -> None:
    tagger = FailureTagger(max_hashes_total=3)
    convs = [Conversation(f"c{i}") for i in range(5)]
    for i, conv in enumerate(convs):
        tagger.on_call(call("s", {"p": 1}, f"first{i}", conv=conv.conversation_id), conv)
    assert tagger.remembered_calls == 3
    assert sum(len(c.tags.seen) for c in convs) == 3
    # The two oldest conversations' calls were forgotten: their repeats go unseen ...
    old = call("s", {"p": 1}, "again0", conv="c0")
    tagger.on_call(old, convs[0])
    assert old.failures == []
    # ... while the newest conversation still has its call.
    new = call("s", {"p": 1}, "again4", conv="c4")
    tagger.on_call(new, convs[4])
    assert new.failure == TERMINATION and new.failure_detail is not None
    assert "repeats call first4" in new.failure_detail
    assert tagger.remembered_calls == 3
    assert sum(len(c.tags.seen) for c in convs) <= 3


def test_total_bound_forgets_only_the_entry_it_remembers() -> None:
    """An entry the per-conversation cap already dropped stays in the process-wide queue; when it
    reaches the front it must not delete a newer entry stored under the same key."""
    tagger = FailureTagger(max_hashes_per_conversation=2, max_hashes_total=4)
    a, b = Conversation("c1"), Conversation("c2")
    run_calls(tagger, [call("s", {"p": 1}, "a"), call("s", {"p": 2}, "b"), call("s", {"p": 3}, "c")], a)
    run_calls(tagger, [call("s", {"p": 1}, "d")], a)  # p=1 forgotten by the cap: stored anew
    run_calls(tagger, [call("s", {"q": 1}, "e", conv="c2")], b)  # pushes the stale p=1 item out
    [f] = run_calls(tagger, [call("s", {"p": 1}, "f")], a)
    assert f.failure == TERMINATION and f.failure_detail is not None
    assert "repeats call d" in f.failure_detail
    assert tagger.remembered_calls <= 4


def test_total_bound_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FailureTagger(max_hashes_total=0)


def test_time_of_the_first_request_counts_from_its_prompt_before_the_conversation_exists() -> None:
    """The prompt of a conversation's first request comes before the engine holds the conversation:
    the tagger keeps its time until the first call creates the state."""
    tagger = FailureTagger(max_conversation_ms=60_000)
    engine = Engine(EngineConfig(), tagger=tagger)
    engine.mark_request("c1", T0)  # no conversation yet
    engine.process(call("s", {"p": 0}, "a", ts=T0 + 30_000))
    out = engine.process(call("s", {"p": 1}, "b", ts=T0 + 60_001))  # 60.001 s after the prompt
    out += engine.flush("end_of_input")
    tagged = [o["event"]["id"] for o in out if "termination" in o["failures"]]
    assert tagged == ["b"]
    assert tagger.crossings == {"time": 1}


def test_pending_request_starts_are_bounded() -> None:
    tagger = FailureTagger()
    for i in range(MAX_PENDING_REQUESTS + 50):
        tagger.on_pending_request(f"c{i}", float(i))
    assert len(tagger._pending) == MAX_PENDING_REQUESTS
    assert "c0" not in tagger._pending and f"c{MAX_PENDING_REQUESTS + 49}" in tagger._pending
