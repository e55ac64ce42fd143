"""Compatibility row: aiokafka 0.14 against an Apache Kafka 4.x broker (KRaft only, log4j2, the old
protocol versions removed by KIP-896, the new group coordinator and transactions v2 on by default).

The default broker of the other tests is 3.9; this module starts a 4.x one and checks the two things
the sidecar leans on hardest: classic consumer-group membership (join, assignment, heartbeats beyond
the session timeout, offset commit) and transactions read back with read_committed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from .conftest import KafkaBroker, TopicFactory, check_transactions, kb, read_all, start_broker

SESSION_TIMEOUT_MS = 6000  # the broker's group.min.session.timeout.ms: the shortest a client may ask


class CountingListener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Counts assignments: a member that lost its session would be re-assigned after rejoining."""

    def __init__(self) -> None:
        self.assignments: list[set[TopicPartition]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assignments.append(set(assigned))


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = start_broker(tmp_path_factory.mktemp("kafka4"), kb.KAFKA4_VERSION)
    yield broker
    broker.close()


def test_broker_is_really_kafka4(kafka4: KafkaBroker) -> None:
    assert kafka4.version.startswith("4.")
    assert (kb.resolve(kafka4.version) / f"kafka_2.13-{kafka4.version}.jar").exists()


async def test_consumer_group_join_heartbeat_commit(kafka4: KafkaBroker, topic_factory: TopicFactory) -> None:
    topic = await topic_factory(2, bootstrap=kafka4.bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    listener = CountingListener()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka4.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=500,
    )
    consumer.subscribe([topic], listener=listener)
    await consumer.start()
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka4.bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(20):
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=200)
        assigned = consumer.assignment()
        assert assigned == {TopicPartition(topic, 0), TopicPartition(topic, 1)}

        producer = AIOKafkaProducer(bootstrap_servers=kafka4.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(4):
                await producer.send_and_wait(topic, f"m{i}".encode(), partition=i % 2)
        finally:
            await producer.stop()
        got = await read_all(consumer, 4)
        assert sorted(r.value for r in got) == [b"m0", b"m1", b"m2", b"m3"]

        # Stay in the group past the session timeout: only accepted heartbeats keep the membership.
        loop = asyncio.get_running_loop()
        until = loop.time() + SESSION_TIMEOUT_MS / 1000 + 1.5
        while loop.time() < until:
            assert not await consumer.getmany(timeout_ms=300)  # nothing new, nothing replayed
        assert consumer.assignment() == assigned
        assert listener.assignments == [assigned]  # joined once, never kicked out and re-joined

        (described,) = await admin.describe_consumer_groups([group])
        (desc_group,) = described.groups
        assert desc_group[2] == "Stable"  # (error_code, group_id, state, protocol_type, ...)
        assert len(desc_group[5]) == 1  # exactly our one member

        await consumer.commit()
        for tp in assigned:
            assert await consumer.committed(tp) == 2
    finally:
        await admin.close()
        await consumer.stop()


async def test_transactions_read_committed(kafka4: KafkaBroker, topic_factory: TopicFactory) -> None:
    topic = await topic_factory(1, bootstrap=kafka4.bootstrap)
    await check_transactions(kafka4.bootstrap, topic)
