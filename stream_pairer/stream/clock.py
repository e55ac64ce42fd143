"""Stream time for a quiet partition: the wall-clock tick policy, pure (the caller passes the clock).

Why it exists: the engine only knows event time, and event time only moves when events arrive. On
a partition that goes quiet, an unanswered call would then wait forever for a timer that never
fires (Kafka Streams' stream-time punctuation has exactly this gap). So, per partition, stream time
is projected forward by the wall time elapsed since the latest event time was seen:

    projected(wall) = anchor_stream_ms + (wall - anchor_wall_ms)

The anchor is set when event time first overtakes the projection (events carry later times than the
clock predicted), so stream time is `max(latest event time, anchor + elapsed wall time)`: monotone,
driven by the data while data flows, and by the wall clock only when it stops.

The tick is applied only to a partition that is *caught up* (its position has reached the end of
the log): with a backlog, the next event's own time is the better clock, and projecting while
catching up would time out calls whose results are sitting in the backlog. And silence is only
known up to the last time the end of the log was actually observed (the last fetch response), so
a broker outage freezes the projection instead of timing out every open call (see `tick`).

Differences of wall time only are used, so a skew between the producers' clocks and ours does not
matter. After a restart the anchor is the restored stream time at the moment of the restore: held
calls get their remaining timeout counted from then (late by the downtime, never early).
"""

from __future__ import annotations

from dataclasses import dataclass

NEG_INF = float("-inf")


@dataclass(slots=True)
class StreamClock:
    """The projection anchor of one partition."""

    anchor_stream_ms: float | None = None
    anchor_wall_ms: float = 0.0
    last_seen_ms: float | None = None  # the latest `seen_end_ms` a tick was given

    def projected(self, wall_ms: float) -> float | None:
        """Stream time the partition would be at now if nothing more arrived, or None before any event."""
        if self.anchor_stream_ms is None:
            return None
        return self.anchor_stream_ms + max(wall_ms - self.anchor_wall_ms, 0.0)

    def observe(self, stream_ms: float, wall_ms: float) -> None:
        """Stream time after events were processed at `wall_ms`: re-anchor when it overtook the projection."""
        if stream_ms == NEG_INF:
            return
        projected = self.projected(wall_ms)
        if projected is None or stream_ms > projected:
            self.anchor_stream_ms = stream_ms
            self.anchor_wall_ms = wall_ms

    def restore(self, stream_ms: float | None, wall_ms: float) -> None:
        """Start from a checkpointed stream time (a restarted or reassigned partition)."""
        if stream_ms is None or stream_ms == NEG_INF:
            self.anchor_stream_ms = None
            return
        self.anchor_stream_ms = stream_ms
        self.anchor_wall_ms = wall_ms

    def tick(
        self, wall_ms: float, *, caught_up: bool, seen_end_ms: float | None = None,
        max_blind_ms: float = float("inf"),
    ) -> float | None:  # fmt: skip
        """The stream time to advance the engine to on a tick, or None when no tick applies.

        `seen_end_ms` is when the end of the partition was last observed (the last fetch response):
        silence is only known up to then, so the projection stops there. A gap between two ticks'
        observations longer than `max_blind_ms` means the broker was out of reach; that stretch does
        not count at all (the producers of the results were probably stalled by the same outage), so
        open calls do not all time out the moment the broker comes back.
        """
        known = wall_ms if seen_end_ms is None else min(wall_ms, seen_end_ms)
        last = self.last_seen_ms
        self.last_seen_ms = known if last is None else max(last, known)
        if self.anchor_stream_ms is not None and last is not None and known - last > max_blind_ms:
            start = max(last, self.anchor_wall_ms)
            if known > start:
                self.anchor_stream_ms = self.projected(start)
                self.anchor_wall_ms = known
        if not caught_up:
            return None
        return self.projected(known)


class TickSchedule:
    """When the periodic work is due: ticks every `interval_s` of wall time (monotonic seconds)."""

    def __init__(self, interval_s: float, now_s: float) -> None:
        if interval_s <= 0:
            raise ValueError("tick interval must be > 0")
        self.interval_s = interval_s
        self.next_s = now_s + interval_s

    def due(self, now_s: float) -> bool:
        if now_s < self.next_s:
            return False
        # Skip missed ticks instead of bursting through them: one tick covers any elapsed time.
        self.next_s = now_s + self.interval_s
        return True

    def remaining(self, now_s: float) -> float:
        return max(self.next_s - now_s, 0.0)
