"""Failure-point tagging: every rule of docs/FAILURES.md, on payloads shaped as each format delivers them.

Events are built the way `stream_pairer.core.formats` builds them (payload = decoded arguments / raw
result content, `is_error` = the format's flag, `raw` = the original block), so each test states
which real-world record it stands for. This file: outcomes, argument_construction, execution and
result_interpretation; termination and the repeat memory are test_tagging_termination.py's, tool
selection, priority, the schema registry and the hook contract end to end test_tagging_registry.py's.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from stream_pairer.core.toolschemas import ToolSchemaRegistry
from tests.core.tagging_helpers import call, pair, result
from tests.reference.state import Conversation
from tests.reference.tagging import (
    ARGUMENT_CONSTRUCTION,
    EMPTY,
    ERROR,
    EXECUTION,
    MAX_DECODE_CHARS,
    OK,
    RESULT_INTERPRETATION,
    FailureTagger,
    classify_result,
    input_rejection,
)

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
