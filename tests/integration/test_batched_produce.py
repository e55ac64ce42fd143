"""Batched produce (issue 15) against the real broker: the sidecar picks each output's partition
itself and sends one batch per output topic-partition, so keys must land exactly where the client's
own `producer.send(key=...)` puts them, on each topic's own partition count, in order, each once."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from prometheus_client import CollectorRegistry

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings
from stream_pairer.adapters.kafka.delivery import AtLeastOnce
from stream_pairer.core.model import output_meta
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.partition import Emitted

from .conftest import KafkaBroker, TopicFactory, read_all


def _emitted(topic: str, key: bytes | None, rec: dict[str, Any]) -> Emitted:
    """An output as the core hands it over: the encoded record and what the metrics count of it."""
    return Emitted(topic, key, orjson.dumps(rec), output_meta(rec))


async def _read(bootstrap: str, topic: str, expected: int) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        return await read_all(consumer, expected)
    finally:
        await consumer.stop()


async def test_batched_outputs_land_on_the_partitions_send_with_a_key_chooses(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap
    pairs, orphans = await topic_factory(3), await topic_factory(5)
    twin_pairs, twin_orphans = await topic_factory(3), await topic_factory(5)
    # 16 KiB producer batches and ~2 KB records: batches fill and are sent mid-call.
    settings = KafkaSettings(bootstrap, max_batch_bytes=16 * 1024)
    metrics = Metrics(CollectorRegistry())
    delivery = AtLeastOnce(settings, "g", CheckpointStore(settings, "g", "{topic}.cp"), metrics)
    delivery.set_limits({pairs: 1_000_000, orphans: 1_000_000})
    items: list[Emitted] = []
    for i in range(600):
        conv = f"conversation-{i % 61}-{'x' * (i % 9)}"
        if i % 10 == 9:  # keyless: a dead letter of keyless input
            items.append(_emitted(orphans, None, {"kind": "dead_letter", "reason": "invalid_json", "seq": i}))
        elif i % 3:
            rec = {"kind": "pair", "match": "id", "fifo_by": None, "conversation_id": conv, "seq": i,
                   "tool": "search", "latency_ms": 12.0, "pad": "p" * 2000}  # fmt: skip
            items.append(_emitted(pairs, conv.encode(), rec))
        else:
            rec = {"kind": "orphan_call", "reason": "timeout", "conversation_id": conv, "seq": i}
            items.append(_emitted(orphans, conv.encode(), rec))
    tp0, tp1 = TopicPartition("input", 0), TopicPartition("input", 1)
    await delivery.start()
    try:
        # One fetch: two input partitions' outputs share the open batches, sent by one flush.
        await delivery.send(tp0, items[:250], time.monotonic())
        await delivery.send(tp1, items[250:], None)
        await delivery.flush()
        p0, p1 = delivery._pending[tp0], delivery._pending[tp1]
        await asyncio.gather(*p0.futures, *p1.futures)
        assert p0.error is None and p1.error is None
        assert delivery.unacked() == 0 and delivery.oldest_unacked_s() == 0.0
        futures = {id(f) for f in p0.futures} | {id(f) for f in p1.futures}
        assert len(futures) < len(items) / 5  # batches, not a future per record ...
        assert len(futures) > 3 + 5  # ... and full batches were sent and new ones started
        assert {id(f) for f in p0.futures} & {id(f) for f in p1.futures}  # shared batches
        delivery._observe(p0)
        delivery._observe(p1)
    finally:
        await delivery.stop()
    twin = {pairs: twin_pairs, orphans: twin_orphans}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for it in items:
            if it.key is not None:
                await producer.send(twin[it.topic], b"", key=it.key)
        await producer.flush()
    finally:
        await producer.stop()

    for topic in (pairs, orphans):
        expected = [it for it in items if it.topic == topic]
        got = await _read(bootstrap, topic, len(expected))
        seqs = [orjson.loads(r.value)["seq"] for r in got]
        assert sorted(seqs) == [i for i, it in enumerate(items) if it.topic == topic]
        assert len(set(seqs)) == len(seqs)  # each once
        ours: dict[bytes, set[int]] = defaultdict(set)
        order: dict[bytes, list[int]] = defaultdict(list)
        for r in got:
            if r.key is not None:
                ours[r.key].add(r.partition)
                order[r.key].append(orjson.loads(r.value)["seq"])
        theirs: dict[bytes, set[int]] = defaultdict(set)
        for r in await _read(bootstrap, twin[topic], sum(1 for it in expected if it.key is not None)):
            theirs[r.key].add(r.partition)
        assert ours == theirs  # every key on the partition the client's partitioner picks
        assert all(len(p) == 1 for p in ours.values())
        assert len({p for ps in ours.values() for p in ps}) == (3 if topic == pairs else 5)
        for key, seq in order.items():  # per key, the order of the sends
            assert seq == sorted(seq), key
    assert metrics.registry.get_sample_value(
        "stream_pairer_pairs_total", {"match": "id", "fifo_by": "none"}
    ) == sum(1 for it in items if it.topic == pairs)
    assert metrics.registry.get_sample_value("stream_pairer_emit_latency_seconds_count") == 250
