"""The processing clock of a partition: wall time during which it was caught up, and nothing else."""

from __future__ import annotations

import pytest

from stream_pairer.stream.clock import NEG_INF, ProcessingClock, TickSchedule


def test_a_fresh_partition_starts_at_the_wall_clock_and_counts_from_its_first_caught_up_tick() -> None:
    c = ProcessingClock.start(None, wall_ms=50.0)
    assert c.now(10_000.0) == 50.0  # not counting before a tick found the partition caught up
    assert c.tick(1_050.0, caught_up=True) == 50.0
    assert c.tick(3_050.0, caught_up=True) == 2_050.0
    assert c.tick(61_050.0, caught_up=True) == 60_050.0


def test_a_restored_partition_continues_from_the_checkpointed_processing_time() -> None:
    c = ProcessingClock.start(500_000.0, wall_ms=100.0)
    assert c.tick(100.0, caught_up=True) == 500_000.0
    assert c.tick(1_100.0, caught_up=True) == 501_000.0
    assert ProcessingClock.start(NEG_INF, wall_ms=7.0).p_ms == 7.0  # an engine that never had P


def test_no_tick_and_no_count_while_a_backlog_is_being_read() -> None:
    c = ProcessingClock.start(None, wall_ms=0.0)
    assert c.tick(0.0, caught_up=True) == 0.0
    assert c.tick(1_000.0, caught_up=True) == 1_000.0
    assert c.tick(10_000.0, caught_up=False) is None  # behind: its events are still to come
    assert c.tick(60_000.0, caught_up=False) is None
    # Caught up again: the count resumes from here, so what was held meanwhile is late, never early.
    assert c.tick(61_000.0, caught_up=True) == 1_000.0
    assert c.tick(62_500.0, caught_up=True) == 2_500.0


def test_processing_time_never_goes_back() -> None:
    c = ProcessingClock.start(None, wall_ms=10_000.0)
    assert c.tick(10_000.0, caught_up=True) == 10_000.0
    assert c.tick(12_000.0, caught_up=True) == 12_000.0
    assert c.tick(9_000.0, caught_up=True) == 12_000.0  # the wall clock stepped back
    assert c.tick(13_000.0, caught_up=True) == 13_000.0
    assert c.tick(14_000.0, caught_up=False) is None
    assert c.tick(15_000.0, caught_up=True) == 13_000.0


def test_tick_schedule_fires_once_per_interval_and_skips_missed_ticks() -> None:
    s = TickSchedule(1.0, now_s=100.0)
    assert not s.due(100.5)
    assert s.remaining(100.5) == pytest.approx(0.5)
    assert s.due(101.0)
    assert not s.due(101.5)
    assert s.due(110.0)  # nine intervals late: one tick, not nine
    assert not s.due(110.9)
    assert s.due(111.0)
    with pytest.raises(ValueError):
        TickSchedule(0.0, now_s=0.0)


def test_silence_counts_only_up_to_the_last_fetch_response() -> None:
    c = ProcessingClock.start(None, wall_ms=0.0)
    assert c.tick(0.0, caught_up=True) == 0.0
    assert c.tick(5_000.0, caught_up=True, seen_end_ms=3_000.0) == 3_000.0  # log end seen at 3 s only
    assert c.tick(6_000.0, caught_up=True, seen_end_ms=6_000.0) == 6_000.0


def test_a_broker_outage_does_not_count_as_silence() -> None:
    c = ProcessingClock.start(1_000.0, wall_ms=0.0)
    assert c.tick(0.0, caught_up=True, seen_end_ms=0.0, max_blind_ms=3_000.0) == 1_000.0
    assert c.tick(1_000.0, caught_up=True, seen_end_ms=1_000.0, max_blind_ms=3_000.0) == 2_000.0
    # Broker unreachable from wall 1 s to 61 s: no fetch responses, the count stays put ...
    assert c.tick(30_000.0, caught_up=True, seen_end_ms=1_000.0, max_blind_ms=3_000.0) == 2_000.0
    # ... and when responses come back, the blind minute is skipped, not charged to the open calls.
    assert c.tick(61_000.0, caught_up=True, seen_end_ms=61_000.0, max_blind_ms=3_000.0) == 2_000.0
    assert c.tick(62_000.0, caught_up=True, seen_end_ms=62_000.0, max_blind_ms=3_000.0) == 3_000.0
    # A normal gap between ticks (under max_blind_ms) counts in full.
    assert c.tick(64_500.0, caught_up=True, seen_end_ms=64_500.0, max_blind_ms=3_000.0) == 5_500.0
