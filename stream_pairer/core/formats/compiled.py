"""The shapes the compiled core reads, read for the Python format layer by that same reader.

Why: each shape has one reader (issue 23). The canonical event and the MCP JSON-RPC message are
read in Rust (native/src/canonical.rs, mcp.rs): the fast path reads them straight from a record's
bytes, and the records it leaves to this layer (a wrapped event, bytes orjson would write
differently, a record-level field it leaves to Python, a dead letter to word) come here with
the object decoded. `parts` writes the object back in orjson's form (a normalisation, not a
reading) and hands it to the same reader (`_native.read_parts`), whose refusals arrive worded.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from stream_pairer.core.formats.common import CALL, RESULT, Part, where
from stream_pairer.core.model import FormatError

# An object orjson cannot write (more than 254 levels) is handed over cut at _KEPT_DEPTH, each
# container below replaced by _DEEP: deeper than any field a reader looks at, and every block
# holding a cut stays deeper than MAX_DEPTH, so parse_record refuses it as the whole one.
_KEPT_DEPTH: Final = 40
_DEEP_LEVELS: Final = 200


def parts(shape: str, obj: dict[str, Any], prefix: str, block: dict[str, Any] | None = None) -> list[Part]:
    """The parts the compiled reader of `shape` finds in `obj` (at `prefix` in its record).
    `block`: the object an event of the whole of `obj` keeps (default `obj` itself), for a caller
    that hands over a variant of the object (a Responses item with its type filled in)."""
    try:
        data = orjson.dumps(obj)
    except orjson.JSONEncodeError:
        data = orjson.dumps(_shallow(obj, _KEPT_DEPTH))  # nested past what orjson writes
    from stream_pairer import _native  # noqa: PLC0415 - the compiled core; native.py says when it is missing

    found = _native.read_parts(shape, data, prefix)
    if isinstance(found, tuple):
        raise FormatError(found[0], found[1])
    whole = (0, len(data))
    out: list[Part] = []
    for is_call, event_id, name, payload, is_error, at, fmt in found:
        kept = (obj if block is None else block) if at == whole else orjson.loads(data[at[0] : at[1]])
        out.append((CALL if is_call else RESULT, event_id, name, orjson.loads(payload), is_error, kept, fmt))
    return out


def at(prefix: str, index: int | None) -> str:
    """The prefix a reader takes for the object at `prefix[index]` (`common.where`'s path of it,
    ending with "."; "" for the record itself)."""
    return where(prefix, index, None) + "." if prefix or index is not None else ""


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
