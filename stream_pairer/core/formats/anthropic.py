"""Anthropic Messages content arrays (also the inner messages of Claude Code session JSONL).

Calls: `tool_use` (client tools), `server_tool_use` and `mcp_tool_use` (tools Anthropic runs,
whose results come back in the same assistant message). Results: `tool_result` with
`tool_use_id`, plus the server-side `*_tool_result` / `mcp_tool_result` blocks. A message may hold
several parallel `tool_use` blocks beside text and thinking blocks; each becomes one event.
Blocks without a `type` are Bedrock Converse blocks (same `{role, content: [...]}` envelope);
`tool-call` / `tool-result` parts are the Vercel AI SDK's. The array is walked by the compiled
core (native/src/messages/walk.rs `content`, the walk the fast path uses; issue 23: one reader
per shape), which reads the Anthropic and Bedrock blocks (messages/anthropic.rs, bedrock.rs) and
leaves each Vercel part to formats/vercel_ai.py.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import compiled, vercel_ai
from stream_pairer.core.formats.common import Part

# read_parts' walk of a content array, by the blocks' format.
_WALKS: Final = {"anthropic": "anthropic_content", "claude_code": "claude_code_content"}


def blocks(content: list[Any], prefix: str, fmt: str) -> list[Part]:
    """Tool events of a `content` array. `prefix` is the array's path (for error details);
    `fmt` names the blocks' format (`anthropic`, or `claude_code` in a Claude Code line)."""
    if not content:
        return []

    def vercel(b: dict[str, Any], i: int) -> Part:
        return vercel_ai.model_part(b, b["type"], prefix, i)

    return compiled.parts(_WALKS[fmt], {"content": content}, prefix, elsewhere=vercel)
