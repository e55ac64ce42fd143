"""The shapes the compiled core reads, read for the Python format layer by that same reader.

Why: each shape has one reader (issue 23). The shapes the compiled core owns (canonical events,
MCP messages, Bedrock blocks, Gemini contents, Anthropic / Claude Code blocks and content arrays,
OpenAI Chat, legacy and Responses items and `output` arrays) are read in Rust
(native/src/readers.rs lists them): the fast path reads them straight from a record's bytes, and
the records it leaves to this layer (a wrapped event, bytes orjson would write
differently, a record-level field it leaves to Python, a dead letter to word) come here with
the object decoded. `parts` writes the object back in orjson's form (a normalisation, not a
reading) and hands it to the same reader (`_native.read_parts`), whose refusals arrive worded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from stream_pairer.core.formats.common import CALL, RESULT, Part
from stream_pairer.core.model import FormatError

# An object orjson cannot write (more than 254 levels) is handed over cut at _KEPT_DEPTH, each
# container below replaced by _DEEP: deeper than any field a reader looks at, and every block
# holding a cut stays deeper than MAX_DEPTH, so parse_record refuses it as the whole one.
_KEPT_DEPTH: Final = 40
_DEEP_LEVELS: Final = 200


def _read(shape: str, data: bytes, prefix: str, index: int | None) -> Any:
    """`_native.read_parts`, imported on first use (core/native.py says what to do when the
    compiled core is missing; importing the format layer does not need it)."""
    global _read  # noqa: PLW0603 - replaced by the compiled function itself after the first call
    from stream_pairer._native import read_parts  # noqa: PLC0415 - see the docstring

    _read = read_parts
    return read_parts(shape, data, prefix, index)


def parts(
    shape: str,
    obj: dict[str, Any],
    prefix: str,
    index: int | None = None,
    block: dict[str, Any] | None = None,
    *,
    elsewhere: Callable[[dict[str, Any], int], Part] | None = None,
) -> list[Part]:
    """The parts the compiled reader of `shape` finds in `obj` (at `prefix[index]` in its record:
    `common.where`'s arguments, worded by the reader only when it refuses the object).
    `block`: the object an event of the whole of `obj` keeps (default `obj` itself), for a caller
    that hands over a variant of the object (a Responses item with its type filled in).
    `elsewhere(element, index)`: the part of an array element a walk leaves to Python (format
    ""; messages/walk.rs), for the shapes that walk an array (`*_content`)."""
    try:
        data = orjson.dumps(obj)
    except orjson.JSONEncodeError:
        data = orjson.dumps(_shallow(obj, _KEPT_DEPTH))  # nested past what orjson writes
    found = _read(shape, data, prefix, index)
    if isinstance(found, tuple):
        raise FormatError(found[0], found[1])
    out: list[Part] = []
    for is_call, event_id, name, payload, is_error, at, fmt in found:
        kept = (obj if block is None else block) if not at else _follow(obj, at)
        if not fmt and elsewhere is not None:
            out.append(elsewhere(kept, at[-1]))
            continue
        value = None if payload is None else _follow(obj, payload)
        out.append((CALL if is_call else RESULT, event_id, name, value, is_error, kept, fmt))
    return out


def _follow(obj: Any, path: tuple[str | int, ...]) -> Any:
    """The value at `path` (keys and indexes, as the reader found it) in `obj`."""
    for step in path:
        obj = obj[step]
    return obj


def _shallow(value: Any, depth: int) -> Any:
    """`value` down to `depth` levels, each container below replaced by `_DEEP_LEVELS` levels."""
    if type(value) is not dict and type(value) is not list:
        return value
    if depth <= 0:
        deep: list[Any] = []
        for _ in range(_DEEP_LEVELS - 1):
            deep = [deep]
        return deep
    if type(value) is dict:
        return {k: _shallow(v, depth - 1) for k, v in value.items()}
    return [_shallow(v, depth - 1) for v in value]
