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

import io
import re
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


# Out of a string: anything but a quote, or a whole string (possessive: no backtracking). Stops at
# the opening quote of a string that does not end in this block.
_OUT: Final = re.compile(rb'(?:[^"]++|"(?:[^"\\]++|\\.)*+")*+', re.DOTALL)
# Inside a string: whole characters and escapes, up to the closing quote, the block's end, or an
# escape the block cuts off (held back to the next block, so each piece starts at a boundary).
_IN: Final = re.compile(rb'(?:[^"\\]++|\\u[0-9a-fA-F]{4}|\\[^u])*+', re.DOTALL)


class StringCap:
    """A reader that passes a JSON text through but cuts every string at about `cap` bytes.

        The parser holds a string whole until it ends (a 100 MB string cost 332 MB), so the bytes of a
        string past `cap` are dropped here, before the parser: the item holding it is then still
        larger than the record limit (a `too_large` dead letter, built no further), and memory stays
        at `cap`. Strings within a block are skipped by one regex match (C speed); only a string that
        spans blocks is followed here, piece by piece. A cut falls between two escapes or characters,
        so the text stays valid JSON. `cut` counts the strings cut, `dropped` the bytes dropped (so a
    dead letter can tell the item's real size)."""

    def __init__(self, reader: Readable, cap: int) -> None:
        self.reader = reader
        self.cap = cap
        self.cut = 0
        self.dropped = 0
        self._in = False  # inside a string at the end of the last block
        self._run = 0  # bytes of that string passed so far
        self._dropping = False  # that string was cut: its bytes are dropped up to its end
        self._held = b""  # an escape or a UTF-8 character the last block cut off

    def read(self, n: int = -1, /) -> bytes:
        while True:
            block = self.reader.read(n)
            if not block:
                held, self._held = self._held, b""
                return held  # a text ending inside an escape: the parser says it is broken
            out = self._filter(self._held + block)
            if out:
                return out

    def _filter(self, block: bytes) -> bytes:
        self._held = b""
        parts: list[bytes] = []
        pos = 0
        end = len(block)
        while pos < end:
            if not self._in:
                m = _OUT.match(block, pos)
                stop = m.end() if m else pos
                parts.append(block[pos:stop])
                if stop == end:
                    break
                parts.append(b'"')  # a string that goes on past this block
                self._in, self._run, self._dropping = True, 0, False
                pos = stop + 1
                continue
            m = _IN.match(block, pos)
            stop = m.end() if m else pos
            closed = stop < end and block[stop] == 0x22  # '"'
            if not closed:
                stop = _whole(block, stop, end)
                if stop < end - 6:  # not a cut-off escape: invalid JSON, left for the parser
                    stop = end
                self._held = block[stop:]
            self._emit(block, pos, stop, parts)
            pos = end
            if closed:
                parts.append(b'"')
                self._in = False
                pos = stop + 1
        return b"".join(parts)

    def _emit(self, block: bytes, start: int, stop: int, parts: list[bytes]) -> None:
        """A piece of a string's content (whole escapes and characters), within the cap."""
        if self._dropping:
            self.dropped += stop - start
            return
        if self._run + stop - start <= self.cap:
            parts.append(block[start:stop])
            self._run += stop - start
            return
        m = _IN.match(block, start, start + self.cap - self._run)
        cut = m.end() if m else start
        while cut > start and 0x80 <= block[cut] < 0xC0:  # not inside a UTF-8 character
            cut -= 1
        parts.append(block[start:cut])
        self._run += cut - start
        self.dropped += stop - cut
        self._dropping = True
        self.cut += 1


def _whole(block: bytes, stop: int, end: int) -> int:
    """Where the string's bytes in `block` up to `end` stop being whole characters: `stop`, or
    before a UTF-8 character whose last bytes are in the next block."""
    if stop < end:
        return stop
    for back in range(1, min(4, end) + 1):
        b = block[end - back]
        if b < 0x80:
            return end
        if b >= 0xC0:  # a lead byte: its character needs 2, 3 or 4 bytes
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return end - back if need > back else end
    return end


def opens_list(head: bytes, keys: tuple[str, ...]) -> bool:
    """Whether the (partial) JSON text `head` is an object with one of `keys` opening an array at
    its top level: a compact one-line document, told apart from a long JSONL record."""
    import ijson  # noqa: PLC0415

    depth = 0
    key = None
    try:
        for event, value in ijson.basic_parse(io.BytesIO(head)):
            if depth == 1 and event == "start_array" and key in keys:
                return True
            key = value if depth == 1 and event == "map_key" else None
            depth += event in _OPEN
            depth -= event in _CLOSE
    except ijson.JSONError:
        return False
    return False
