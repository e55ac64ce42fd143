"""OpenAI Chat Completions (current `tool_calls` and the legacy `function_call` API) and the
Responses API items.

* Chat: an assistant message with `tool_calls[]` `{id, type: "function", function: {name,
  arguments}}` (or `type: "custom"`, `custom: {name, input}`); results are `role: "tool"` messages
  with `tool_call_id`.
* Legacy functions API: `function_call: {name, arguments}` and `role: "function"` + `name`
  results. There are no ids at all: these events carry id None and pair FIFO by name.
* Responses: items `function_call` `{call_id, name, arguments}` / `function_call_output`
  `{call_id, output}`, the `custom_tool_call` pair, and `mcp_call` (a remote MCP call that holds
  its own output: one call and one result event with the same id). Other item types (message,
  reasoning, built-in tool calls that the platform runs itself) carry no event.

Arguments arrive as a JSON string; `decode_arguments` turns them into an object when they are one.
The package's Python reader of these shapes before issue 23, kept as the oracle of the compiled one.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats.common import (
    CALL,
    RESULT,
    Part,
    as_id,
    as_name,
    decode_arguments,
    missing,
    wrong_type,
)
from stream_pairer.core.formats.openai import RESPONSES_QUIET_ITEMS, RESPONSES_TOOL_ITEMS

# The item sets are the dispatch's (the package module's), shared: the oracle stands in for it.
__all__ = [
    "RESPONSES_QUIET_ITEMS",
    "RESPONSES_TOOL_ITEMS",
    "chat_calls",
    "chat_result",
    "legacy_call",
    "legacy_result",
    "responses_item",
    "responses_output",
]


def chat_calls(tool_calls: object, prefix: str) -> list[Part]:
    if type(tool_calls) is not list:
        raise wrong_type(tool_calls, prefix, None, "tool_calls", "an array")
    out: list[Part] = []
    tp = f"{prefix}tool_calls"
    for i, tc in enumerate(tool_calls):
        if type(tc) is not dict:
            raise wrong_type(tc, tp, i, None, "a tool call object")
        fn = tc.get("function")
        if type(fn) is str:
            # Inspect AI's ToolCall: `{id, function: "name", arguments: {...}}` (already decoded).
            out.append(
                (
                    CALL,
                    as_id(tc.get("id"), tp, i, "id"),
                    as_name(fn, tp, i, "function", True),
                    decode_arguments(tc.get("arguments")),
                    None,
                    tc,
                    "openai_chat",
                )
            )
            continue
        if fn is not None:
            name_field = "function.name"
            args = fn.get("arguments") if type(fn) is dict else None
        else:
            fn = tc.get("custom")  # a custom (free-form grammar) tool: `input` is plain text
            if fn is None:
                raise missing(tp, i, "function", "a tool call needs function.name")
            name_field = "custom.name"
            args = fn.get("input") if type(fn) is dict else None
        if type(fn) is not dict:
            raise wrong_type(fn, tp, i, name_field[:-5], "an object")
        out.append(
            (
                CALL,
                as_id(tc.get("id"), tp, i, "id"),
                as_name(fn.get("name"), tp, i, name_field, True),
                decode_arguments(args),
                None,
                tc,
                "openai_chat",
            )
        )
    return out


def chat_result(m: dict[str, Any], prefix: str) -> list[Part]:
    """A `role: "tool"` message. Inspect AI's ChatMessageTool adds `function` (the tool name,
    when `name` is absent) and `error: {type, message}` when the tool failed: an error outcome."""
    name_field = "name"
    name = m.get("name")
    if name is None and "function" in m:
        name, name_field = m.get("function"), "function"
    error = m.get("error")
    tool_name = as_name(name, prefix, None, name_field, False)
    is_error = True if error is not None and error is not False else None
    call_id = as_id(m.get("tool_call_id"), prefix, None, "tool_call_id")
    if call_id is None and "tool_call_ids" in m:
        # SWE-agent's history: one observation answers the ids of the action's calls, in a
        # list. Each id gets its result (the same output): never a FIFO pair when ids are there.
        ids = m["tool_call_ids"]
        if type(ids) is not list:
            raise wrong_type(ids, prefix, None, "tool_call_ids", "an array of ids")
        found = [as_id(x, prefix, None, f"tool_call_ids[{i}]") for i, x in enumerate(ids)]
        kept = [x for x in found if x is not None]
        if kept:
            return [(RESULT, x, tool_name, m.get("content"), is_error, m, "openai_chat") for x in kept]
    return [(RESULT, call_id, tool_name, m.get("content"), is_error, m, "openai_chat")]


def legacy_call(m: dict[str, Any], fc: object, prefix: str) -> list[Part]:
    if type(fc) is not dict:
        raise wrong_type(fc, prefix, None, "function_call", "an object")
    name = as_name(fc.get("name"), prefix, None, "function_call.name", True)
    return [(CALL, None, name, decode_arguments(fc.get("arguments")), None, m, "openai_legacy")]


def legacy_result(m: dict[str, Any], prefix: str) -> list[Part]:
    name = as_name(m.get("name"), prefix, None, "name", False)
    return [(RESULT, None, name, m.get("content"), None, m, "openai_legacy")]


def responses_item(it: dict[str, Any], t: str, prefix: str, index: int | None) -> list[Part]:
    """One Responses item of a tool type (`t` in RESPONSES_TOOL_ITEMS); `prefix[index]` is its path."""
    if t == "function_call":
        return [
            (
                CALL,
                as_id(it.get("call_id"), prefix, index, "call_id"),
                as_name(it.get("name"), prefix, index, "name", True),
                decode_arguments(it.get("arguments")),
                None,
                it,
                "openai_responses",
            )
        ]
    if t in {"function_call_output", "custom_tool_call_output"}:
        return [
            (
                RESULT,
                as_id(it.get("call_id"), prefix, index, "call_id"),
                None,
                it.get("output"),
                None,
                it,
                "openai_responses",
            )
        ]
    if t == "custom_tool_call":
        return [
            (
                CALL,
                as_id(it.get("call_id"), prefix, index, "call_id"),
                as_name(it.get("name"), prefix, index, "name", True),
                it.get("input"),
                None,
                it,
                "openai_responses",
            )
        ]
    # mcp_call: the platform ran the call; the item holds arguments and output (or error) together.
    call_id = as_id(it.get("id"), prefix, index, "id")
    name = as_name(it.get("name"), prefix, index, "name", True)
    out: list[Part] = [
        (CALL, call_id, name, decode_arguments(it.get("arguments")), None, it, "openai_responses")
    ]
    error = it.get("error")
    output = it.get("output")
    if error is not None:
        out.append((RESULT, call_id, name, error, True, it, "openai_responses"))
    elif output is not None:
        out.append((RESULT, call_id, name, output, False, it, "openai_responses"))
    return out


def responses_output(output: list[Any], prefix: str) -> list[Part]:
    """The `output` array of a Responses response object."""
    out: list[Part] = []
    output_path = prefix + "output"
    for i, it in enumerate(output):
        if type(it) is not dict:
            raise wrong_type(it, output_path, i, None, "an item object")
        t = it.get("type")
        if type(t) is str and t in RESPONSES_TOOL_ITEMS:
            out.extend(responses_item(it, t, output_path, i))
    return out
