"""Building the items of a streamed JSON document within the record limits (issue 27).

A document is parsed event by event (`ijson.basic_parse`) and each item (one message, one eval
sample) is built into Python objects before it is re-encoded as a record. Two input shapes made
that unbounded:

* nesting: ijson's `parse` keeps a dotted prefix per event (`item.item.item...`), so a document
  nested d levels deep cost O(d^2) memory (100,000 levels: killed at 24 GB); the built value then
  broke `orjson.dumps` (its recursion limit) with a traceback. Here events carry no prefix, and an
  item nested deeper than `MAX_DEPTH` is skipped to its end (only a depth counter is kept) and
  becomes one `too_large` dead letter naming its depth;
* width and size: an item (or a top-level object with no message list) of a million keys was
  built whole before its size was checked. Here the encoded size is estimated while building, and
  past the record size limit the rest of the item is only counted, never built.

The limits are the compiled core's own (`MAX_DEPTH` is the nesting it accepts in a record), so
an item refused here is one the core would refuse, only without the memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

# Levels of arrays and objects an item may nest: the compiled core refuses more in a record
# ("nests more than 200 levels"), and orjson cannot encode past 255.
MAX_DEPTH: Final = 200
_OPEN: Final = frozenset({"start_map", "start_array"})
_CLOSE: Final = frozenset({"end_map", "end_array"})

Event = tuple[str, str, Any]


class Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Refused:
    """An item read to its end but not built: at least `size` bytes encoded, `depth` levels deep
    (the deepest seen), and why."""

    size: int
    depth: int
    detail: str


def events(reader: Readable) -> Iterator[Event]:
    """(prefix, event, value) like `ijson.parse`, but with an empty prefix: the readers here only
    consume whole values, so they never need the path, and building it cost O(depth) per event."""
    import ijson  # noqa: PLC0415 - only documents need it

    for event, value in ijson.basic_parse(reader, use_float=True, multiple_values=True):
        yield "", event, value


def _cost(event: str, value: Any) -> int:
    """Bytes the event adds to the item's JSON encoding, roughly (a string's escapes and a
    number's digits are not exact): enough to keep the built item within the limit."""
    if event in {"string", "map_key"}:
        return len(value) + 3
    if event in _OPEN or event in _CLOSE:
        return 1
    return 6 if value is None or isinstance(value, bool) else len(repr(value)) + 1


def build(event: str, value: Any, stream: Iterator[Event], max_bytes: int | None) -> Any:
    """The value whose first event is (`event`, `value`), built from `stream`; a `Refused` when
    it nests deeper than MAX_DEPTH or its encoding passes `max_bytes`. Either way the stream is
    left just after the value's last event."""
    return build_sized(event, value, stream, max_bytes)[0]


def build_sized(event: str, value: Any, stream: Iterator[Event], max_bytes: int | None) -> tuple[Any, int]:
    """`build`, and the value's estimated encoded size."""
    limit = max_bytes if max_bytes is not None else -1
    if event not in _OPEN:
        size = _cost(event, value)
        if 0 <= limit < size:
            return Refused(size, 0, _too_big("item", size, limit)), size
        return value, size
    from ijson.common import ObjectBuilder  # noqa: PLC0415

    builder = ObjectBuilder()
    builder.event(event, value)
    depth = deepest = 1
    size = 1
    why = ""
    for _, ev, val in stream:
        size += _cost(ev, val)
        if ev in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif ev in _CLOSE:
            depth -= 1
        if not why:
            if depth > MAX_DEPTH:
                why = "depth"
            elif 0 <= limit < size:
                why = "size"
            else:
                builder.event(ev, val)
        if depth == 0:
            break
    if why == "depth":
        detail = (
            f"the item nests {deepest} levels of arrays and objects, more than the {MAX_DEPTH} "
            "allowed (read to its end without building it)"
        )
        return Refused(size, deepest, detail), size
    if why == "size":
        return Refused(size, deepest, _too_big("item", size, limit)), size
    return builder.value, size


def _too_big(what: str, size: int, limit: int) -> str:
    return (
        f"the {what} is at least {size} bytes, more than the {limit} byte limit (read to its end "
        "without building it)"
    )
