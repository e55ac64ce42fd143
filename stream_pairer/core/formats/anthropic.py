"""Anthropic Messages content arrays (also the inner messages of Claude Code session JSONL).

Calls: `tool_use` (client tools), `server_tool_use` and `mcp_tool_use` (tools Anthropic runs,
whose results come back in the same assistant message). Results: `tool_result` with
`tool_use_id`, plus the server-side `*_tool_result` / `mcp_tool_result` blocks. A message may hold
several parallel `tool_use` blocks beside text and thinking blocks; each becomes one event.
Blocks without a `type` are Bedrock Converse blocks (same `{role, content: [...]}` envelope);
`tool-call` / `tool-result` parts are the Vercel AI SDK's. Each typed Anthropic block is read by
the compiled core (native/src/messages/anthropic.rs `block`, the one reader of the shape; issue
23) through `compiled.parts`; this module walks the array and sends each block to its reader.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats import bedrock, compiled, vercel_ai
from stream_pairer.core.formats.common import Part, wrong_type


def blocks(content: list[Any], prefix: str, fmt: str) -> list[Part]:
    """Tool events of a `content` array. `prefix` is the array's path (for error details);
    `fmt` names the blocks' format (`anthropic`, or `claude_code` in a Claude Code line)."""
    out: list[Part] = []
    for i, b in enumerate(content):
        if type(b) is not dict:
            raise wrong_type(b, prefix, i, None, "a content block object")
        bt = b.get("type")
        if type(bt) is not str:
            if bt is None and ("toolUse" in b or "toolResult" in b):
                part = bedrock.block(b, prefix, i)
                if part is not None:
                    out.append(part)
            elif bt is not None:
                raise wrong_type(bt, prefix, i, "type", "a string")
        elif bt in vercel_ai.PART_TYPES:
            out.append(vercel_ai.model_part(b, bt, prefix, i))
        elif bt.endswith(("tool_use", "tool_result")):  # the only types that hold an event
            out.extend(compiled.parts(fmt, b, prefix, i))
    return out
