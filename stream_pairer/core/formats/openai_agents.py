"""The OpenAI Agents SDK's run items (`RunResult.new_items`, dumped by apps and the SDK's
session stores): `{type: "tool_call_item" | "tool_call_output_item" | "handoff_call_item" |
"handoff_output_item", raw_item: {...}, agent}`. `raw_item` is the Responses API item (a
`function_call {call_id, name, arguments}`, a `function_call_output {call_id, output}`, or a
hosted tool call), read as the `openai_responses` reader reads it; `to_input_list()` writes those
items bare, and they are read directly. A handoff is a function call to the next agent, answered
by its output item. Message and reasoning items carry no tool event.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import openai
from stream_pairer.core.formats.common import Part, wrong_type

TYPES: Final = frozenset(
    {
        "tool_call_item",
        "tool_call_output_item",
        "handoff_call_item",
        "handoff_output_item",
        "message_output_item",
        "reasoning_item",
        "mcp_list_tools_item",
        "mcp_approval_request_item",
        "mcp_approval_response_item",
    }
)


def parse(d: dict[str, Any], t: str) -> list[Part]:
    raw = d.get("raw_item")
    if raw is None or t in ("message_output_item", "reasoning_item") or t.startswith("mcp_"):
        return []
    if type(raw) is not dict:
        raise wrong_type(raw, "", None, "raw_item", "an object")
    rt = raw.get("type")
    if type(rt) is str and rt in openai.RESPONSES_TOOL_ITEMS:
        return openai.responses_item(raw, rt, "raw_item.", None)
    if rt is None and "call_id" in raw and "output" in raw:  # a function_call_output as a dict
        return openai.responses_item(raw, "function_call_output", "raw_item.", None)
    return []
