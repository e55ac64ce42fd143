"""Cohere chat, v1 (`/v1/chat` `chat_history`): `{role: "CHATBOT", tool_calls: [{name,
parameters}]}` and `{role: "TOOL", tool_results: [{call: {name, parameters}, outputs: [...]}]}`.
(v2, `/v2/chat`, writes OpenAI-style `tool_calls[] {id, function}` and `role: "tool"` with
`tool_call_id`: the `openai_chat` reader reads it.)

v1 has no ids at all: a result names its call by the tool name and parameters, so calls and
results pair by position within the tool name (`match: "fifo"`), which is all the log says.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import CALL, REQUEST_PART, RESULT, Part, as_name, wrong_type

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "cohere",
    '`role` "CHATBOT" / "TOOL" with `tool_calls[] {name, parameters}` / `tool_results[]` (Cohere v1 chat '
    "history; no ids: paired by name, FIFO)",
    {
        "conversation_id": "cohere-v1-a",
        "role": "CHATBOT",
        "message": "I will look up the sales report and the inventory.",
        "tool_calls": [{"name": "query_daily_sales_report", "parameters": {"day": "2023-09-29"}}],
    },
)

FORMAT: Final = "cohere"
V1_ROLES: Final = frozenset({"USER", "CHATBOT", "SYSTEM", "TOOL"})


def turn(m: dict[str, Any], role: str, prefix: str) -> list[Part]:
    """A v1 history entry without tool calls: tool results, a user prompt (a request starts), or
    a chatbot / system text (`message`, not `content`)."""
    if role == "TOOL":
        return results(m, prefix)
    return [REQUEST_PART] if role == "USER" else []


def is_v1_calls(tool_calls: Any) -> bool:
    return type(tool_calls) is list and any(
        type(tc) is dict and "parameters" in tc and "function" not in tc for tc in tool_calls
    )


def calls(tool_calls: list[Any], prefix: str) -> list[Part]:
    out: list[Part] = []
    for i, tc in enumerate(tool_calls):
        if type(tc) is not dict:
            raise wrong_type(tc, f"{prefix}tool_calls", i, None, "a tool call object")
        name = as_name(tc.get("name"), f"{prefix}tool_calls", i, "name", True)
        out.append((CALL, None, name, tc.get("parameters"), None, tc, FORMAT))
    return out


def results(m: dict[str, Any], prefix: str) -> list[Part]:
    items = m.get("tool_results")
    if type(items) is not list:
        raise wrong_type(items, prefix, None, "tool_results", "an array")
    out: list[Part] = []
    for i, r in enumerate(items):
        if type(r) is not dict:
            raise wrong_type(r, f"{prefix}tool_results", i, None, "a tool result object")
        call = r.get("call")
        name = call.get("name") if type(call) is dict else None
        name = as_name(name, f"{prefix}tool_results", i, "call.name", False)
        outputs = r.get("outputs")
        failed = type(outputs) is list and any(type(o) is dict and "error" in o for o in outputs)
        out.append((RESULT, None, name, outputs, failed, r, FORMAT))
    return out
