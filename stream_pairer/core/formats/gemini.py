"""Gemini `Content` objects: `{role, parts: [{functionCall: {name, args, id?}} |
{functionResponse: {name, response, id?}} | {text} ...]}`, and `generateContent` responses
(`candidates[].content`).

The REST API writes camelCase; the Python SDK's `model_dump()` writes snake_case
(`function_call`, `function_response`): both are read. Gemini ids are optional; without them
results pair FIFO, preferring the oldest open call with the same function name. Read by the
compiled core (native/src/gemini.rs, the one reader of the shapes; issue 23), through
`compiled.parts`.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats import compiled
from stream_pairer.core.formats.common import Part


def parts(content: dict[str, Any], prefix: str) -> list[Part]:
    """The tool events of a content object's `parts` ([] for none)."""
    return compiled.parts("gemini", content, prefix)


def candidates(response: dict[str, Any], prefix: str) -> list[Part]:
    """The tool events of every candidate's content in a response with `candidates`."""
    return compiled.parts("gemini_candidates", response, prefix)
