"""The commit beside the consume loop (committer.py, issue 25), without a broker.

What these pin: a slow commit does not hold up the loop (the next fetch, the next outputs), only one
commit runs at a time per lane (exactly-once: per partition, independently of the others), and a
commit waits for exactly the outputs of the records its checkpoint covers: it never commits an
offset before they are acknowledged, and the outputs sent while it runs are neither waited for nor
vouched for by it (their failure still rebuilds the partition).
What a real broker does with it (conservation after kill -9, readiness, lag) is proved by the
integration tests and the fault trials.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings
from stream_pairer.adapters.kafka.committer import BackgroundCommit, Begun, Failures
from stream_pairer.adapters.kafka.delivery import AtLeastOnce
from stream_pairer.adapters.kafka.transactions import ExactlyOnce
from stream_pairer.core.model import OutputMeta
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.partition import Emitted

META = OutputMeta("pair", "id", None, "t", None, None, 1.0)
TP = TopicPartition("in", 0)


def checkpoint(committed: int) -> Checkpoint:
    return Checkpoint("g", TP.topic, TP.partition, committed, committed - 1, None, (), "tok")


def outputs(n: int) -> list[Emitted]:
    return [Emitted("in.pairs", f"c{i}".encode(), b'{"kind":"pair"}', META) for i in range(n)]


class HeldProducer:
    """A producer whose output batches are answered only when the test says so (`answer`)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, asyncio.Future[Any]]] = []  # (records, answer)
        self.calls: list[tuple[Any, ...]] = []
        self.offset = 0

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(2048, 0, is_transactional=False)  # small: 300 outputs fill several

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.batches.append((builder.record_count(), fut))
        self.calls.append(("batch", builder.record_count()))
        return fut

    def answer(self, i: int, error: BaseException | None = None) -> None:
        n, fut = self.batches[i]
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(RecordMetadata("in.pairs", 0, None, self.offset, -1, -1, 0))
            self.offset += n

    async def send(self, topic: str, value: bytes, key: bytes | None = None, partition: int = 0) -> Any:
        self.calls.append(("checkpoint",))
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(RecordMetadata(topic, partition, None, 0, -1, -1, 0))
        return fut

    async def begin_transaction(self) -> None:
        self.calls.append(("begin",))

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, Any], group: str) -> None:
        self.calls.append(("offsets", offsets[TP].offset))

    async def commit_transaction(self) -> None:
        self.calls.append(("commit",))

    async def abort_transaction(self) -> None:
        self.calls.append(("abort",))


class Consumer:
    def __init__(self) -> None:
        self.commits: list[int] = []

    async def commit(self, offsets: dict[TopicPartition, Any]) -> None:
        self.commits.append(offsets[TP].offset)


def settings() -> tuple[KafkaSettings, CheckpointStore]:
    s = KafkaSettings("127.0.0.1:9")
    return s, CheckpointStore(s, "g", "{topic}.cp")


async def turn() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_slow_commit_runs_beside_the_loop_one_at_a_time() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    async def slow_finish() -> Failures:
        await release.wait()  # a commit that takes as long as the broker does
        finished.append("commit")
        return {}

    bg = BackgroundCommit(0.1, now_s=0.0)
    assert not bg.due(0.05) and bg.due(0.1)
    bg.start(Begun({TP: checkpoint(10)}, {}, started_s=0.1), slow_finish())
    loop_turns = 0
    for _ in range(20):  # the loop goes on fetching and producing meanwhile
        await turn()
        loop_turns += 1
        assert not bg.due(10.0)  # never a second commit while one is in flight
    assert loop_turns == 20 and bg.busy and not bg.finished() and finished == []
    assert bg.partitions() == {TP}
    release.set()
    await turn()
    assert bg.finished()
    [(begun, failed)] = await bg.take()
    assert failed == {} and begun.todo[TP].committed == 10
    assert not bg.busy and bg.partitions() == set()
    assert not bg.due(0.19) and bg.due(0.2)  # the interval counts from when the last one began


async def test_lanes_commit_independently_and_in_order_within_each() -> None:
    """Exactly-once: each partition is a lane; a slow transaction holds back only its own."""
    other = TopicPartition("in", 1)
    slow, fast = asyncio.Event(), asyncio.Event()

    async def finish(gate: asyncio.Event) -> Failures:
        await gate.wait()
        return {}

    bg = BackgroundCommit(0.05, now_s=0.0)
    bg.start(Begun({TP: checkpoint(1)}, {}, started_s=0.05), finish(slow), TP)
    assert not bg.due(1.0, TP) and bg.due(0.05, other)  # the other lane is free
    bg.start(Begun({other: checkpoint(1)}, {}, started_s=0.05), finish(fast), other)
    fast.set()
    await turn()
    [(begun, _)] = await bg.take(ended_only=True)  # the ended one only; the slow one stays
    assert set(begun.todo) == {other} and bg.busy and bg.partitions() == {TP}
    assert bg.due(0.1, other) and not bg.due(10.0, TP)
    ended = bg.all_ended()
    assert not ended.done()
    slow.set()
    await asyncio.wait_for(ended, 1.0)
    [(begun, _)] = await bg.take()
    assert set(begun.todo) == {TP} and not bg.busy


async def test_a_commit_error_is_raised_where_the_outcome_is_taken() -> None:
    async def broken() -> Failures:
        raise RuntimeError("coordinator gone")

    bg = BackgroundCommit(0.0, now_s=0.0)
    bg.start(Begun({TP: checkpoint(1)}, {}), broken())
    await turn()
    try:
        await bg.take()
    except RuntimeError as err:
        assert "coordinator" in str(err)
    else:
        raise AssertionError("the error of the commit was lost")
    assert not bg.busy  # the lane is free: the session decides what happens next


async def test_at_least_once_commit_waits_for_its_own_outputs_only_and_never_commits_before_them() -> None:
    s, store = settings()
    d = AtLeastOnce(s, "g", store, Metrics())
    producer = d._producer = HeldProducer()  # type: ignore[assignment]
    consumer = Consumer()
    await d.send(TP, outputs(10), arrival=None)  # the records up to offset 10
    await d.begin_commit({TP: checkpoint(10)})  # in the loop: handed to the client, set apart
    finish = asyncio.ensure_future(d.finish_commit(consumer, {TP: checkpoint(10)}))  # type: ignore[arg-type]

    await d.send(TP, outputs(5), arrival=None)  # the loop goes on: the next fetch's outputs
    await d.flush()
    await turn()
    assert consumer.commits == [] and not finish.done()  # nothing acknowledged: no offset
    assert d.unacked() == 2  # both batches count for readiness

    producer.answer(0)  # the commit's own outputs are acknowledged; the later batch is not
    failed = await asyncio.wait_for(finish, 1.0)
    assert failed == {} and consumer.commits == [10]
    assert d.unacked() == 1

    producer.answer(1, RuntimeError("refused"))  # the later batch fails after the commit ended
    await turn()
    assert TP in d.refused()  # still tracked: the partition is rebuilt, not silently committed past


async def test_at_least_once_commit_fails_when_its_outputs_are_refused() -> None:
    s, store = settings()
    d = AtLeastOnce(s, "g", store, Metrics())
    producer = d._producer = HeldProducer()  # type: ignore[assignment]
    consumer = Consumer()
    await d.send(TP, outputs(3), arrival=None)
    await d.begin_commit({TP: checkpoint(3)})
    finish = asyncio.ensure_future(d.finish_commit(consumer, {TP: checkpoint(3)}))  # type: ignore[arg-type]
    await turn()
    producer.answer(0, RuntimeError("refused"))
    failed = await asyncio.wait_for(finish, 1.0)
    assert set(failed) == {TP} and consumer.commits == []  # the offset stays


async def test_exactly_once_outputs_emitted_during_a_commit_wait_for_the_next_transaction() -> None:
    s, store = settings()
    d = ExactlyOnce(s, "g", store, Metrics(), "sp")
    producer = HeldProducer()
    d._producers[TP] = producer  # type: ignore[assignment]
    await d.send(TP, outputs(4), arrival=None)
    await d.begin_commit({TP: checkpoint(4)})
    finish = asyncio.ensure_future(d.finish_commit(None, {TP: checkpoint(4)}))  # type: ignore[arg-type]
    await turn()
    await d.send(TP, outputs(300), arrival=None)  # emitted meanwhile: several full batches
    assert d.held(TP) == 300
    assert [c for c in producer.calls if c[0] == "batch"] == [("batch", 4)]  # none joined this one
    producer.answer(0)
    assert await asyncio.wait_for(finish, 1.0) == {}
    assert producer.calls[-1] == ("commit",) and ("offsets", 4) in producer.calls

    await d.begin_commit({TP: checkpoint(304)})  # the next transaction takes the deferred outputs
    finish = asyncio.ensure_future(d.finish_commit(None, {TP: checkpoint(304)}))  # type: ignore[arg-type]
    await turn()
    later = [c for c in producer.calls[producer.calls.index(("commit",)) :] if c[0] == "batch"]
    assert sum(c[1] for c in later) == 300 and d.held(TP) == 0
    for i in range(1, len(producer.batches)):
        producer.answer(i)
    assert await asyncio.wait_for(finish, 1.0) == {}
    assert producer.calls[-1] == ("commit",) and ("offsets", 304) in producer.calls
