"""Exactly-once: `stream-pairer run --exactly-once` killed with SIGKILL mid-stream, then restarted.

What this proves: with outputs, the offset commit and the replay checkpoint in one transaction per
partition, and the next owner fencing the dead one (its open transaction is aborted), the outputs
read with isolation_level=read_committed hold every input event exactly once: nothing lost, nothing
duplicated, although the killed process had produced outputs that were never committed (visible
with read_uncommitted, and counted in the printed line when the kill landed inside a transaction).
Also: the checkpoint store only ever sees committed checkpoints.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from pathlib import Path

from aiokafka import AIOKafkaProducer, TopicPartition

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings
from stream_pairer.stream.checkpoint import Checkpoint

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import (
    OutputReader,
    SidecarProcess,
    expected_identities,
    identities,
    produce,
    summary,
    trickle,
    two_phase_traffic,
)


async def test_kill9_mid_transaction_then_restart_exactly_once(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(3)
    group = f"g-{topic}"
    phase1, phase2 = two_phase_traffic(40, 4, seed=5)
    placed = await produce(bootstrap, topic, phase1)

    victim = SidecarProcess(tmp_path / "victim.log", bootstrap, topic, group, "--exactly-once").start()
    try:
        await victim.wait_ready()
        async with OutputReader(bootstrap, topic) as reader:  # phase 1 committed, 40 calls held
            await reader.until(lambda recs: len(identities(recs)) == len(placed) - 40)

        writer = asyncio.create_task(trickle(bootstrap, topic, phase2, 4, 0.01))
        await asyncio.sleep(0.3)
        victim.kill()  # SIGKILL: transactions left open, outputs produced but never committed
        placed += await writer
    finally:
        victim.close()

    survivor = SidecarProcess(tmp_path / "survivor.log", bootstrap, topic, group, "--exactly-once").start()
    try:
        await survivor.wait_ready()
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed), 60)
            await reader.settle(2.0)
            committed = reader.records
        assert await survivor.terminate(30) == 0
    finally:
        survivor.close()
    async with OutputReader(bootstrap, topic, isolation_level="read_uncommitted") as raw:
        await raw.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed), 30)
        await raw.settle(1.0)
        uncommitted = raw.records

    assert "replaying" in survivor.log_path.read_text()  # the held calls were rebuilt from a checkpoint
    seen = identities(committed)
    assert set(seen) == expected_identities(topic, placed)  # nothing lost
    assert max(seen.values()) == 1, sorted(k for k, v in seen.items() if v > 1)[:10]  # nothing twice
    s = summary(committed)
    assert s["pair"] == len(placed) // 2 and not any(k.startswith("orphan") for k in s), s
    aborted = sum(identities(uncommitted).values()) - sum(seen.values())
    print(f"kill -9 exactly-once: {len(seen)} events once each; {aborted} aborted output members")
    assert aborted >= 0


async def test_checkpoint_store_reads_only_committed_and_newest(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap
    ck_topic = await topic_factory(2, prefix="ck")
    store = CheckpointStore(KafkaSettings(bootstrap), "g", ck_topic)  # template without {topic}: this topic
    store.partitions = {ck_topic: 2}
    other = CheckpointStore(KafkaSettings(bootstrap), "other-group", ck_topic)
    other.partitions = {ck_topic: 2}

    def cp(group: str, partition: int, committed: int) -> Checkpoint:
        return Checkpoint(group, "in", partition, committed, committed, None, ((committed, 0),), "t")

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"t-{uuid.uuid4().hex[:6]}")
    await producer.start()
    try:
        async with producer.transaction():
            for part in (0, 1, 2):
                for committed in (1, 2, 3):
                    dest, key, value = store.record(cp("g", part, committed))
                    await producer.send(dest.topic, value, key=key, partition=dest.partition)
        await producer.begin_transaction()  # a newer checkpoint whose transaction is aborted
        dest, key, value = store.record(cp("g", 0, 99))
        await producer.send(dest.topic, value, key=key, partition=dest.partition)
        await producer.abort_transaction()
        async with producer.transaction():  # 300 checkpoints of another group bury ours
            for n in range(300):
                dest, key, value = other.record(cp("other-group", 0, n))
                await producer.send(dest.topic, value, key=key, partition=dest.partition)
    finally:
        await producer.stop()
    try:
        got = await store.latest([TopicPartition("in", p) for p in (0, 1, 2, 3)])
    finally:
        await store.stop()
    assert {tp.partition: (c.newest.committed if c else None) for tp, c in got.items()} == {
        0: 3,
        1: 3,
        2: 3,
        3: None,
    }
    assert Counter(c.newest.held for c in got.values() if c) == Counter({((3, 0),): 3})
