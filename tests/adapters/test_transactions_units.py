"""Broker-free rules of exactly-once delivery (transactions.py), against a recording producer.

What a real broker does with the transactions (fencing, read_committed, kill -9 mid-transaction) is
proved in tests/integration/test_sidecar_eos.py and the fault trials; these pin the order of the
calls those guarantees rest on: outputs held until the commit and sent as one batch per output
partition, the transaction committed only after every send of it is acknowledged, aborted otherwise.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings
from stream_pairer.adapters.kafka.transactions import ExactlyOnce
from stream_pairer.core.model import OutputMeta
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.partition import Emitted

META = OutputMeta("pair", "id", None, "t", None, None, 1.0)


class RecordingProducer:
    """The transactional producer calls ExactlyOnce makes, in order; `refuse` fails output batches."""

    def __init__(self, refuse: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.refuse = refuse
        self.offset = 0

    def _answer(self, topic: str, partition: int, n: int, ok: bool) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if ok:
            fut.set_result(RecordMetadata(topic, partition, None, self.offset, -1, -1, 0))
            self.offset += n
        else:
            fut.set_exception(RuntimeError("refused"))
        return fut

    async def begin_transaction(self) -> None:
        self.calls.append(("begin",))

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(1 << 20, 0, is_transactional=True)

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2, 3}

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        n = builder.record_count()
        self.calls.append(("batch", topic, partition, n))
        return self._answer(topic, partition, n, not self.refuse)

    async def send(self, topic: str, value: bytes, key: bytes | None = None, partition: int = 0) -> Any:
        self.calls.append(("checkpoint", topic))
        return self._answer(topic, partition, 1, True)

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, Any], group: str) -> None:
        self.calls.append(("offsets", {tp.partition: o.offset for tp, o in offsets.items()}))

    async def commit_transaction(self) -> None:
        self.calls.append(("commit",))

    async def abort_transaction(self) -> None:
        self.calls.append(("abort",))

    async def stop(self) -> None:
        self.calls.append(("stop",))


def delivery(producer: RecordingProducer, tp: TopicPartition) -> ExactlyOnce:
    settings = KafkaSettings("127.0.0.1:9")
    store = CheckpointStore(settings, "g", "{topic}.cp")
    d = ExactlyOnce(settings, "g", store, Metrics(), "sp")
    d._producers[tp] = producer
    return d


def outputs(n: int, first: int = 0) -> list[Emitted]:
    record = b'{"kind":"pair"}'
    return [Emitted("in.pairs", f"conv-{i % 8}".encode(), record, META) for i in range(first, first + n)]


def checkpoint(tp: TopicPartition, committed: int) -> Checkpoint:
    return Checkpoint("g", tp.topic, tp.partition, committed, committed - 1, None, (), "tok")


async def test_outputs_are_held_until_the_commit_and_sent_as_one_batch_per_output_partition() -> None:
    tp = TopicPartition("in", 0)
    producer = RecordingProducer()
    d = delivery(producer, tp)
    for turn in range(5):  # five fetches' outputs in one transaction
        await d.send(tp, outputs(40, 40 * turn), arrival=None)
    assert producer.calls == [("begin",)]  # nothing handed to the client before the commit
    assert d.held(tp) == 200

    failed = await d.commit(None, {tp: checkpoint(tp, 200)})

    assert failed == {}
    batches = [c for c in producer.calls if c[0] == "batch"]
    assert len(batches) == len({(c[1], c[2]) for c in batches})  # one batch per output partition
    assert sum(c[3] for c in batches) == 200  # every output, once
    assert producer.calls[-1] == ("commit",)  # after the outputs, the checkpoint and the offsets
    assert {c[0] for c in producer.calls[:-1]} == {"begin", "batch", "checkpoint", "offsets"}
    assert ("offsets", {0: 200}) in producer.calls
    assert d.held(tp) == 0 and d.unacked() == 0


async def test_a_refused_output_aborts_the_transaction_instead_of_committing_it() -> None:
    tp = TopicPartition("in", 1)
    producer = RecordingProducer(refuse=True)
    d = delivery(producer, tp)
    await d.send(tp, outputs(10), arrival=None)

    failed = await d.commit(None, {tp: checkpoint(tp, 10)})

    assert set(failed) == {tp}
    assert ("commit",) not in producer.calls
    assert producer.calls[-1] == ("abort",)


async def test_closing_a_partition_drops_its_held_outputs_unsent() -> None:
    tp, other = TopicPartition("in", 2), TopicPartition("in", 3)
    producer, producer2 = RecordingProducer(), RecordingProducer()
    d = delivery(producer, tp)
    d._producers[other] = producer2
    await d.send(tp, outputs(10), arrival=None)
    await d.send(other, outputs(7), arrival=None)

    await d.close_partition(tp)  # rebuilt by replay: its outputs are produced again by the rebuild

    assert not [c for c in producer.calls if c[0] == "batch"]
    assert producer.calls[-2:] == [("abort",), ("stop",)]
    assert d.held(tp) == 0 and d.held(other) == 7  # the other partition's transaction is untouched


async def test_answers_of_two_producers_out_of_offset_order_are_not_a_recreated_topic() -> None:
    """Each input partition's producer writes to the same output partitions; their answers come in
    any order. Before, an answer overtaken by another producer's read as a re-created output topic,
    and every exactly-once run rebuilt all its partitions (issue 15)."""
    tp0, tp1 = TopicPartition("in", 0), TopicPartition("in", 1)
    d = delivery(RecordingProducer(), tp0)
    d._track(tp1).on_ack(RecordMetadata("in.pairs", 0, None, 150, -1, -1, 0), 50)  # 150..199
    d._track(tp0).on_ack(RecordMetadata("in.pairs", 0, None, 100, -1, -1, 0), 50)  # 100..149, later
    assert d.recreated == set()
    d._track(tp0).on_ack(RecordMetadata("in.pairs", 0, None, 0, -1, -1, 0), 10)  # its own went back
    assert d.recreated == {"in.pairs"}
