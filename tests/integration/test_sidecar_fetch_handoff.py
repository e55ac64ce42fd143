"""The next fetch is in flight while a loop turn pairs, on a real broker (issue 25, fetching.py).

What is checked is which requests the consumer has written to the broker connection, never how
fast anything is (speed is bench/latency.py's business):

* right after a `getmany` that drained every buffer, aiokafka has not written the next fetch (its
  fetch task has not run yet), and a turn's synchronous work does not change that: every record
  arriving during a turn waited for the whole turn; after `hand_off` the FetchRequest is out;
* with aiokafka's prefetch_backoff (0.1 s) one partition's unconsumed records keep the fetcher from
  fetching the other partitions of the broker; with `set_prefetch_backoff(consumer, 0)` it fetches
  them; and the sidecar applies `--prefetch-backoff` to its consumer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

import stream_pairer.adapters.kafka.sidecar as sidecar_module
from stream_pairer.adapters.kafka.fetching import (
    caught_up,
    hand_off,
    prefetch_backoff,
    set_prefetch_backoff,
)
from stream_pairer.errors import ConfigError

from .conftest import TopicFactory
from .sidecar_support import OutputReader, config, event, produce, started


def outstanding_fetches(consumer: AIOKafkaConsumer) -> int:
    """FetchRequests written to a broker connection and not answered yet (aiokafka's own books)."""
    conns = consumer._client._conns.values()  # type: ignore[attr-defined]
    written = [type(request).__name__ for conn in conns for _, request, _ in conn._requests]
    return sum(1 for name in written if name.startswith("FetchRequest"))


async def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for p in range(partitions):
            for i in range(per_partition):
                await producer.send(topic, f"{p}-{i}".encode(), partition=p)
        await producer.flush()
    finally:
        await producer.stop()


async def consumer_of(bootstrap: str, topic: str, **kw: Any) -> AIOKafkaConsumer:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-fetch-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **kw,
    )
    await consumer.start()
    return consumer


async def test_caught_up_only_when_a_batch_reaches_the_high_watermark(
    kafka_broker: object, topic_factory: TopicFactory
) -> None:
    """Fetch ahead is for a sidecar that has caught up: a batch that left records behind at the
    broker (a max_records cut) is not caught up, the one that takes the rest is."""
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    topic = await topic_factory(1)
    await fill(bootstrap, topic, 1, 10)
    consumer = await consumer_of(bootstrap, topic)
    try:
        first: dict[TopicPartition, list[Any]] = {}
        while not first:
            first = await consumer.getmany(timeout_ms=5000, max_records=3)
        assert sum(map(len, first.values())) == 3
        assert not caught_up(consumer, first)
        rest: dict[TopicPartition, list[Any]] = {}
        while sum(map(len, rest.values())) < 7:
            for tp, msgs in (await consumer.getmany(timeout_ms=5000)).items():
                rest.setdefault(tp, []).extend(msgs)
        assert caught_up(consumer, rest)
    finally:
        await consumer.stop()


async def test_hand_off_sends_the_fetch_a_drained_getmany_asked_for(
    kafka_broker: object, topic_factory: TopicFactory
) -> None:
    """The sharp version: every buffer drained by one getmany, then a synchronous stretch (a loop
    turn pairing records) with and without `hand_off` before it."""
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    topic = await topic_factory(2)
    consumer = await consumer_of(bootstrap, topic, fetch_max_wait_ms=5000)
    try:
        seen: dict[str, list[int]] = {"plain": [], "hand_off": []}
        for round_ in range(8):
            await fill(bootstrap, topic, 2, 5)
            batch: dict[TopicPartition, list[Any]] = {}
            while sum(map(len, batch.values())) < 10:
                for tp, msgs in (await consumer.getmany(timeout_ms=5000)).items():
                    batch.setdefault(tp, []).extend(msgs)
            # Everything fetched was taken: the fetcher wants to fetch again, and with
            # fetch_max_wait_ms=5 s and no new records the broker holds that request (it stays
            # outstanding), so what is counted below is whether it was written at all.
            kind = "hand_off" if round_ % 2 else "plain"
            if kind == "hand_off":
                await hand_off(consumer)
            time.sleep(0.02)  # noqa: ASYNC251 - the turn's synchronous work: nothing else runs meanwhile
            seen[kind].append(outstanding_fetches(consumer))
            await asyncio.sleep(0.2)  # let the request out in both cases before the next round
        # Of 4 rounds each, 3 at least: a round can differ when the broker answers in pieces and
        # aiokafka's 0.1 s prefetch backoff runs out on a loaded machine (a fetch goes out early),
        # never in every round. Without hand_off (or with one that does nothing) both lists are 0s.
        assert sum(n >= 1 for n in seen["hand_off"]) >= 3, seen
        assert seen["plain"].count(0) >= 3, seen  # what the consume loop did before hand_off
    finally:
        await consumer.stop()


async def test_prefetch_backoff_decides_whether_one_buffered_partition_holds_back_the_others(
    kafka_broker: object, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    topic = await topic_factory(2)
    await fill(bootstrap, topic, 2, 20)
    consumer = await consumer_of(bootstrap, topic)
    try:
        fetcher: Any = consumer._fetcher  # type: ignore[attr-defined]
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        # Partition 0's records fetched and left unconsumed; partition 1 consumed to its end.
        deadline = time.monotonic() + 20
        while tp0 not in fetcher._records and time.monotonic() < deadline:
            await consumer.getmany(tp1, timeout_ms=200)
        assert tp0 in fetcher._records, "partition 0's records were never fetched"
        assignment = consumer._subscription.subscription.assignment  # type: ignore[attr-defined]

        def fetched_partitions() -> set[int]:
            """The partitions the fetch task would ask for now, as it decides between requests
            (no request of its own in flight; put back at once, nothing else runs meanwhile)."""
            in_flight = set(fetcher._in_flight)
            fetcher._in_flight.clear()
            try:
                requests = fetcher._get_actions_per_node(assignment)[0]
            finally:
                fetcher._in_flight.update(in_flight)
            return {p for _, req in requests for _, parts in req.topics for p, *_ in parts}

        # fetcher._records holds partition 0's result: aiokafka's default backoff (0.1 s) is
        # still running for it only if the result is younger; make it so, then ask.
        fetcher._records[tp0]._created = time.monotonic()
        assert prefetch_backoff(consumer) == pytest.approx(0.1)  # aiokafka's own default
        assert fetched_partitions() == set()  # partition 1 held back by partition 0's records

        set_prefetch_backoff(consumer, 0.0)
        fetcher._records[tp0]._backoff = 0.0  # a result fetched after the setting gets it too
        assert prefetch_backoff(consumer) == 0.0
        assert fetched_partitions() == {1}  # partition 1 is fetched; partition 0 still waits
    finally:
        await consumer.stop()


def paired(record: dict[str, Any], cid: str) -> bool:
    return record.get("kind") == "pair" and record["call"]["id"] == cid


async def test_the_sidecar_applies_its_fetch_settings(
    kafka_broker: object, topic_factory: TopicFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--prefetch-backoff` reaches the consumer's fetcher, and `--no-fetch-ahead` decides whether
    the loop hands off after a fetch that returned records (its calls counted, the work unchanged)."""
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    topic = await topic_factory(1)
    calls: list[int] = []

    async def counted(consumer: AIOKafkaConsumer) -> None:
        calls.append(1)
        await hand_off(consumer)

    monkeypatch.setattr(sidecar_module, "hand_off", counted)
    for n, (value, ahead) in enumerate(((0.0, True), (0.03, False))):
        group = f"g-pf-{uuid.uuid4().hex[:8]}"
        cfg = config(bootstrap, topic, group, prefetch_backoff_s=value, fetch_ahead=ahead)
        sidecar = await started(cfg)
        try:
            consumer = sidecar._consumer
            assert consumer is not None
            assert prefetch_backoff(consumer) == value
            calls.clear()
            conv, cid = f"c{n}", f"id{n}"
            call, result = event(conv, "tool_call", cid), event(conv, "tool_result", cid)
            await produce(bootstrap, topic, [(conv.encode(), call), (conv.encode(), result)])
            async with OutputReader(bootstrap, topic) as reader:
                await reader.until(lambda recs, cid=cid: any(paired(r, cid) for r in recs))
            assert (len(calls) > 0) is ahead, calls
        finally:
            assert await sidecar.stop()


async def test_set_prefetch_backoff_on_a_consumer_not_started_says_so(kafka_broker: object) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="no fetcher"):
        set_prefetch_backoff(consumer, 0.0)
