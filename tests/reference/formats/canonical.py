"""The canonical input format: one flat object per event, for producers that normalize upstream.

    {"conversation_id": "c1", "type": "tool_call", "id": "call_1", "name": "search",
     "arguments": {...}, "ts": "2025-01-01T00:00:00Z"}
    {"conversation_id": "c1", "type": "tool_result", "id": "call_1", "content": ..., "is_error": false}

`call_id` is accepted in place of `id`. On a result, `call_id` wins when both are present: it can
only mean the call answered, whereas logs often give every event an `id` of its own.
JSON Schema: `stream_pairer/schemas/canonical_event.schema.json`.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.common import CALL, RESULT, Part, as_flag, as_id, as_name

TYPES: Final = frozenset({CALL, RESULT})


def parse(record: dict[str, Any]) -> list[Part]:
    is_call = record["type"] == CALL
    field, other = ("id", "call_id") if is_call else ("call_id", "id")
    idv = record.get(field)
    if idv is None:
        idv = record.get(other)
        field = other
    event_id = as_id(idv, "", None, field)
    if is_call:
        name = as_name(record.get("name"), "", None, "name", True)
        return [(CALL, event_id, name, record.get("arguments"), None, record, "canonical")]
    name = as_name(record.get("name"), "", None, "name", False)
    is_error = as_flag(record.get("is_error"), "", None, "is_error")
    return [(RESULT, event_id, name, record.get("content"), is_error, record, "canonical")]
