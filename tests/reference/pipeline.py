"""The reference model's pipeline: format parsing, the reference engine and accounting, per record.

Not a production path. Tests run it beside the compiled core (core/native.py) as the oracle: for
the same input the two give the same records, counts and observer calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from stream_pairer.core.dedup import HistoryDedup
from stream_pairer.core.formats import DEFAULT_CONFIG, RESENT_FORMATS, FormatConfig, RecordInfo
from stream_pairer.core.model import FormatError, Source, ToolEvent, dead_letter
from stream_pairer.core.pipeline import (
    HeldChanges,
    PipelineObserver,
    StateGauges,
    Summary,
    consumed_offset,
    count_skipped,
    observe_read,
    start_requests,
)
from stream_pairer.core.vocab import DeadLetterReason, OrphanReason, Record
from tests.reference.engine import Engine
from tests.reference.formats import parse_record  # the oracle readers (issue 23)


def _position(event: ToolEvent) -> tuple[int, int]:
    """A held event's position in its partition: the (offset, block) a checkpoint lists."""
    return consumed_offset(event.source), event.block


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
