"""The Vercel AI SDK (`ai` on npm): its model messages (`CoreMessage` in v4, `ModelMessage` in
v5), as apps log `response.messages` / `steps` or persist a chat, and its UI messages (v5
`parts`, v4 `toolInvocations`).

* model messages: an assistant `content[]` part `{type: "tool-call", toolCallId, toolName,
  args (v4) | input (v5)}`; a `role: "tool"` message of `{type: "tool-result", toolCallId,
  toolName, result (v4) | output (v5: {type: "json" | "text" | "error-text" | "error-json",
  value}), isError?}` parts;
* UI messages: `parts[]` `{type: "tool-<name>" | "dynamic-tool", toolCallId, state, input,
  output, errorText}` and v4 `toolInvocations[] {toolCallId, toolName, args, state, result}`:
  the call, and its result once `state` says it is there (`output-available`, `output-error`,
  `result`), in one part.

Pairs are by `toolCallId`.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import CALL, RESULT, Part, as_id, as_name, wrong_type

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "vercel_ai",
    'content parts `{type: "tool-call" | "tool-result", toolCallId}` (AI SDK model messages), UI '
    "`parts[]` `tool-<name>` / `dynamic-tool`, or v4 `toolInvocations[]`",
    {
        "chatId": "chat_Vx81",
        "role": "assistant",
        "content": [
            {
                "type": "tool-call",
                "toolCallId": "call_BeR1n",
                "toolName": "weather",
                "input": {"location": "Berlin"},
            }
        ],
    },
)

FORMAT: Final = "vercel_ai"
PART_TYPES: Final = frozenset({"tool-call", "tool-result"})
_DONE: Final = frozenset({"output-available", "output-error", "result"})


def model_part(b: dict[str, Any], bt: str, prefix: str, i: int) -> Part:
    """A `tool-call` or `tool-result` content part of a model message."""
    call_id = as_id(b.get("toolCallId"), prefix, i, "toolCallId")
    if bt == "tool-call":
        args = b["input"] if "input" in b else b.get("args")
        return (CALL, call_id, as_name(b.get("toolName"), prefix, i, "toolName", True), args, None, b, FORMAT)
    output = b["output"] if "output" in b else b.get("result")
    failed = b.get("isError") is True or (
        type(output) is dict and str(output.get("type", "")).startswith("error")
    )
    return (
        RESULT,
        call_id,
        as_name(b.get("toolName"), prefix, i, "toolName", False),
        output,
        failed,
        b,
        FORMAT,
    )


def is_ui(parts: list[Any]) -> bool:
    return any(type(p) is dict and type(p.get("toolCallId")) is str for p in parts)


def ui_parts(items: list[Any], prefix: str) -> list[Part]:
    """v5 UI message parts and v4 tool invocations: a call, and its result when it is there."""
    out: list[Part] = []
    for i, p in enumerate(items):
        if type(p) is not dict:
            raise wrong_type(p, prefix, i, None, "a part object")
        if "toolCallId" not in p:
            continue
        t = p.get("type")
        name = p.get("toolName")
        if name is None and type(t) is str and t.startswith("tool-"):
            name = t[len("tool-") :]
        call_id = as_id(p.get("toolCallId"), prefix, i, "toolCallId")
        name = as_name(name, prefix, i, "toolName", True)
        args = p["input"] if "input" in p else p.get("args")
        out.append((CALL, call_id, name, args, None, p, FORMAT))
        state = p.get("state")
        if type(state) is str and state in _DONE:
            failed = state == "output-error"
            output = p.get("errorText") if failed else p.get("output", p.get("result"))
            out.append((RESULT, call_id, name, output, failed, p, FORMAT))
    return out
