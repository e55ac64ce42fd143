"""The canonical input format: one flat object per event, for producers that normalize upstream.

    {"conversation_id": "c1", "type": "tool_call", "id": "call_1", "name": "search",
     "arguments": {...}, "ts": "2025-01-01T00:00:00Z"}
    {"conversation_id": "c1", "type": "tool_result", "id": "call_1", "content": ..., "is_error": false}

`call_id` is accepted in place of `id`; on a result `call_id` wins when both are present.
JSON Schema: `stream_pairer/schemas/canonical_event.schema.json`. Read by the compiled core
(native/src/canonical.rs `part`, the one reader of the shape; issue 23), through `compiled.parts`.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import compiled
from stream_pairer.core.formats.common import CALL, RESULT, Part

TYPES: Final = frozenset({CALL, RESULT})


def parse(record: dict[str, Any]) -> list[Part]:
    """The event of a canonical object (its `type` is one of TYPES). Its error paths are worded
    relative to the object itself, wherever it sits in the record."""
    return compiled.parts("canonical", record, "")
