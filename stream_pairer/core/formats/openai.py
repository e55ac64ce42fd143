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
Every shape here is read by the compiled core (native/src/messages/chat.rs, responses.rs, and the
`output` array's walk in walk.rs; issue 23: one reader per shape), through `compiled.parts`;
this module decodes the calls' arguments.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import compiled
from stream_pairer.core.formats.common import CALL, Part, decode_arguments

RESPONSES_TOOL_ITEMS: Final = frozenset(
    {"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", "mcp_call"}
)
# Responses items whose call's `arguments` are a JSON text (a custom tool's `input` is plain text).
_DECODED: Final = frozenset({"function_call", "mcp_call"})
# Responses item types that are known but are not a client tool call or result.
RESPONSES_QUIET_ITEMS: Final = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "item_reference",
    }
)


def chat_calls(tool_calls: object, prefix: str) -> list[Part]:
    """The calls of a message's `tool_calls` (the message at `prefix`)."""
    return _decoded(compiled.parts("openai_chat_calls", {"tool_calls": tool_calls}, prefix))


def chat_result(m: dict[str, Any], prefix: str) -> list[Part]:
    """A `role: "tool"` message (Inspect AI's `function` / `error` and SWE-agent's
    `tool_call_ids` included)."""
    return compiled.parts("openai_chat_result", m, prefix)


def legacy_call(m: dict[str, Any], fc: object, prefix: str) -> list[Part]:
    """The call of a message's `function_call` (`fc`, not null)."""
    return _decoded(compiled.parts("openai_legacy_call", m, prefix))


def legacy_result(m: dict[str, Any], prefix: str) -> list[Part]:
    """A `role: "function"` message."""
    return compiled.parts("openai_legacy_result", m, prefix)


def _decoded(parts: list[Part]) -> list[Part]:
    """`parts` (calls) with their arguments decoded as every format's are (`decode_arguments`)."""
    return [(t, i, n, decode_arguments(args), e, b, f) for t, i, n, args, e, b, f in parts]


def responses_item(it: dict[str, Any], t: str, prefix: str, index: int | None) -> list[Part]:
    """One Responses item of a tool type (`t` in RESPONSES_TOOL_ITEMS); `prefix[index]` is its
    path. Read by the compiled core (native/src/messages/responses.rs `item`, the one reader of
    the shape); a call's `arguments` come back as given and are decoded here, as every format's."""
    typed = it if it.get("type") == t else {**it, "type": t}  # an untyped output item (OpenAI Agents)
    parts = compiled.parts("openai_responses", typed, prefix, index, it)
    if t in {"function_call", "mcp_call"}:
        parts[:1] = _decoded(parts[:1])
    return parts


def responses_output(output: list[Any], prefix: str) -> list[Part]:
    """The `output` array of a Responses response object, walked by the compiled core
    (native/src/messages/walk.rs `output`, the fast path's walk); calls' arguments decoded here."""
    parts = compiled.parts("openai_responses_output", {"output": output}, prefix + "output")
    return [
        (t, i, n, decode_arguments(args) if t == CALL and b["type"] in _DECODED else args, e, b, f)
        for t, i, n, args, e, b, f in parts
    ]
