"""A rebalance between two sidecar instances in one consumer group (both in-process).

What this proves: when a second instance joins, partitions move while calls are open on them; the
new owner rebuilds the open calls by replay (no `rebalance` orphans, no timeouts) and pairs them
with results written after the move; when an instance leaves, its partitions come back the same
way. Every input event is in the outputs exactly once, in both delivery modes (read_committed):
a graceful rebalance commits outputs, offsets and the replay checkpoint together before the move,
so even at-least-once emits nothing twice here.
"""

from __future__ import annotations

import pytest

from tests.reference.engine import EngineConfig

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import (
    OutputReader,
    config,
    expected_identities,
    identities,
    produce,
    started,
    summary,
    two_phase_traffic,
    wait_for,
)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
async def test_partitions_move_with_open_calls_and_nothing_is_lost_or_doubled(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory, exactly_once: bool
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(4)
    group = f"g-{topic}"
    # Every call is answered in a later phase, so no timer may fire: a call timeout far beyond the
    # test's length keeps a slow rebalance on a loaded machine from turning open calls into orphans.
    engine = EngineConfig(call_timeout_ms=300_000, result_grace_ms=1_000)
    cfg = config(bootstrap, topic, group, exactly_once=exactly_once, engine=engine)
    phase1, phase2 = two_phase_traffic(16, 3, seed=11, prefix="a")
    phase3, phase4 = two_phase_traffic(16, 2, seed=12, prefix="b")
    placed = await produce(bootstrap, topic, phase1)

    first = await started(cfg)
    second = None
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: len(identities(recs)) == len(placed) - 16)
        assert len(first.states) == 4
        held_before = sum(st.pipeline.gauges().open_calls for st in first.states.values())
        assert held_before == 16

        second = await started(cfg)  # joins: the group rebalances, partitions move with open calls
        await wait_for(
            lambda: len(first.states) + len(second.states) == 4 and len(second.states) > 0, 30, "split"
        )
        await wait_for(lambda: first.ready and second.ready, 30, "both ready")
        moved = set(second.states)
        held_after = sum(st.pipeline.gauges().open_calls for s in (first, second) for st in s.states.values())
        await wait_for(
            lambda: sum(st.pipeline.gauges().open_calls for s in (first, second) for st in s.states.values())
            == 16,
            30, "open calls rebuilt on the new owner",
        )  # fmt: skip

        placed += await produce(bootstrap, topic, phase2 + phase3)
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: len(identities(recs)) == len(placed) - 16, 60)

        assert await second.stop()  # leaves: its partitions go back to the first instance
        await wait_for(lambda: len(first.states) == 4 and first.ready, 30, "partitions back")
        placed += await produce(bootstrap, topic, phase4)
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed), 60)
            await reader.settle(1.5)
            records = reader.records
    finally:
        if second is not None:
            await second.stop()
        assert await first.stop()

    assert moved and held_after <= 16
    seen = identities(records)
    assert set(seen) == expected_identities(topic, placed)
    assert max(seen.values()) == 1, sorted(k for k, v in seen.items() if v > 1)[:10]
    s = summary(records)
    assert s["pair"] == len(placed) // 2, s
    assert not any(k.startswith("orphan") for k in s), s  # no rebalance/timeout/no_call orphans
    assert first.metrics.registry.get_sample_value("stream_pairer_rebalances_total") >= 2
