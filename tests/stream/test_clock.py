"""The wall-clock tick policy: a quiet partition's stream time follows the wall clock, a busy one its data."""

from __future__ import annotations

import pytest

from stream_pairer.stream.clock import NEG_INF, StreamClock, TickSchedule


def test_no_projection_before_any_event() -> None:
    c = StreamClock()
    assert c.projected(5_000) is None
    assert c.tick(5_000, caught_up=True) is None
    c.observe(NEG_INF, 5_000)  # an engine that has seen nothing has stream time -inf
    assert c.tick(6_000, caught_up=True) is None


def test_quiet_partition_advances_by_elapsed_wall_time() -> None:
    c = StreamClock()
    c.observe(1_000_000.0, wall_ms=50.0)  # latest event time seen at wall 50
    assert c.tick(50.0, caught_up=True) == 1_000_000.0
    assert c.tick(2_050.0, caught_up=True) == 1_002_000.0
    assert c.tick(60_050.0, caught_up=True) == 1_060_000.0


def test_no_tick_while_a_backlog_is_being_read() -> None:
    c = StreamClock()
    c.observe(1_000.0, wall_ms=0.0)
    assert c.tick(10_000.0, caught_up=False) is None
    assert c.tick(10_000.0, caught_up=True) == 11_000.0


def test_event_time_overtaking_the_projection_reanchors() -> None:
    c = StreamClock()
    c.observe(1_000.0, wall_ms=0.0)
    c.observe(9_000.0, wall_ms=1_000.0)  # events 8 s ahead of the wall-clock projection (2_000)
    assert c.anchor_stream_ms == 9_000.0 and c.anchor_wall_ms == 1_000.0
    assert c.tick(3_000.0, caught_up=True) == 11_000.0


def test_older_event_time_keeps_the_anchor_so_stream_time_never_goes_back() -> None:
    c = StreamClock()
    c.observe(1_000.0, wall_ms=0.0)
    before = c.tick(5_000.0, caught_up=True)
    c.observe(2_000.0, wall_ms=5_000.0)  # an event older than the projection (6_000)
    assert c.anchor_stream_ms == 1_000.0
    after = c.tick(5_000.0, caught_up=True)
    assert before == after == 6_000.0


def test_wall_clock_going_backwards_does_not_move_stream_time_back() -> None:
    c = StreamClock()
    c.observe(1_000.0, wall_ms=10_000.0)
    assert c.tick(9_000.0, caught_up=True) == 1_000.0


def test_restore_anchors_at_the_checkpointed_stream_time() -> None:
    c = StreamClock()
    c.restore(500_000.0, wall_ms=100.0)
    assert c.tick(1_100.0, caught_up=True) == 501_000.0
    c.restore(None, wall_ms=100.0)
    assert c.tick(1_100.0, caught_up=True) is None


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
    c = StreamClock()
    c.observe(1_000.0, wall_ms=0.0)
    assert c.tick(5_000.0, caught_up=True, seen_end_ms=3_000.0) == 4_000.0  # log end seen at 3 s only


def test_a_broker_outage_does_not_count_as_silence() -> None:
    c = StreamClock()
    c.observe(1_000.0, wall_ms=0.0)
    assert c.tick(1_000.0, caught_up=True, seen_end_ms=1_000.0, max_blind_ms=3_000.0) == 2_000.0
    # Broker unreachable from wall 1 s to 61 s: no fetch responses, the projection stays put ...
    assert c.tick(30_000.0, caught_up=True, seen_end_ms=1_000.0, max_blind_ms=3_000.0) == 2_000.0
    # ... and when responses come back, the blind minute is skipped, not charged to the open calls.
    assert c.tick(61_000.0, caught_up=True, seen_end_ms=61_000.0, max_blind_ms=3_000.0) == 2_000.0
    assert c.tick(62_000.0, caught_up=True, seen_end_ms=62_000.0, max_blind_ms=3_000.0) == 3_000.0
    # A normal gap between ticks (under max_blind_ms) counts in full.
    assert c.tick(64_500.0, caught_up=True, seen_end_ms=64_500.0, max_blind_ms=3_000.0) == 5_500.0
