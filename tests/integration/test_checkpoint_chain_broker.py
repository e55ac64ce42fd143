"""Delta checkpoints on a real broker: the store reads back a snapshot and the deltas after it
(read_committed: an aborted transaction's delta is invisible, and a delta built on it is not
applied), skips an older epoch's leftovers and other partitions' records, and resolves the state
the committed offset names."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaProducer, TopicPartition

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings
from stream_pairer.stream.checkpoint import Checkpoint

from .conftest import KafkaBroker, TopicFactory


def snapshot(partition: int, token: str, committed: int, held: tuple[tuple[int, int], ...]) -> Checkpoint:
    return Checkpoint("g", "in", partition, committed, committed, None, held, token)


def delta(prev: Checkpoint, epoch: str, seq: int, token: str, add: int, drop: int) -> Checkpoint:
    return Checkpoint(
        "g", "in", prev.partition, prev.committed + 1, prev.committed + 1, None, ((add, 0),), token,
        epoch=epoch, seq=seq, prev=prev.token, released=((drop, 0),),
    )  # fmt: skip


async def test_the_store_reads_back_the_committed_chain(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap
    ck_topic = await topic_factory(1, prefix="ckchain")
    store = CheckpointStore(KafkaSettings(bootstrap), "g", ck_topic)
    store.partitions = {ck_topic: 1}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"t-{uuid.uuid4().hex[:6]}")
    await producer.start()

    async def write(*cps: Checkpoint, abort: bool = False) -> None:
        await producer.begin_transaction()
        for cp in cps:
            dest, key, value = store.record(cp)
            await producer.send(dest.topic, value, key=key, partition=dest.partition)
        if abort:
            await producer.abort_transaction()
        else:
            await producer.commit_transaction()

    try:
        old = snapshot(0, "e0", 1, ((1, 0),))
        old1 = delta(old, "e0", 1, "o1", 2, 1)
        old2 = delta(old1, "e0", 2, "o2", 3, 2)
        await write(old, old1, old2)  # an older epoch: its slot 2 stays as a leftover
        s = snapshot(0, "e1", 10, ((10, 0), (11, 0)))
        d1 = delta(s, "e1", 1, "d1", 12, 10)
        # Another input partition's record in the same checkpoint partition, between them.
        await write(s, d1, snapshot(1, "p1", 5, ((5, 0),)))
        d2 = delta(d1, "e1", 2, "d2", 13, 11)
        await write(d2, abort=True)  # an aborted transaction: invisible
        d3 = delta(d2, "e1", 3, "d3", 14, 12)
        await write(d3)  # built on the aborted one: must not be applied
        for n in range(100):  # bury the chain under the other partition's records (windows grow)
            await write(snapshot(1, f"p{n}", 5 + n, ((5 + n, 0),)))
    finally:
        await producer.stop()
    try:
        got = await store.latest([TopicPartition("in", 0), TopicPartition("in", 1), TopicPartition("in", 2)])
    finally:
        await store.stop()
    chain = got[TopicPartition("in", 0)]
    assert chain is not None and chain.snapshot.token == "e1" and [d.token for d in chain.deltas] == ["d1"]
    state = chain.find(11, "sp1:d1")
    assert state is not None and state.held == ((11, 0), (12, 0)) and state.token == "d1"
    assert chain.find(13, "sp1:d3") is None  # the commit names a state that cannot be assembled
    other = got[TopicPartition("in", 1)]
    assert other is not None and other.newest.token == "p99" and got[TopicPartition("in", 2)] is None
