"""MCP JSON-RPC messages: `tools/call` requests and their responses, paired by JSON-RPC `id`.

Read by the compiled core (native/src/mcp.rs, the one reader of the shape; issue 23, where the
rules are: which responses are tool results, what an `error` response becomes), through
`compiled.parts`.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats import compiled
from stream_pairer.core.formats.common import Part


def parse(m: dict[str, Any], prefix: str) -> list[Part]:
    """The tool events of one JSON-RPC message at `prefix` in its record ([] for none)."""
    return compiled.parts("mcp", m, prefix)
