"""Failure-point tagging, tool_selection and priority, the tool schema registry, and the hook
contract end to end (real records -> formats layer -> engine -> tagged records).

Split from test_tagging.py (see its docstring for how the events are built: tagging_helpers.py).
"""

from __future__ import annotations

from pathlib import Path
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
    OK,
    POINTS,
    RESULT_INTERPRETATION,
    TERMINATION,
    TOOL_SELECTION,
    FailureTagger,
)

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
