"""Restarts of `stream-pairer run` (a real child process) mid-stream, at-least-once mode.

What this proves:
* SIGTERM: the process finishes its batch, makes outputs durable, commits and exits 0; calls still
  open are NOT flushed as orphans, and the next process rebuilds them by replay and pairs them with
  results written later. With the replay checkpoint, even at-least-once emits nothing twice here.
* kill -9 in the middle of a stream: nothing is lost. Every input event appears in the outputs at
  least once (the delivery guarantee); repeats are allowed and counted.
* --flush-on-shutdown (in-process): open calls leave as `shutdown` orphans and the commit passes them,
  so a restart replays nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

from stream_pairer.adapters.kafka.sidecar import Sidecar

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import (
    OutputReader,
    SidecarProcess,
    config,
    expected_identities,
    identities,
    produce,
    started,
    summary,
    trickle,
    two_phase_traffic,
)


async def test_sigterm_exits_zero_and_restart_emits_nothing_twice(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(3)
    group = f"g-{topic}"
    phase1, phase2 = two_phase_traffic(12, 3, seed=1)
    placed = await produce(bootstrap, topic, phase1)
    open_calls = 12  # one per conversation, answered only in phase 2

    first = SidecarProcess(tmp_path / "first.log", bootstrap, topic, group).start()
    try:
        await first.wait_ready()
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: len(identities(recs)) == len(placed) - open_calls)
        t0 = time.monotonic()
        code = await first.terminate(30)
        stop_s = time.monotonic() - t0
    finally:
        first.close()
    assert code == 0, first.log_tail()
    assert stop_s < 30
    assert "stopping: " in first.log_path.read_text()

    placed += await produce(bootstrap, topic, phase2)
    second = SidecarProcess(tmp_path / "second.log", bootstrap, topic, group).start()
    try:
        await second.wait_ready()
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed))
            await reader.settle(1.5)
            records = reader.records
        assert await second.terminate(30) == 0
    finally:
        second.close()

    seen = identities(records)
    assert set(seen) == expected_identities(topic, placed)
    assert max(seen.values()) == 1, [k for k, v in seen.items() if v > 1]  # nothing twice
    s = summary(records)
    assert s["orphan_call:shutdown"] == 0 and s["orphan_call:timeout"] == 0, s
    assert s["pair"] == len(placed) // 2
    log = second.log_path.read_text()
    assert log.count("replaying") == 3, log  # each partition rebuilt its held calls from its checkpoint


async def test_kill9_mid_stream_at_least_once_loses_nothing(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(3)
    group = f"g-{topic}"
    phase1, phase2 = two_phase_traffic(30, 4, seed=2)
    placed = await produce(bootstrap, topic, phase1)

    victim = SidecarProcess(tmp_path / "victim.log", bootstrap, topic, group).start()
    try:
        await victim.wait_ready()
        async with OutputReader(bootstrap, topic) as reader:  # phase 1 committed, 30 calls held
            await reader.until(lambda recs: len(identities(recs)) == len(placed) - 30)

        writer = asyncio.create_task(trickle(bootstrap, topic, phase2, 5, 0.02))
        await asyncio.sleep(0.3)
        victim.kill()  # SIGKILL while input is still arriving: no shutdown, nothing flushed
        placed += await writer
    finally:
        victim.close()

    survivor = SidecarProcess(tmp_path / "survivor.log", bootstrap, topic, group).start()
    try:
        await survivor.wait_ready()
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed), 60)
            await reader.settle(1.5)
            records = reader.records
        assert await survivor.terminate(30) == 0
    finally:
        survivor.close()

    # The survivor restarted from committed offsets: with a checkpoint ("replaying") or, when the kill
    # fell between a checkpoint and its offset commit, without one ("plain replay"): both lose nothing.
    log = survivor.log_path.read_text()
    assert "no commit yet" not in log and ("replaying" in log or "plain replay" in log), log
    seen = identities(records)
    assert set(seen) == expected_identities(topic, placed)  # nothing lost, nothing invented
    repeats = Counter(v for v in seen.values())
    print(f"kill -9 at-least-once: {len(seen)} events, multiplicity histogram {dict(repeats)}")
    assert summary(records)["orphan_call:timeout"] == 0


async def test_flush_on_shutdown_emits_open_calls_and_commits_past_them(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(2)
    group = f"g-{topic}"
    phase1, _ = two_phase_traffic(6, 2, seed=3)
    placed = await produce(bootstrap, topic, phase1)

    sidecar = await started(config(bootstrap, topic, group, flush_on_shutdown=True))
    async with OutputReader(bootstrap, topic) as reader:
        await reader.until(lambda recs: len(identities(recs)) == len(placed) - 6)
        assert await sidecar.stop()
        await reader.until(lambda recs: summary(recs)["orphan_call:shutdown"] == 6)
        first = reader.records

    again = await started(config(bootstrap, topic, group))
    try:
        await asyncio.sleep(1.5)
        assert sum(st.pipeline.gauges().open_calls for st in again.states.values()) == 0  # nothing replayed
        assert all(st.records_fed == 0 for st in again.states.values())
    finally:
        assert await again.stop()
    seen = identities(first)
    assert set(seen) == expected_identities(topic, placed) and max(seen.values()) == 1
    assert isinstance(again, Sidecar)
