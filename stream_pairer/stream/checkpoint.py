"""Replay checkpoints: what a partition still held when its offset was committed. Pure data + codec.

Why: the committed offset of a partition never passes its oldest held event, so a restarted (or newly
assigned) owner replays from there and rebuilds the held state. But most events in the replayed range
were already emitted (paired, orphaned, dead-lettered); processing them again would emit them twice,
and worse, without the state that came *before* the committed offset they would be paired
differently (a result whose call was before the offset would become a `no_call` orphan, an id-less
result could FIFO-pair with the wrong call). The checkpoint says, for the committed offset `C` and the
last processed offset `HW`, exactly which `(offset, block)` events were still held. Replaying `[C, HW]`
processes only those; nothing else in that range is even parsed. After `HW`, processing is normal.

It also carries the two kinds of time the engine keeps (see engine.py): the partition's processing
time P, from which replayed events count their processing timeouts again (late by the downtime,
never early), and the event-time clock of each conversation that holds events, so the replay
re-derives exactly the same event-time deadlines as the first pass. A clock is keyed by the
`(offset, block)` of the first held event of its conversation (the replay learns the conversation
id by reading that event), and left out when the replayed events alone rebuild it.

A checkpoint is trusted only when the partition's committed offset carries the checkpoint's `token`
in its commit metadata: in exactly-once mode both are written in one transaction, so they always
match; in at-least-once mode a crash between the two (or an operator resetting the offsets) leaves
a mismatch, and the partition falls back to a plain replay (at-least-once duplicates, documented).

Encoding (orjson, zlib-compressed past COMPRESS_OVER bytes): held offsets are delta-encoded from `C`;
an offset whose only held block is 0 is a bare integer, otherwise `[delta, block, ...]`; clocks are
`[offset delta, block, clock]`, deltas from the previous entry (see `_encode_clocks`).
`processing_ms` was `stream_ms` (the engine's single event time) before per-conversation clocks;
both names are read and a missing `clocks` is none, so checkpoints of either version restore in
the other.
"""

from __future__ import annotations

import secrets
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from stream_pairer.errors import CheckpointError

VERSION: Final = 1
METADATA_PREFIX: Final = "sp1:"
COMPRESS_OVER: Final = 4096
_ZLIB_MARK: Final = b"Z"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    group: str
    topic: str
    partition: int
    committed: int  # C: the offset committed together with this checkpoint
    processed: int  # HW: the last offset processed before the commit (inclusive); C - 1 if none
    processing_ms: float | None  # the engine's processing time P at commit (None: not started)
    held: tuple[tuple[int, int], ...]  # (offset, block) of every event held at commit, sorted
    token: str
    # (offset, block, clock_ms): the event-time clock of the conversation of that held event, sorted
    clocks: tuple[tuple[int, int, float], ...] = ()

    @property
    def metadata(self) -> str:
        """The commit metadata that binds an offset commit to this checkpoint."""
        return METADATA_PREFIX + self.token

    def matches(self, committed: int | None, metadata: str | None) -> bool:
        return committed == self.committed and metadata == self.metadata


def new_token() -> str:
    return secrets.token_hex(8)


def key(group: str, topic: str, partition: int) -> bytes:
    """Compaction key: one live checkpoint per (group, topic, partition)."""
    return orjson.dumps([group, topic, partition])


def encode(cp: Checkpoint) -> bytes:
    held: list[Any] = []
    prev = cp.committed
    i, n = 0, len(cp.held)
    while i < n:
        offset = cp.held[i][0]
        blocks = []
        while i < n and cp.held[i][0] == offset:
            blocks.append(cp.held[i][1])
            i += 1
        delta = offset - prev
        prev = offset
        held.append(delta if blocks == [0] else [delta, *blocks])
    body = orjson.dumps(
        {
            "v": VERSION,
            "group": cp.group,
            "topic": cp.topic,
            "partition": cp.partition,
            "committed": cp.committed,
            "processed": cp.processed,
            "processing_ms": cp.processing_ms,
            "token": cp.token,
            "held": held,
            "clocks": _encode_clocks(cp.committed, cp.clocks),
        }
    )
    if len(body) > COMPRESS_OVER:
        return _ZLIB_MARK + zlib.compress(body, 1)
    return body


def decode(value: bytes) -> Checkpoint:
    try:
        if value[:1] == _ZLIB_MARK:
            value = zlib.decompress(value[1:])
        d = orjson.loads(value)
        if d.get("v") != VERSION:
            raise CheckpointError(f"unknown checkpoint version {d.get('v')!r}")
        committed = int(d["committed"])
        held: list[tuple[int, int]] = []
        prev = committed
        for item in d["held"]:
            if type(item) is int:
                prev += item
                held.append((prev, 0))
            else:
                prev += int(item[0])
                held.extend((prev, int(b)) for b in item[1:])
        p_ms = d.get("processing_ms", d.get("stream_ms"))
        clocks = _decode_clocks(committed, d.get("clocks", ()))
        return Checkpoint(
            group=str(d["group"]),
            topic=str(d["topic"]),
            partition=int(d["partition"]),
            committed=committed,
            processed=int(d["processed"]),
            processing_ms=None if p_ms is None else float(p_ms),
            held=tuple(held),
            token=str(d["token"]),
            clocks=clocks,
        )
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, zlib.error) as err:
        raise CheckpointError(f"undecodable checkpoint: {type(err).__name__}: {err}") from err


def _encode_clocks(committed: int, clocks: tuple[tuple[int, int, float], ...]) -> list[Any]:
    """`[offset delta, block, clock]` each, both deltas from the previous entry: clocks of live
    conversations are close to each other, so an integral clock is written as an integer delta (an
    exact difference of integers); any other clock as itself, a float (orjson keeps the difference)."""
    out: list[Any] = []
    prev_offset, prev_clock = committed, 0.0
    for offset, block, clock in clocks:
        field: int | float = clock
        if clock.is_integer() and prev_clock.is_integer() and max(abs(clock), abs(prev_clock)) < 2**53:
            field = int(clock) - int(prev_clock)
        out.append([offset - prev_offset, block, field])
        prev_offset, prev_clock = offset, clock
    return out


def _decode_clocks(committed: int, items: Iterable[Any]) -> tuple[tuple[int, int, float], ...]:
    out: list[tuple[int, int, float]] = []
    offset, clock = committed, 0.0
    for delta, block, field in items:
        offset += int(delta)
        clock = float(int(clock) + field) if type(field) is int else float(field)
        out.append((offset, int(block), clock))
    return tuple(out)


class ReplayFilter:
    """Decides, during a replay of `[C, HW]`, what of each record to process again.

    `blocks(offset)` returns None for "process the whole record normally" (past HW: new input),
    an empty set for "skip it, it was emitted" and the held blocks otherwise. Offsets are consumed
    in order; `active` turns False once HW is passed, and `pending()` lists the held events the
    replay has not reached yet (they still count as held for the commit rule and a new checkpoint).
    `missed` lists held events whose records were not in the log any more (retention deleted them
    before the replay): they cannot be emitted, and the sidecar logs them loudly.
    """

    def __init__(self, cp: Checkpoint) -> None:
        self.processed = cp.processed
        self.committed = cp.committed
        self._held: dict[int, frozenset[int]] = {}
        for offset, block in cp.held:
            self._held[offset] = self._held.get(offset, frozenset()) | {block}
        self._order = sorted(self._held)
        self._next = 0  # index into _order of the first held offset not reached yet
        self.missed: list[tuple[int, int]] = []  # held events whose records the replay never saw
        self.active = cp.processed >= cp.committed

    def blocks(self, offset: int) -> frozenset[int] | None:
        if not self.active:
            return None
        order = self._order
        while self._next < len(order) and order[self._next] <= offset:
            if order[self._next] < offset:  # never delivered: deleted by retention before the replay
                self.missed.extend((order[self._next], b) for b in sorted(self._held[order[self._next]]))
            self._next += 1
        if offset > self.processed:
            self.active = False
            return None
        if offset >= self.processed:
            self.active = False
        return self._held.get(offset, frozenset())

    def pending(self) -> list[tuple[int, int]]:
        """Held events at offsets not replayed yet, in order."""
        return [(o, b) for o in self._order[self._next :] for b in sorted(self._held[o])]

    def first_pending_offset(self) -> int | None:
        return self._order[self._next] if self._next < len(self._order) else None
