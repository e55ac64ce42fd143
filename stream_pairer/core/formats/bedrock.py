"""AWS Bedrock Converse content blocks: `{"toolUse": {toolUseId, name, input}}` and
`{"toolResult": {toolUseId, content, status}}`. Bedrock blocks have no `type` key, which is how
the message scanner in `anthropic.py` tells them from Anthropic blocks in the same position.

Read by the compiled core (native/src/bedrock.rs `block`, the one reader of the shape; issue 23),
through `compiled.parts`."""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats import compiled
from stream_pairer.core.formats.common import Part


def block(b: dict[str, Any], prefix: str, i: int) -> Part | None:
    """The event of block `i` of the content array at `prefix`, if it holds one."""
    found = compiled.parts("bedrock", b, prefix, i)
    return found[0] if found else None
