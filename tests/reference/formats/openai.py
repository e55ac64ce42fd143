"""The Python reader of OpenAI Responses items the package used before issue 23 (the oracle).

Only `responses_item` (and the `output` walk that calls it) moved to Rust; the Chat and legacy
readers are the package's own, re-exported so the oracle stands in for the whole module.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats.common import CALL, RESULT, Part, as_id, as_name, decode_arguments, wrong_type
from stream_pairer.core.formats.openai import (
    RESPONSES_QUIET_ITEMS,
    RESPONSES_TOOL_ITEMS,
    chat_calls,
    chat_result,
    legacy_call,
    legacy_result,
)

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
