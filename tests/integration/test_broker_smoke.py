"""The broker tooling itself works: aiokafka can produce, consume and run transactions against the real
Kafka that `scripts/kafka_broker.py` starts, and a broker that goes away comes back on the same port
with its data. If these fail, every other integration test's verdict is meaningless."""

from __future__ import annotations

import asyncio
import socket
from collections import defaultdict

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from .conftest import BrokerFactory, KafkaBroker, TopicFactory, check_transactions, read_all


async def test_produce_consume_round_trip(kafka_broker: KafkaBroker, topic_factory: TopicFactory) -> None:
    topic = await topic_factory(3)
    bootstrap = kafka_broker.bootstrap
    sent = [(f"conv-{i % 7}".encode(), f"event-{i}".encode()) for i in range(40)]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, value in sent:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}", auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        records = await read_all(consumer, len(sent))
    finally:
        await consumer.stop()

    assert sorted((r.key, r.value) for r in records) == sorted(sent)  # all of them, each once
    partitions_per_key: dict[bytes, set[int]] = defaultdict(set)
    for r in records:
        partitions_per_key[r.key].add(r.partition)
    assert all(len(p) == 1 for p in partitions_per_key.values())  # a key lives on one partition
    assert len({r.partition for r in records}) > 1  # ... and the topic really has several
    for key in partitions_per_key:  # order within a key is the send order
        assert [r.value for r in records if r.key == key] == [v for k, v in sent if k == key]


async def test_transaction_commit_and_abort(kafka_broker: KafkaBroker, topic_factory: TopicFactory) -> None:
    topic = await topic_factory(1)
    await check_transactions(kafka_broker.bootstrap, topic)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def _read_from_start(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        return [r.value for r in await read_all(consumer, expected)]
    finally:
        await consumer.stop()


async def test_broker_stop_kill_restart_keeps_port_and_data(
    broker_factory: BrokerFactory, topic_factory: TopicFactory
) -> None:
    broker = broker_factory()
    port = broker.port
    topic = await topic_factory(1, bootstrap=broker.bootstrap)
    await _produce(broker.bootstrap, topic, [b"before-stop-0", b"before-stop-1"])

    await asyncio.to_thread(broker.stop)  # graceful SIGTERM
    assert not _port_open(port)
    await asyncio.to_thread(broker.start)
    assert broker.port == port and _port_open(port)
    await _produce(broker.bootstrap, topic, [b"after-restart"])

    await asyncio.to_thread(broker.kill)  # SIGKILL: a crash, no clean shutdown
    assert not _port_open(port)
    await asyncio.to_thread(broker.start)
    assert broker.port == port

    values = await _read_from_start(broker.bootstrap, topic, 3)
    assert values == [b"before-stop-0", b"before-stop-1", b"after-restart"]
