"""What a pipeline reports and what a Kafka partition needs of it: the Summary, the observer hooks,
held-state changes by input position, and the StreamPipeline protocol the compiled core's
pipeline (core/native.py) satisfies.

Why apart from the core itself: the adapters, the metrics and the reference model (tests/reference)
read these types without needing the extension. Pure: no I/O, no clock reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

from stream_pairer.core.formats import RecordInfo
from stream_pairer.core.model import CALL, OutputMeta, Source, ToolEvent
from stream_pairer.core.vocab import Record, RecordKind

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
    """A readable record without events (the core's Python read path, and the reference model):
    counted (by type when no format knows its type), observed, and its request starts passed on
    (they stay in `info`)."""
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


# One output of a routed pipeline (the sidecar's): the encoded record, its kind, its conversation
# id (None for a dead letter) and what the metrics count of it, all read while encoding, so the
# partition routes and counts it without decoding it.
RoutedOutput = tuple[bytes, str, str | None, OutputMeta]


class StreamPipeline(Protocol):
    """What one Kafka partition (stream/partition.py) needs of its pipeline: the compiled core's
    `NativePipeline` built with `routed=True`, whose every output is a `RoutedOutput`. Held state
    is described by input position (consumed offset, block), never by engine objects, so the
    partition's commit rule and checkpoint do not depend on the core's internals."""

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
    ) -> list[RoutedOutput]: ...
    def advance(self, now_ms: float) -> list[RoutedOutput]: ...
    def flush(self, reason: str = ..., result_reason: str | None = None) -> list[RoutedOutput]: ...
    def count_dead_letter(self, rec: Record) -> list[RoutedOutput]: ...
    def oldest_held_offset(self) -> int | None: ...
    def held_positions(self) -> list[tuple[int, int]]: ...
    def held_clock_positions(self) -> list[tuple[int, int, float]]: ...
    def mark_clock_positions(self) -> list[tuple[int, int, float]]: ...
    def held_changes(self) -> HeldChanges: ...
    def end_restore(self) -> None: ...
    def discard(self) -> int: ...
    def gauges(self) -> StateGauges: ...
