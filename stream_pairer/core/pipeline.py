"""Raw record in, output records out: format parsing, pairing and accounting in one synchronous step.

Every adapter (files, Kafka, the benchmarks, the audit) goes through this one path, so a record is
read, dead-lettered and counted the same way everywhere. Still pure: no I/O, no clock reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, NamedTuple, Protocol

from stream_pairer.core.dedup import HistoryDedup
from stream_pairer.core.engine import Engine, Record
from stream_pairer.core.formats import DEFAULT_CONFIG, RESENT_FORMATS, FormatConfig, RecordInfo, parse_record
from stream_pairer.core.model import CALL, FormatError, Source, ToolEvent, dead_letter
from stream_pairer.core.vocab import DeadLetterReason, OrphanReason, RecordKind

_PAIR: Final = RecordKind.PAIR.value
_DEAD_LETTER: Final = RecordKind.DEAD_LETTER.value

# Distinct unknown record types counted by name in the summary; the rest are counted as "other".
# Type values come from the input, so the set must be bounded (a producer writing a fresh type per
# record would otherwise grow the summary without end).
MAX_SKIPPED_TYPES = 32
OTHER_TYPE = "other"


@dataclass(slots=True)
class Summary:
    """What went in and what came out. `check()` is the conservation invariant in numbers."""

    records: int = 0
    skipped: int = 0  # readable records that carry no tool events
    # Of those, the records of a type no format knows, by type (bounded: MAX_SKIPPED_TYPES names).
    skipped_types: Counter[str] = field(default_factory=Counter)
    # Repeated copies of an already-read call or result (re-sent history of wire logs and OTel
    # spans): not events, counted here and nowhere else.
    duplicate_copies: int = 0
    events: Counter[str] = field(default_factory=Counter)  # by type
    events_by_format: Counter[str] = field(default_factory=Counter)
    pairs: Counter[str] = field(default_factory=Counter)  # by match (+ ":name"/":order" for fifo)
    orphans: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, reason)
    dead_letters: Counter[str] = field(default_factory=Counter)  # by reason
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)

    def count_output(self, rec: Record) -> None:
        kind = rec["kind"]
        if kind == _PAIR:
            m = rec["match"]
            self.pairs[m if rec["fifo_by"] is None else f"{m}:{rec['fifo_by']}"] += 1
        elif kind == _DEAD_LETTER:
            self.dead_letters[rec["reason"]] += 1
            return
        else:
            self.orphans[(kind, rec["reason"])] += 1
        outcome = rec.get("outcome")
        if outcome is not None:
            self.outcomes[outcome] += 1
        failure = rec.get("failure")
        if failure is not None:
            self.failures[failure] += 1

    def count_skipped_type(self, t: str) -> None:
        types = self.skipped_types
        if t not in types and len(types) >= MAX_SKIPPED_TYPES:
            t = OTHER_TYPE
        types[t] += 1

    def accounted(self) -> dict[str, int]:
        """Input events vs output members: each pair holds two events, each orphan one."""
        paired = 2 * sum(self.pairs.values())
        orphaned = sum(self.orphans.values())
        return {"events_in": sum(self.events.values()), "events_out": paired + orphaned}

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "skipped": self.skipped,
            "skipped_types": dict(self.skipped_types),
            "duplicate_copies": self.duplicate_copies,
            "events": dict(self.events),
            "events_by_format": dict(self.events_by_format),
            "pairs": dict(self.pairs),
            "orphans": {f"{k}:{r}": n for (k, r), n in sorted(self.orphans.items())},
            "dead_letters": dict(self.dead_letters),
            "outcomes": dict(self.outcomes),
            "failures": dict(self.failures),
        }


class PipelineObserver(Protocol):
    """Told what the pipeline did, as it does it: the sidecar wires `ops.metrics.Metrics` here (it has
    these methods), so the per-partition logic reports records read, skipped (by unknown type),
    history copies and evictions without importing Prometheus and without diffing the summary's
    counters. Dead letters, pairs
    and orphans are output records: the caller counts those where it delivers them."""

    def observe_record_read(self, fmt: str | None, n_calls: int, n_results: int) -> None: ...

    def observe_skipped(self, record_type: str | None = None) -> None: ...

    def observe_history_copies(self, n: int) -> None: ...

    def observe_eviction(self, n: int, limit: str) -> None: ...


def start_requests(
    requests: list[tuple[int, str, float | None]], before: int, mark: Callable[[str, float | None], None]
) -> None:
    """Tells the engine (`mark`: its `mark_request`) of the record's request starts that come
    before its event `before`, and drops them from `requests` (RecordInfo.requests): a start is
    marked before the event that follows it, so the tagger counts that event in the new request.
    Both engines' `feed` call it before each event, so they mark in the same order; what is left
    after the last event is marked by the caller and stays in `info`."""
    while requests and requests[0][0] <= before:
        _, conv, ts = requests.pop(0)
        mark(conv, ts)


def count_skipped(
    summary: Summary,
    observer: PipelineObserver | None,
    info: RecordInfo,
    mark: Callable[[str, float | None], None],
) -> None:
    """A readable record without events, in either engine: counted (by type when no format knows
    its type), observed, and its request starts passed on (they stay in `info`)."""
    summary.skipped += 1
    if info.skipped_type is not None:
        summary.count_skipped_type(info.skipped_type)
    if observer is not None:
        observer.observe_record_read(None, 0, 0)
        observer.observe_skipped(info.skipped_type)
    for _, conv, ts in info.requests:
        mark(conv, ts)


def observe_read(
    observer: PipelineObserver, admitted: list[ToolEvent], copies: int, format_order: Iterable[str]
) -> None:
    """Tells the observer of a record's re-sent copies and of the events it admitted (in either
    engine; `format_order`: the formats in the order the run first counted them)."""
    if copies:
        observer.observe_history_copies(copies)
    if admitted:
        calls = sum(1 for ev in admitted if ev.type == CALL)
        observer.observe_record_read(record_format(admitted, format_order), calls, len(admitted) - calls)
    else:
        observer.observe_record_read(None, 0, 0)  # nothing but repeated copies


def record_format(events: list[ToolEvent], format_order: Iterable[str]) -> str:
    """The format a record is counted under. All events of a record come from one format reader;
    should they ever differ, the record counts under the one first seen latest in the run
    (`format_order`: the run's events-by-format keys, what the metrics counted when they diffed
    the summary)."""
    first = events[0].format
    if all(ev.format == first for ev in events):
        return first
    formats = {ev.format for ev in events}
    return [f for f in format_order if f in formats][-1]


def consumed_offset(source: Mapping[str, Any]) -> int:
    """The input offset an event was consumed at: its own, or the internal topic's (`via`) under
    the sidecar's --repartition. What the commit rule and the checkpoint say of held events."""
    via = source.get("via")
    return int((via or source)["offset"])


def _position(event: ToolEvent) -> tuple[int, int]:
    """A held event's position in its partition: the (offset, block) a checkpoint lists."""
    return consumed_offset(event.source), event.block


class HeldChanges(NamedTuple):
    """What changed in the held state since the last checkpoint mark, by input position: what a
    delta checkpoint writes (see stream/checkpoint.py). Applied to the marked state (set semantics:
    `released` and `unclocked` removed, `held` added, `clocks` set), it gives the current state."""

    held: list[tuple[int, int]]
    released: list[tuple[int, int]]
    clocks: list[tuple[int, int, float]]
    unclocked: list[tuple[int, int]]


class StateGauges(NamedTuple):
    """What a pipeline holds, for the sidecar's state gauges (summed over partitions)."""

    open_calls: int
    open_conversations: int
    held_bytes: int
    pending_results: int


class StreamPipeline(Protocol):
    """What one Kafka partition (stream/partition.py) needs of its pipeline, whichever engine runs:
    `Pipeline` (outputs are record dicts) and the compiled core's `NativePipeline` built with
    `routed=True` (`encodes` True: each output is `(bytes, kind, conversation id, OutputMeta)`).
    Held state is described by input position (consumed offset, block), never by engine objects,
    so the partition's commit rule and checkpoint do not depend on either engine's internals."""

    @property
    def encodes(self) -> bool: ...
    @property
    def summary(self) -> Summary: ...
    @property
    def processing_ms(self) -> float: ...

    def feed(
        self,
        raw: bytes,
        source: Source,
        *,
        key: str | None = None,
        arrival_ms: float | None = None,
        replay_blocks: frozenset[int] | None = None,
        replay_clocks: Mapping[int, float] | None = None,
    ) -> list[Any]: ...
    def advance(self, now_ms: float) -> list[Any]: ...
    def flush(self, reason: str = ..., result_reason: str | None = None) -> list[Any]: ...
    def count_dead_letter(self, rec: Record) -> None: ...
    def oldest_held_offset(self) -> int | None: ...
    def held_positions(self) -> list[tuple[int, int]]: ...
    def held_clock_positions(self) -> list[tuple[int, int, float]]: ...
    def mark_clock_positions(self) -> list[tuple[int, int, float]]: ...
    def held_changes(self) -> HeldChanges: ...
    def end_restore(self) -> None: ...
    def discard(self) -> int: ...
    def gauges(self) -> StateGauges: ...


class Pipeline:
    """Parse -> count re-sent copies once -> pair -> count. Returns output records; the caller writes
    them wherever they go."""

    encodes: ClassVar[bool] = False  # outputs are record dicts (see StreamPipeline)

    def __init__(
        self,
        engine: Engine,
        format_config: FormatConfig = DEFAULT_CONFIG,
        dedup: HistoryDedup | None = None,
        observer: PipelineObserver | None = None,
    ) -> None:
        self.engine = engine
        self.format_config = format_config
        self.dedup = (
            dedup
            if dedup is not None
            else HistoryDedup(format_config.max_history_ids, format_config.max_history_conversations)
        )
        self.summary = Summary()
        self.observer = observer
        if observer is not None:
            engine.on_evict = observer.observe_eviction
        # What the last record said besides its events (its request starts, an unknown type, a
        # session id): reused for every record, read by the file adapter after `feed`.
        self.info = RecordInfo()

    def feed(
        self,
        raw: bytes,
        source: Source,
        *,
        key: str | None = None,
        arrival_ms: float | None = None,
        replay_blocks: frozenset[int] | None = None,
        replay_clocks: Mapping[int, float] | None = None,
    ) -> list[Record]:
        """Read one raw record: its output records (a dead letter if it cannot be read).

        `replay_blocks` is the replay mode of a checkpointed rebuild: the record was read and
        counted when it first arrived, so only the events at those block indexes are processed
        again, and nothing about the input is counted twice (the outputs are new, and are).
        `replay_clocks` (block -> clock) restores the checkpointed clock of that event's
        conversation before it is processed again (see `Engine.restore_clock`)."""
        summary = self.summary
        if replay_blocks is None:
            summary.records += 1
        info = self.info
        info.clear()
        try:
            events = parse_record(raw, source, key=key, config=self.format_config, info=info)
        except FormatError as err:
            # In replay mode only possible if the format options changed between runs: the held
            # events can no longer be read, and must still end somewhere.
            rec = dead_letter(raw, err.reason, err.detail, source)
            summary.dead_letters[err.reason] += 1
            return [rec]
        if replay_blocks is not None:
            return self._replay(events, replay_blocks, arrival_ms, replay_clocks)
        observer = self.observer
        requests = info.requests
        if not events:
            return self._skipped(info)
        out: list[Record] = []
        process = self.engine.process
        by_type = summary.events
        by_format = summary.events_by_format
        dedup = self.dedup
        copies = 0
        admitted = events
        for i, ev in enumerate(events):
            if requests:
                start_requests(requests, i, self.engine.mark_request)
            if ev.format in RESENT_FORMATS and not dedup.admit(ev):
                if not copies:
                    admitted = events[:i]
                copies += 1
                continue
            if copies:
                admitted.append(ev)
            by_type[ev.type] += 1
            by_format[ev.format] += 1
            out.extend(process(ev, arrival_ms))
        for _, conv, ts in requests:  # a request start after the record's last event
            self.engine.mark_request(conv, ts)
        if copies:
            summary.duplicate_copies += copies
        if observer is not None:
            observe_read(observer, admitted, copies, summary.events_by_format)
        for rec in out:
            summary.count_output(rec)
        return out

    def reject(
        self,
        head: bytes,
        size: int,
        source: Source,
        reason: str = DeadLetterReason.TOO_LARGE.value,
        detail: str | None = None,
    ) -> list[Record]:
        """A record the reader refused without reading it whole (a line past the size limit: only
        its first bytes and its size are known) or could not cut out (a broken document)."""
        self.summary.records += 1
        self.summary.dead_letters[reason] += 1
        if detail is None:
            detail = (
                f"the record is {size} bytes, more than the {self.format_config.max_record_bytes} "
                "byte limit (not read into memory; raw holds its first bytes)"
            )
        rec = dead_letter(head, reason, detail, source)
        if size > len(head):
            rec["raw_bytes"] = size
            rec["raw_truncated"] = True
        return [rec]

    def _skipped(self, info: RecordInfo) -> list[Record]:
        count_skipped(self.summary, self.observer, info, self.engine.mark_request)
        return []

    def _replay(
        self,
        events: list[ToolEvent],
        blocks: frozenset[int],
        arrival_ms: float | None,
        clocks: Mapping[int, float] | None,
    ) -> list[Record]:
        out: list[Record] = []
        engine = self.engine
        for ev in events:
            if ev.block in blocks:
                if clocks is not None and ev.block in clocks:
                    engine.restore_clock(ev.conversation_id, clocks[ev.block])
                out.extend(engine.process(ev, arrival_ms))
        return self._counted(out)  # rare: only if the limits changed between runs (evictions)

    def advance(self, now_ms: float) -> list[Record]:
        return self._counted(self.engine.advance(now_ms))

    def flush(
        self, reason: str = OrphanReason.SHUTDOWN.value, result_reason: str | None = None
    ) -> list[Record]:
        return self._counted(self.engine.flush(reason, result_reason))

    def _counted(self, out: list[Record]) -> list[Record]:
        for rec in out:
            self.summary.count_output(rec)
        return out

    # ------------------------------------------------------------------ StreamPipeline

    @property
    def processing_ms(self) -> float:
        return self.engine.processing_ms

    def count_dead_letter(self, rec: Record) -> None:
        """A record the adapter dead-lettered without feeding it (an unusable --repartition
        forward): counted as read, and as the dead letter it became."""
        self.summary.records += 1
        self.summary.count_output(rec)

    def oldest_held_offset(self) -> int | None:
        oldest = self.engine.oldest_held()
        return None if oldest is None else consumed_offset(oldest.event.source)

    def held_positions(self) -> list[tuple[int, int]]:
        """(consumed offset, block) of every held event, oldest first. The first call has the engine
        keep them from then on, as it holds and releases events (`Engine.track_positions`): the
        sidecar asks at every commit, and copying that map costs a fraction of walking every held
        event (issue 15); file mode never asks, so never pays for it."""
        engine = self.engine
        if not engine.tracks_positions:
            engine.track_positions(_position)
        return list(engine.positions.values())

    def held_clock_positions(self) -> list[tuple[int, int, float]]:
        """`Engine.held_clocks` by input position: (consumed offset, block, clock)."""
        return [(consumed_offset(h.event.source), h.event.block, c) for h, c in self.engine.held_clocks()]

    def mark_clock_positions(self) -> list[tuple[int, int, float]]:
        """`held_clock_positions`, and the base `held_changes` counts from (a snapshot's)."""
        engine = self.engine
        if not engine.tracks_positions:
            engine.track_positions(_position)
        return [(consumed_offset(h.event.source), h.event.block, c) for h, c in engine.mark_clocks()]

    def held_changes(self) -> HeldChanges:
        """`Engine.held_changes` by input position: O(what changed since the last mark)."""
        held, released, clocks, unclocked = self.engine.held_changes()
        return HeldChanges(held, released, [(o, b, c) for (o, b), c in clocks], unclocked)

    def end_restore(self) -> None:
        self.engine.end_restore()

    def discard(self) -> int:
        return self.engine.discard()

    def gauges(self) -> StateGauges:
        e = self.engine
        return StateGauges(e.open_calls, e.open_conversations, e.held_bytes, e.pending_results)
