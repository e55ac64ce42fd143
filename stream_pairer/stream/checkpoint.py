"""Replay checkpoints: what a partition still held when its offset was committed. Pure data + codec.

Why: a restarted (or newly assigned) owner replays a partition from its oldest held event and
rebuilds the held state. (The committed offset follows what was processed, issue 25, with the held
positions before it; `replay_from` and the commit metadata say where the replay starts; with
--commit-held-back the committed offset itself stays at the oldest held event.) But most events in
the replayed range were already emitted (paired, orphaned, dead-lettered); processing them again
would emit them twice, and worse, without the state that came *before* the committed offset they
would be paired differently (a result whose call was before the offset would become a `no_call`
orphan, an id-less result could FIFO-pair with the wrong call). The checkpoint says, for the
committed offset `C` and the last processed offset `HW`, exactly which `(offset, block)` events were
still held. Replaying `[C, HW]` processes only those; nothing else in that range is even parsed.
After `HW`, processing is normal.

It also carries the two kinds of time the engine keeps (README, Time): the partition's processing
time P, from which replayed events count their processing timeouts again (late by the downtime,
never early), and the event-time clock of each conversation that holds events, so the replay
re-derives exactly the same event-time deadlines as the first pass. A clock is keyed by the
`(offset, block)` of the first held event of its conversation (the replay learns the conversation
id by reading that event), and left out when the replayed events alone rebuild it.

A checkpoint is trusted only when the partition's committed offset carries the checkpoint's `token`
in its commit metadata: in exactly-once mode both are written in one transaction, so they always
match; in at-least-once mode a crash between the two (or an operator resetting the offsets) leaves
a mismatch, and the partition falls back to a plain replay (at-least-once duplicates, documented).

Written as a chain, so a commit costs what changed rather than what is held: a snapshot (the whole
state, version 1) and then deltas (version 2: positions held and released, clock entries set and
dropped since the previous record), each naming its snapshot (`epoch`), its place (`seq`) and the
token of the state it applies to (`prev`). `read_chain`/`assemble` rebuild the states from what
the compacted topic gives back; `Chain.find` picks the one the committed offset names.
docs/DELIVERY.md, *Delta checkpoints*, has the keys, the snapshot rule and the failure cases.

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
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from stream_pairer.errors import CheckpointError

VERSION: Final = 1  # a snapshot: the whole state (the format every release reads)
DELTA_VERSION: Final = 2  # a delta: the changes since the previous checkpoint of its epoch
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
    # A delta (seq > 0) is the seq-th checkpoint after the snapshot whose token is `epoch`, applied
    # to the state of token `prev`: `held` and `clocks` are then what it adds or sets, `released`
    # and `unclocked` the held events and clock entries it removes. A snapshot has seq 0.
    epoch: str = ""
    seq: int = 0
    prev: str = ""
    released: tuple[tuple[int, int], ...] = ()
    unclocked: tuple[tuple[int, int], ...] = ()
    # Where a replay without this checkpoint must start (the oldest held event) when it lies before
    # C (the commit followed what was processed, issue 25); -1: at C. It rides in the commit
    # metadata too, so a commit whose checkpoint is unreadable still names it (see metadata).
    replay_from: int = -1

    @property
    def is_delta(self) -> bool:
        return self.seq > 0

    @property
    def metadata(self) -> str:
        """The commit metadata that binds an offset commit to this checkpoint (and, when the held
        events lie before the commit, where a plain replay must start: `sp1:<token>:<offset>`)."""
        held_back = f":{self.replay_from}" if 0 <= self.replay_from < self.committed else ""
        return METADATA_PREFIX + self.token + held_back

    def matches(self, committed: int | None, metadata: str | None) -> bool:
        return committed == self.committed and metadata == self.metadata


def new_token() -> str:
    return secrets.token_hex(8)


def key(group: str, topic: str, partition: int, seq: int = 0) -> bytes:
    """Compaction key: one live snapshot per (group, topic, partition), and one live delta per
    slot `seq` (the seq-th delta of the live epoch; an older epoch's delta in a slot the live
    epoch has not reached yet stays until it is reused, and readers skip it by its epoch)."""
    if seq:
        return orjson.dumps([group, topic, partition, seq])
    return orjson.dumps([group, topic, partition])


def snapshot_key(record_key: bytes) -> tuple[bytes, int]:
    """(the snapshot key of its partition, seq) of a checkpoint record's key: a delta's key is the
    snapshot's with the slot appended (see `key`); a key that is neither is returned as is, seq 0."""
    try:
        parts = orjson.loads(record_key)
    except orjson.JSONDecodeError:
        return record_key, 0
    if isinstance(parts, list) and len(parts) == 4 and type(parts[3]) is int and parts[3] > 0:
        return orjson.dumps(parts[:3]), parts[3]
    return record_key, 0


def _encode_positions(base: int, positions: tuple[tuple[int, int], ...]) -> list[Any]:
    """Sorted (offset, block)s, offsets delta-encoded from `base`: an offset whose only block is 0
    is a bare integer, otherwise `[delta, block, ...]`."""
    out: list[Any] = []
    prev = base
    i, n = 0, len(positions)
    while i < n:
        offset = positions[i][0]
        blocks = []
        while i < n and positions[i][0] == offset:
            blocks.append(positions[i][1])
            i += 1
        delta = offset - prev
        prev = offset
        out.append(delta if blocks == [0] else [delta, *blocks])
    return out


def _decode_positions(base: int, items: Iterable[Any]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    prev = base
    for item in items:
        if type(item) is int:
            prev += item
            out.append((prev, 0))
        else:
            prev += int(item[0])
            out.extend((prev, int(b)) for b in item[1:])
    return out


def encode(cp: Checkpoint) -> bytes:
    fields: dict[str, Any] = {
        "v": DELTA_VERSION if cp.is_delta else VERSION,
        "group": cp.group,
        "topic": cp.topic,
        "partition": cp.partition,
        "committed": cp.committed,
        "processed": cp.processed,
        "processing_ms": cp.processing_ms,
        "token": cp.token,
        "held": _encode_positions(cp.committed, cp.held),
        "clocks": _encode_clocks(cp.committed, cp.clocks),
    }
    if cp.replay_from >= 0:
        fields["replay_from"] = cp.replay_from
    if cp.is_delta:
        fields["epoch"] = cp.epoch
        fields["seq"] = cp.seq
        fields["prev"] = cp.prev
        fields["released"] = _encode_positions(cp.committed, cp.released)
        fields["unclocked"] = _encode_positions(cp.committed, cp.unclocked)
    body = orjson.dumps(fields)
    if len(body) > COMPRESS_OVER:
        return _ZLIB_MARK + zlib.compress(body, 1)
    return body


def decode(value: bytes) -> Checkpoint:
    try:
        if value[:1] == _ZLIB_MARK:
            value = zlib.decompress(value[1:])
        d = orjson.loads(value)
        version = d.get("v")
        if version not in (VERSION, DELTA_VERSION):
            raise CheckpointError(f"unknown checkpoint version {version!r}")
        committed = int(d["committed"])
        held = _decode_positions(committed, d["held"])
        p_ms = d.get("processing_ms", d.get("stream_ms"))
        clocks = _decode_clocks(committed, d.get("clocks", ()))
        delta: dict[str, Any] = {}
        if version == DELTA_VERSION:
            delta = {
                "epoch": str(d["epoch"]),
                "seq": int(d["seq"]),
                "prev": str(d["prev"]),
                "released": tuple(_decode_positions(committed, d["released"])),
                "unclocked": tuple(_decode_positions(committed, d["unclocked"])),
            }
            if delta["seq"] < 1:
                raise CheckpointError(f"delta checkpoint with seq {delta['seq']}")
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
            replay_from=int(d.get("replay_from", -1)),
            **delta,
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


@dataclass(frozen=True, slots=True)
class Chain:
    """The live checkpoint of a partition as read back: its newest snapshot and the deltas after
    it that extend it unbroken (each the next seq, each applied to its predecessor's token).
    `find` gives the state the committed offset names, assembled: the newest state in exactly-once
    mode (written in the offset's transaction), possibly an earlier one in at-least-once mode (a
    crash between writing a delta and committing the offset: the delta is there, the commit
    names its predecessor)."""

    snapshot: Checkpoint
    deltas: tuple[Checkpoint, ...] = ()

    @property
    def newest(self) -> Checkpoint:
        """The newest checkpoint's header (its committed offset and token; for a delta, not its state)."""
        return self.deltas[-1] if self.deltas else self.snapshot

    def find(self, committed: int | None, metadata: str | None) -> Checkpoint | None:
        """The assembled state whose offset and token the commit carries; None if none does."""
        for n in range(len(self.deltas), -1, -1):
            head = self.deltas[n - 1] if n else self.snapshot
            if head.matches(committed, metadata):
                return self.state(n)
        return None

    def state(self, n: int) -> Checkpoint:
        """The snapshot with its first `n` deltas applied, as one whole checkpoint (seq 0).
        O(held at the snapshot + the deltas' changes): paid once, when a partition is opened."""
        base = self.snapshot
        if n == 0:
            return base if not base.is_delta else replace(base, seq=0)
        held = set(base.held)
        clocks = {(o, b): c for o, b, c in base.clocks}
        for d in self.deltas[:n]:
            held.difference_update(d.released)
            held.update(d.held)
            for pos in d.unclocked:
                clocks.pop(pos, None)
            clocks.update(((o, b), c) for o, b, c in d.clocks)
        head = self.deltas[n - 1]
        return Checkpoint(
            group=head.group,
            topic=head.topic,
            partition=head.partition,
            committed=head.committed,
            processed=head.processed,
            processing_ms=head.processing_ms,
            held=tuple(sorted(held)),
            token=head.token,
            clocks=tuple(sorted((o, b, c) for (o, b), c in clocks.items())),
            replay_from=head.replay_from,
        )


def assemble(snapshot: Checkpoint, deltas: Iterable[Checkpoint]) -> Chain:
    """The chain from `snapshot` through the deltas found after it, given in log order (a slot
    written twice: the later one counts). Deltas of another epoch (left in a slot by an earlier
    snapshot's chain) are skipped; the chain ends at the first missing seq or broken link (a delta
    whose predecessor never became readable: an aborted transaction, a failed write)."""
    by_seq: dict[int, Checkpoint] = {}
    for d in deltas:
        if d.is_delta and d.epoch == snapshot.token:
            by_seq[d.seq] = d
    chain: list[Checkpoint] = []
    token = snapshot.token
    while (link := by_seq.get(len(chain) + 1)) is not None and link.prev == token:
        chain.append(link)
        token = link.token
    return Chain(snapshot, tuple(chain))


def read_chain(log: Iterable[tuple[bytes, bytes | None]]) -> Chain | None:
    """The live chain of one partition from its checkpoint records `(key, value)` in log order, as
    far back as the newest snapshot (earlier records may be there too, or compacted away: either
    way they do not count). None when there is no readable snapshot (first run, or undecodable: a
    plain replay). A delta that cannot be decoded is left out: the chain ends before its seq."""
    snapshot: Checkpoint | None = None
    deltas: list[Checkpoint] = []
    for record_key, value in log:
        if value is None:
            continue
        _, seq = snapshot_key(record_key)
        try:
            cp = decode(value)
        except CheckpointError:
            if seq == 0:
                snapshot, deltas = None, []  # the newest snapshot is unreadable: nothing before counts
            continue
        if seq == 0 and not cp.is_delta:
            snapshot, deltas = cp, []
        elif seq > 0 and cp.is_delta and cp.seq == seq:
            deltas.append(cp)
    return None if snapshot is None else assemble(snapshot, deltas)


def replay_offset(committed: int | None, metadata: str | None, cp: Checkpoint | None) -> int | None:
    """Where a new owner starts reading a partition. The held events of a commit that followed what
    was processed lie before it: from the first of them (the checkpoint names them; nothing else
    there is processed again). Without a usable checkpoint, a plain replay starts where the commit's
    metadata says the oldest held event was (nothing lost; at-least-once duplicates)."""
    if committed is None:
        return None
    if cp is not None:
        return min(committed, replay_start(cp))
    named = metadata_replay_from(metadata)
    return committed if named is None else min(committed, named)


def metadata_replay_from(metadata: str | None) -> int | None:
    """The replay start a commit's metadata names (`sp1:<token>:<offset>`), or None."""
    if not metadata or not metadata.startswith(METADATA_PREFIX):
        return None
    _, _, tail = metadata[len(METADATA_PREFIX) :].partition(":")
    return int(tail) if tail.isdigit() else None


def replay_start(cp: Checkpoint) -> int:
    """Where a replay from `cp` starts reading: its committed offset, or its first held event when
    that lies before (a partition committing what it processed keeps held events behind C)."""
    return min(cp.committed, min((offset for offset, _ in cp.held), default=cp.committed))


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
        # Held events may lie before C (the committed offset follows what was processed, issue 25):
        # the replay starts at the first of them.
        start = min(cp.committed, self._order[0]) if self._order else cp.committed
        self.active = cp.processed >= start

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
