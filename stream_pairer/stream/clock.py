"""Processing time of one partition: the wall-clock tick policy, pure (the caller passes the clock).

Why it exists: event time is per conversation (README, Time) and only moves when that
conversation's events arrive. A conversation that goes quiet would then keep its unanswered calls
forever (Kafka Streams' stream-time punctuation has the same gap). So the engine also has a
processing clock P, which this module derives from the wall clock, per partition, and never from
record contents: every held event is also emitted once it has been held for its timeout in P.

P counts wall time, but only wall time during which the partition was known to be caught up:

* The tick is applied only to a partition that is *caught up* (its position has reached the end of
  the log as of the last fetch response). While a backlog is being read P stands still: a call whose
  result sits further down the backlog has not been waiting in any sense that matters, and firing
  on P then would time out calls whose results are already in the log. Counting starts again at the
  first tick that finds the partition caught up, so events held during the backlog count their
  timeout from there (late by the backlog, never early).
* Silence is only known up to the last time the end of the log was actually observed (the last
  fetch response), so the count stops there; a gap in observations longer than `max_blind_ms`
  means the broker was out of reach, and that stretch does not count at all (the producers of the
  results were probably stalled by the same outage), so open calls do not all time out the moment
  the broker comes back.

Differences of wall time only are used, so a skew between the producers' clocks and ours does not
matter. A fresh partition starts P at the wall clock; a restored one at the checkpointed P, so held
events replayed after a restart count their timeout from the restore (late by the downtime, never
early).
"""

from __future__ import annotations

from dataclasses import dataclass

NEG_INF = float("-inf")


@dataclass(slots=True)
class ProcessingClock:
    """P of one partition: `p_ms` at wall time `anchor_wall_ms`, counting from there while `counting`."""

    p_ms: float = 0.0
    anchor_wall_ms: float = 0.0
    counting: bool = False  # the partition was caught up at the last tick: wall time counts
    last_seen_ms: float | None = None  # the latest `seen_end_ms` a tick was given

    @classmethod
    def start(cls, p_ms: float | None, wall_ms: float) -> ProcessingClock:
        """A partition's clock: from a checkpointed P (restart, reassignment), else from the wall clock."""
        return cls(p_ms=wall_ms if p_ms is None or p_ms == NEG_INF else p_ms, anchor_wall_ms=wall_ms)

    def now(self, wall_ms: float) -> float:
        """P at `wall_ms` if nothing changes meanwhile (monotone: a wall clock going back stands still)."""
        if not self.counting:
            return self.p_ms
        return self.p_ms + max(wall_ms - self.anchor_wall_ms, 0.0)

    def tick(
        self, wall_ms: float, *, caught_up: bool, seen_end_ms: float | None = None,
        max_blind_ms: float = float("inf"),
    ) -> float | None:  # fmt: skip
        """The processing time to advance the engine to on a tick, or None when no tick applies.

        `seen_end_ms` is when the end of the partition was last observed (the last fetch response):
        silence is only known up to then, so the count stops there. A gap between two ticks'
        observations longer than `max_blind_ms` means the broker was out of reach; that stretch does
        not count. A tick that finds a backlog stops the count (from the previous tick) until a
        tick finds the partition caught up again.
        """
        known = wall_ms if seen_end_ms is None else min(wall_ms, seen_end_ms)
        last = self.last_seen_ms
        self.last_seen_ms = known if last is None else max(last, known)
        if not caught_up:
            self.counting = False
            self.anchor_wall_ms = max(known, self.anchor_wall_ms)
            return None
        blind = last is not None and known - last > max_blind_ms
        if self.counting and not blind:
            self.p_ms = self.now(known)
        self.anchor_wall_ms = max(known, self.anchor_wall_ms)
        self.counting = True
        return self.p_ms


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
