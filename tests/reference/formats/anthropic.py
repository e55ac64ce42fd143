"""Anthropic Messages content blocks (also the inner messages of Claude Code session JSONL).

Calls: `tool_use` (client tools), `server_tool_use` and `mcp_tool_use` (tools Anthropic runs,
whose results come back in the same assistant message). Results: `tool_result` with
`tool_use_id`, plus the server-side `*_tool_result` / `mcp_tool_result` blocks. A message may hold
several parallel `tool_use` blocks beside text and thinking blocks; each becomes one event.
Blocks without a `type` are Bedrock Converse blocks (same `{role, content: [...]}` envelope).
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import vercel_ai
from stream_pairer.core.formats.common import CALL, RESULT, Part, as_flag, as_id, as_name, wrong_type
from tests.reference.formats import bedrock  # the oracle's own

CALL_TYPES: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def blocks(content: list[Any], prefix: str, fmt: str) -> list[Part]:
    """Tool events of a `content` array. `prefix` is the array's path (for error details)."""
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
            continue
        if bt in CALL_TYPES:
            out.append(
                (
                    CALL,
                    as_id(b.get("id"), prefix, i, "id"),
                    as_name(b.get("name"), prefix, i, "name", True),
                    b.get("input"),
                    None,
                    b,
                    fmt,
                )
            )
        elif bt in vercel_ai.PART_TYPES:
            out.append(vercel_ai.model_part(b, bt, prefix, i))
        elif bt == "tool_result" or bt.endswith("_tool_result"):
            content_value = b.get("content")
            is_error = as_flag(b.get("is_error"), prefix, i, "is_error")
            if is_error is None:
                # Server tools report failure as a `*_error` content object instead of is_error.
                is_error = type(content_value) is dict and str(content_value.get("type", "")).endswith(
                    "_error"
                )
            out.append(
                (
                    RESULT,
                    as_id(b.get("tool_use_id"), prefix, i, "tool_use_id"),
                    None,
                    content_value,
                    is_error,
                    b,
                    fmt,
                )
            )
    return out
