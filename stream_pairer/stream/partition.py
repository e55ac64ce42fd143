"""One assigned input partition: its pairing pipeline, replay filter, stream clock and commit rule.

Pure (no I/O, no asyncio, no clock reads): the sidecar hands it fetched records and the wall time,
and gets back the output records to produce with their topic and key. Everything the delivery
guarantees rest on is decided here, where unit tests can reach it without a broker:

* the commit rule: the offset to commit is the lowest of the next offset to process, the oldest
  event still held, and the oldest held event a replay has not reached yet; a crash therefore
  replays every event whose pairing is not emitted;
* the checkpoint taken with each commit (see checkpoint.py) and the replay filter that uses it, so
  a replay rebuilds exactly the held state and re-emits nothing;
* the wall-clock tick, the partition's processing time (see clock.py).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from typing import Any, Final, NamedTuple, Protocol

from stream_pairer.core.model import OutputMeta, Source, dead_letter
from stream_pairer.core.pipeline import RoutedOutput, StreamPipeline, consumed_offset
from stream_pairer.core.vocab import DeadLetterReason, Record, RecordKind
from stream_pairer.stream.checkpoint import Checkpoint, ReplayFilter
from stream_pairer.stream.clock import NEG_INF, ProcessingClock

# Output topic name templates (`{topic}` is the input topic): the defaults of the sidecar and audit.
PAIRS_TOPIC: Final = "{topic}.pairs"
ORPHANS_TOPIC: Final = "{topic}.orphans"
DEAD_LETTER_TOPIC: Final = "{topic}.dead-letter"

_PAIR: Final = RecordKind.PAIR.value
_DEAD_LETTER: Final = RecordKind.DEAD_LETTER.value

# Lineage headers of a record re-keyed by --repartition (see repartition.py).
H_TOPIC: Final = "sp-src-topic"
H_PARTITION: Final = "sp-src-partition"
H_OFFSET: Final = "sp-src-offset"
# Set by stage one when the record was too large for the internal topic: only a prefix was
# forwarded, and this header carries the original size (stage two dead-letters it as too_large).
H_BYTES: Final = "sp-src-bytes"
Headers = Sequence[tuple[str, bytes]]


def lineage_headers(topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    return [(H_TOPIC, topic.encode()), (H_PARTITION, b"%d" % partition), (H_OFFSET, b"%d" % offset)]


def source_from_headers(headers: Headers | None, via: Source) -> Source:
    """The original lineage carried by a re-keyed record, plus `via` (where it was consumed); just
    `via` for a record without lineage headers (written by something else) or with unusable ones."""
    return lineage_from_headers(headers, via)[0]


def lineage_from_headers(headers: Headers | None, via: Source) -> tuple[Source, str | None]:
    """(source, problem): `problem` says why the lineage headers are present but unusable (a null
    or non-numeric value, a duplicate): such a record is dead-lettered, never fatal."""
    found: dict[str, bytes | None] = {}
    problems = []
    for name, value in headers or ():
        if name in (H_TOPIC, H_PARTITION, H_OFFSET):
            if name in found:
                problems.append(f"header {name} appears twice")
            found[name] = value
    if not found:
        return via, None
    if len(found) != 3:
        missing = sorted({H_TOPIC, H_PARTITION, H_OFFSET} - set(found))
        return via, f"lineage header(s) {', '.join(missing)} missing"
    try:
        topic, partition, offset = found[H_TOPIC], found[H_PARTITION], found[H_OFFSET]
        if topic is None or partition is None or offset is None:
            raise TypeError("null value")
        source = {"topic": topic.decode(), "partition": int(partition), "offset": int(offset), "via": via}
    except (UnicodeDecodeError, ValueError, TypeError) as err:
        shown = {k: v[:40] if isinstance(v, bytes) else v for k, v in found.items()}
        return via, f"unusable lineage headers {shown!r}: {err}"
    if problems:
        return via, "; ".join(problems)
    return source, None


def forwarded_size(headers: Headers | None) -> int | None:
    """The original size of a record stage one forwarded only a prefix of (see H_BYTES)."""
    for name, value in headers or ():
        if name == H_BYTES and value is not None:
            try:
                return int(value)
            except ValueError:
                return None
    return None


class InputRecord(Protocol):
    """What the sidecar needs of a consumed message (aiokafka's ConsumerRecord has all of it)."""

    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes]] | None: ...


@dataclass(frozen=True, slots=True)
class OutputTopics:
    pairs: str
    orphans: str
    dead_letters: str

    @classmethod
    def for_input(
        cls, topic: str, pairs: str = PAIRS_TOPIC, orphans: str = ORPHANS_TOPIC,
        dead_letters: str = DEAD_LETTER_TOPIC,
    ) -> OutputTopics:  # fmt: skip
        """Names from templates; `{topic}` is the input topic."""
        return cls(pairs.format(topic=topic), orphans.format(topic=topic), dead_letters.format(topic=topic))

    def all(self) -> tuple[str, str, str]:
        return (self.pairs, self.orphans, self.dead_letters)


class Emitted(NamedTuple):
    """One output to produce: the encoded record, as the compiled core wrote it, and `meta`,
    what the metrics count of it (read by the core while encoding, never decoded here)."""

    topic: str
    key: bytes | None
    record: bytes
    meta: OutputMeta


__all__ = ["consumed_offset"]  # re-exported: the offset rule lives with the pipelines (core/pipeline.py)


# The delta chain's snapshot rule (see PartitionState.checkpoint_record): a snapshot once the
# changes written since the last one exceed its size (at least SNAPSHOT_MIN_CHANGES), or after
# MAX_DELTAS deltas (each a compaction key, and a record to read back on restore).
MAX_DELTAS: Final = 1024
SNAPSHOT_MIN_CHANGES: Final = 256


class _Ledger:
    """Where this partition's checkpoint chain stands. `epoch` is the token of the snapshot being
    extended (None: the next record is a snapshot: none written yet in this assignment, or the
    last one may be unreadable), `token` the newest record's. `held`/`unclocked` are the changes
    the partition itself makes to the checkpointed state during a replay (events reached or
    missed, clocks handed to the engine), written before the engine's own changes (which win)."""

    __slots__ = ("budget", "epoch", "held", "seq", "since", "token", "unclocked")

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.token = ""
        self.seq = 0
        self.since = 0  # changes written in deltas since the snapshot
        self.budget = SNAPSHOT_MIN_CHANGES  # ... past which a snapshot is cheaper
        self.held: dict[tuple[int, int], bool] = {}
        self.unclocked: set[tuple[int, int]] = set()


def decode_key(key: bytes | None) -> str | None:
    """The message key as the conversation id fallback (a non-UTF-8 key is kept, replaced, not lost)."""
    if key is None:
        return None
    return key.decode("utf-8", errors="replace")


class PartitionState:
    """Pairing state of one input partition, for one assignment (a new object after every reassignment)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        pipeline: StreamPipeline,
        outputs: OutputTopics,
        *,
        start_offset: int | None,
        restore: Checkpoint | None = None,
        wall_ms: float = 0.0,
        lineage_headers: bool = False,
        commit_processed: bool = False,
    ) -> None:
        self.topic = topic
        # Commit what was processed, never below the restored commit (see commit_offset).
        self.commit_processed = commit_processed
        self._commit_floor = restore.committed if restore is not None else -1
        self.lineage_headers = lineage_headers  # --repartition: sources come from the record headers
        self.partition = partition
        self.pipeline = pipeline
        self.outputs = outputs
        self.clock = ProcessingClock.start(restore.processing_ms if restore is not None else None, wall_ms)
        # Offset after the last processed record; None until known (no commit yet and nothing read).
        self.next_offset: int | None = start_offset
        self.last_processed: int | None = None if start_offset is None else start_offset - 1
        self.replay: ReplayFilter | None = None
        self.dirty = False  # something to commit since the last commit
        self.records_fed = 0
        self.missed: list[tuple[int, int]] = []  # held events the replay could not find (see ReplayFilter)
        # Conversation clocks of the checkpoint, by the held event that carries each (see checkpoint.py).
        self._restore_clocks: dict[tuple[int, int], float] = {}
        self._ledger = _Ledger()
        if restore is not None:
            self.replay = ReplayFilter(restore)
            if restore.processing_ms is not None:
                self.pipeline.advance(restore.processing_ms)  # empty engine: only sets P
            self._restore_clocks = {(o, b): c for o, b, c in restore.clocks}
            if not self.replay.active:
                self._end_replay()

    # ------------------------------------------------------------------ input

    @property
    def restoring(self) -> bool:
        return self.replay is not None and self.replay.active

    def feed(self, records: Iterable[InputRecord], wall_ms: float) -> list[Emitted]:
        """Process fetched records in offset order; return what to produce."""
        out: list[Emitted] = []
        batch = getattr(self.pipeline, "feed_messages", None)
        if batch is not None and self.replay is None and not self.lineage_headers:
            self._feed_batch(records, batch, out)
            return out
        for msg in records:
            offset = msg.offset
            if self.next_offset is not None and offset < self.next_offset:
                continue  # already processed in this assignment (a stale fetch after a seek)
            blocks = self.replay.blocks(offset) if self.replay is not None else None
            if blocks is not None:
                if blocks:  # empty: all of the record was emitted before the commit, skip it
                    self._restore_record(msg, blocks, out)
            else:
                self._feed_record(msg, out)
            self.next_offset = offset + 1
            self.last_processed = offset
            self.dirty = True
            self.records_fed += 1
        if self.replay is not None:
            if self.replay.missed:
                self.missed.extend(self.replay.missed)
                self._ledger.held.update(dict.fromkeys(self.replay.missed, False))
                self._ledger.unclocked.update(self.replay.missed)
                self.replay.missed = []
            if not self.replay.active:
                self._end_replay()
        return out

    def _feed_batch(self, records: Iterable[InputRecord], batch: Any, out: list[Emitted]) -> None:
        """The common case (no replay, no lineage headers): the fetch's new messages cross into
        the core in one call (`NativePipeline.feed_messages`), fed exactly as `_feed_record` feeds
        them one by one; only the routing of their outputs is done here."""
        run: list[InputRecord] = []
        nxt = self.next_offset
        for msg in records:
            if nxt is None or msg.offset >= nxt:  # else already processed (a stale fetch after a seek)
                run.append(msg)
                nxt = msg.offset + 1
        if not run:
            return
        self._route_keyed(batch(run, self.topic, self.partition), out)
        self.next_offset = nxt
        self.last_processed = run[-1].offset
        self.dirty = True
        self.records_fed += len(run)

    def _end_replay(self) -> None:
        self._ledger.unclocked.update(self._restore_clocks)  # clocks of held events never replayed
        self.replay = None
        self._restore_clocks = {}
        self.pipeline.end_restore()

    def _source(self, msg: InputRecord) -> dict[str, Any]:
        here = {"topic": self.topic, "partition": self.partition, "offset": msg.offset}
        if self.lineage_headers:
            return source_from_headers(msg.headers, here)
        return here

    def _unreadable_forward(self, msg: InputRecord) -> Record | None:
        """--repartition: a record stage two cannot take as is, as a dead letter (else None):
        lineage headers present but unusable, or a record stage one could forward only a prefix of."""
        here = {"topic": self.topic, "partition": self.partition, "offset": msg.offset}
        source, problem = lineage_from_headers(msg.headers, here)
        raw = msg.value or b""
        if problem is not None:
            return dead_letter(raw, DeadLetterReason.WRONG_TYPE, f"re-keyed record with {problem}", source)
        size = forwarded_size(msg.headers)
        if size is None:
            return None
        rec = dead_letter(
            raw, DeadLetterReason.TOO_LARGE,
            f"the record is {size} bytes, more than the internal topic {self.topic} takes; "
            f"its first {len(raw)} bytes are kept",
            source,
        )  # fmt: skip
        rec["raw_bytes"] = size
        rec["raw_truncated"] = True
        return rec

    def _feed_record(self, msg: InputRecord, out: list[Emitted]) -> None:
        if self.lineage_headers and msg.headers:
            bad = self._unreadable_forward(msg)
            if bad is not None:
                self._route(self.pipeline.count_dead_letter(bad), msg.key, out)
                return
        key = msg.key
        recs = self.pipeline.feed(
            msg.value or b"", self._source(msg), key=decode_key(key), arrival_ms=float(msg.timestamp)
        )
        self._route(recs, key, out)

    def _restore_record(self, msg: InputRecord, blocks: frozenset[int], out: list[Emitted]) -> None:
        """Re-process only the events of this record that were still held at the last commit: the
        pipeline's replay mode, which counts nothing of the input again and re-emits no other block.
        The checkpointed state now has these events (and their clocks) from the engine, if it
        holds them: dropped from the partition's side of the next delta."""
        reached = [(msg.offset, b) for b in blocks]
        self._ledger.held.update(dict.fromkeys(reached, False))
        self._ledger.unclocked.update(reached)
        recs = self.pipeline.feed(
            msg.value or b"",
            self._source(msg),
            key=decode_key(msg.key),
            arrival_ms=float(msg.timestamp),
            replay_blocks=blocks,
            replay_clocks=self._replay_clocks(msg.offset, blocks),
        )
        self._route(recs, msg.key, out)

    def _replay_clocks(self, offset: int, blocks: frozenset[int]) -> dict[int, float] | None:
        """The conversation clocks the checkpoint carries on this record's held events, by block."""
        clocks = self._restore_clocks
        if not clocks:
            return None
        found = {b: clocks.pop((offset, b)) for b in blocks if (offset, b) in clocks}
        return found or None

    def tick(
        self, wall_ms: float, *, caught_up: bool, seen_end_ms: float | None = None,
        max_blind_ms: float = float("inf"),
    ) -> list[Emitted]:  # fmt: skip
        """Advance the partition's processing time by the wall clock (fires due processing timers:
        what a quiet conversation still holds); see clock.py."""
        if self.restoring:
            return []
        target = self.clock.tick(
            wall_ms, caught_up=caught_up, seen_end_ms=seen_end_ms, max_blind_ms=max_blind_ms
        )
        if target is None or target <= self.pipeline.processing_ms:
            return []
        out: list[Emitted] = []
        self._route(self.pipeline.advance(target), None, out)
        if out:
            self.dirty = True
        return out

    def flush(self, reason: str) -> list[Emitted]:
        """Emit everything held as orphans (`--flush-on-shutdown`): afterwards the commit passes it all."""
        out: list[Emitted] = []
        self._route(self.pipeline.flush(reason), None, out)
        self.dirty = True
        return out

    def discard(self) -> int:
        """Forget the state without emitting (revocation: the next owner rebuilds it by replay)."""
        self.replay = None
        self._restore_clocks = {}
        return self.pipeline.discard()

    # ------------------------------------------------------------------ commit rule

    def commit_offset(self) -> int | None:
        """The offset that may be committed now, or None when nothing is known yet. With
        `commit_processed`, what was processed (the held events' positions go in the checkpoint,
        and a replay starts from them: replay_start); otherwise never past the oldest held event."""
        if self.commit_processed and self.next_offset is not None:
            return max(self.next_offset, self._commit_floor)
        return self._held_back()

    def _held_back(self) -> int | None:
        """The oldest position a replay must read: the next offset, the oldest held event, or the
        oldest a running replay has not reached yet."""
        candidates: list[int] = []
        if self.next_offset is not None:
            candidates.append(self.next_offset)
        oldest = self.pipeline.oldest_held_offset()
        if oldest is not None:
            candidates.append(oldest)
        if self.replay is not None:
            first = self.replay.first_pending_offset()
            if first is not None:
                candidates.append(first)
        return min(candidates) if candidates else None

    def checkpoint(self, group: str, token: str) -> Checkpoint | None:
        """The whole state as one checkpoint (a snapshot): what `checkpoint_record` writes, assembled.
        O(held): the executable specification of what a replay restores."""
        return self._snapshot(group, token, mark=False)

    def checkpoint_record(self, group: str, token: str) -> Checkpoint | None:
        """The checkpoint record to write with this commit: a delta (the changes since the previous
        record, O(changes)) when this partition has an acknowledged chain to extend, else a snapshot
        (O(held)). A snapshot is also taken once the chain's changes outweigh one (the amortised
        rule of `_Ledger`), so the read back on restore stays O(held) too. Either assembles to
        exactly `checkpoint()` (see checkpoint.Chain)."""
        committed = self.commit_offset()
        if committed is None:
            return None
        led = self._ledger
        if led.epoch is not None and led.seq < MAX_DELTAS:
            changes = self.pipeline.held_changes()
            ops = led.held
            led.held = {}
            ops.update(dict.fromkeys(changes.held, True))
            ops.update(dict.fromkeys(changes.released, False))
            unclocked = led.unclocked
            led.unclocked = set()
            unclocked.update(changes.unclocked)
            n = len(ops) + len(unclocked) + len(changes.clocks)
            if led.since + n <= led.budget:
                processed, processing_ms = self._header(committed)
                delta = Checkpoint(
                    group=group,
                    topic=self.topic,
                    partition=self.partition,
                    committed=committed,
                    processed=processed,
                    processing_ms=processing_ms,
                    held=tuple(sorted(p for p, on in ops.items() if on)),
                    token=token,
                    clocks=tuple(sorted(changes.clocks)),
                    epoch=led.epoch,
                    seq=led.seq + 1,
                    prev=led.token,
                    released=tuple(sorted(p for p, on in ops.items() if not on)),
                    unclocked=tuple(sorted(unclocked)),
                    replay_from=self._replay_from(committed),
                )
                led.seq += 1
                led.since += n
                led.token = token
                return delta
        cp = self._snapshot(group, token, mark=True)
        if cp is not None:
            led.epoch = led.token = token
            led.seq = led.since = 0
            led.budget = max(len(cp.held) + len(cp.clocks), SNAPSHOT_MIN_CHANGES)
            led.held = {}
            led.unclocked = set()
        return cp

    def checkpoint_failed(self) -> None:
        """The last checkpoint record may not be readable (its commit failed, an aborted
        transaction): the next one is a snapshot, never a delta on top of it."""
        self._ledger.epoch = None

    def _replay_from(self, committed: int) -> int:
        """Checkpoint.replay_from: the oldest held position when it lies before the commit."""
        held_back = self._held_back() if self.commit_processed else None
        return held_back if held_back is not None and held_back < committed else -1

    def _header(self, committed: int) -> tuple[int, float | None]:
        processed = committed - 1 if self.last_processed is None else self.last_processed
        if self.replay is not None and self.replay.active:
            processed = max(processed, self.replay.processed)
        now = self.pipeline.processing_ms
        return processed, None if now == NEG_INF else now

    def _snapshot(self, group: str, token: str, *, mark: bool) -> Checkpoint | None:
        committed = self.commit_offset()
        if committed is None:
            return None
        held = self.pipeline.held_positions()
        clocks = self.pipeline.mark_clock_positions() if mark else self.pipeline.held_clock_positions()
        processed, processing_ms = self._header(committed)
        if self.replay is not None and self.replay.active:
            pending = self.replay.pending()
            held.extend(pending)
            # Clocks of conversations whose held events are not replayed yet: still the checkpoint's.
            waiting = set(pending)
            clocks.extend((o, b, c) for (o, b), c in self._restore_clocks.items() if (o, b) in waiting)
        # Sorted and unique, as `tuple(sorted(set(held)))` would give, but sorted before any set:
        # the engine yields its events in arrival order, i.e. (nearly) in offset order, which
        # Timsort takes in about one pass, whereas sorting a set's hash order costs n log n tuple
        # comparisons (63 vs 7 ms for 120k held events, on every commit). Duplicates, if any,
        # are then adjacent.
        held.sort()
        if any(map(operator.eq, held, islice(held, 1, None))):
            held = sorted(set(held))
        clocks.sort()
        return Checkpoint(
            group=group,
            topic=self.topic,
            partition=self.partition,
            committed=committed,
            processed=processed,
            processing_ms=processing_ms,
            held=tuple(held),
            token=token,
            clocks=tuple(clocks),
            replay_from=self._replay_from(committed),
        )

    # ------------------------------------------------------------------ outputs

    def _route(self, recs: list[RoutedOutput], input_key: bytes | None, out: list[Emitted]) -> None:
        """The compiled core's routed outputs, `(bytes, kind, conversation id, OutputMeta)`, of
        one input record (keyed `input_key`): see `_route_keyed`."""
        self._route_keyed(zip(recs, repeat(input_key)), out)

    def _route_keyed(self, items: Iterable[tuple[RoutedOutput, bytes | None]], out: list[Emitted]) -> None:
        """Routed outputs with their input record's key: routed by kind, keyed by conversation id
        (a dead letter by its input's key), never decoded."""
        topics = self.outputs
        for (data, kind, cid, meta), input_key in items:
            if kind == _DEAD_LETTER or cid is None:  # a pair or an orphan always has its id
                out.append(Emitted(topics.dead_letters, input_key, data, meta))
            elif kind == _PAIR:
                out.append(Emitted(topics.pairs, cid.encode(), data, meta))
            else:
                out.append(Emitted(topics.orphans, cid.encode(), data, meta))
