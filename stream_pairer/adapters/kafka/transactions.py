"""Exactly-once delivery: outputs, the replay checkpoint and the consumer offset in one transaction.

One *transactional* producer per assigned input partition, transactional id
`<prefix>.<group>.<topic>.<partition>`. aiokafka 0.14 commits transactional offsets with
TxnOffsetCommit v0, which carries no consumer-group generation (no KIP-447 fencing), so the only
zombie fencing available is the transactional id; one per input partition (Kafka Streams' original
EOS design) means the next owner of a partition fences the previous one and aborts its open
transaction the moment it starts, whichever instance it runs on.

Why the outputs of a transaction are held until its commit (issue 15): a read_committed reader
sees none of them before the commit anyway, so sending them earlier buys no latency, and it costs
a lot. Each partition has its own producer, so the batches of one fetch cannot be shared across
input partitions as at-least-once shares them: every fetch made one small batch per output
partition per producer, and aiokafka queues a second batch for a partition only once the first
has been drained, which inside a transaction waits for AddPartitionsToTxn (and for the previous
transaction's markers): the consume loop stalled in `send_batch`. Held until the commit, each
transaction sends one batch per output partition (a full one goes out at once), all in one produce
request per producer, and the checkpoint and the offsets are added to the transaction while those
batches travel, so a commit costs about four round trips (AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn) instead of those plus a stall per fetch. The guarantees are unchanged:
the transaction commits only once every send of it is acknowledged, and any failure aborts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings, make_producer, tp_key
from stream_pairer.adapters.kafka.delivery import Delivery, _failure, _Open
from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.errors import SidecarError
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.partition import Emitted

log = logging.getLogger("stream_pairer.kafka")


class ExactlyOnce(Delivery):
    """A transactional producer per input partition: outputs, checkpoint and offset in one transaction."""

    def __init__(
        self, settings: KafkaSettings, group: str, checkpoints: CheckpointStore, metrics: Metrics, prefix: str
    ) -> None:
        super().__init__(settings, group, checkpoints, metrics)
        self.prefix = prefix
        self._producers: dict[TopicPartition, AIOKafkaProducer] = {}
        self._in_txn: set[TopicPartition] = set()
        # Per input partition, the batches of its open transaction not sent yet (sent by its commit,
        # or as soon as one is full): one batch per output partition per transaction.
        self._held: dict[TopicPartition, dict[tuple[str, int], _Open]] = {}
        # Partitions whose transaction is being committed beside the consume loop (committer.py),
        # and the outputs emitted meanwhile: they belong to the next transaction, so they wait here
        # (not even a full batch may go out: it would join the transaction being committed, whose
        # offset does not cover them, and a replay after a crash would write them twice).
        self._committing_txn: set[TopicPartition] = set()
        self._deferred: dict[TopicPartition, list[tuple[list[Emitted], float | None]]] = {}
        self._unheld: dict[TopicPartition, Exception] = {}  # deferred outputs that could not join

    def transactional_id(self, tp: TopicPartition) -> str:
        return f"{self.prefix}.{self.group}.{tp.topic}.{tp.partition}"

    def held(self, tp: TopicPartition) -> int:
        """Outputs of the partition's open transaction not handed to the client yet."""
        held: int = sum(b.builder.record_count() for b in self._held.get(tp, {}).values())
        return held + sum(len(items) for items, _ in self._deferred.get(tp, ()))

    def _producer_of(self, tp: TopicPartition) -> Any:
        return tp  # each input partition has its own producer

    async def stop(self) -> None:
        for tp in list(self._producers):
            await self.close_partition(tp)

    async def open_partition(self, tp: TopicPartition) -> None:
        if tp in self._producers:
            return
        producer = make_producer(self.settings, self.transactional_id(tp))
        try:
            await producer.start()  # InitProducerId: fences the previous owner, aborts its open transaction
        except Exception as err:
            await producer.stop()
            raise classify(err, during=f"start the transactional producer of {tp_key(tp)}") from err
        self._producers[tp] = producer

    async def close_partition(self, tp: TopicPartition) -> None:
        await super().close_partition(tp)
        self._held.pop(tp, None)  # never sent: the partition's rebuild produces them again
        self._deferred.pop(tp, None)
        self._unheld.pop(tp, None)
        self._committing_txn.discard(tp)
        producer = self._producers.pop(tp, None)
        if producer is None:
            return
        if tp in self._in_txn:
            self._in_txn.discard(tp)
            with contextlib.suppress(Exception):
                await producer.abort_transaction()
        with contextlib.suppress(Exception):
            await producer.stop()

    async def _begin(self, tp: TopicPartition) -> AIOKafkaProducer:
        producer = self._producers[tp]
        if tp not in self._in_txn:
            await producer.begin_transaction()
            self._in_txn.add(tp)
        return producer

    async def send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        """Add the outputs to the partition's held batches (a full batch is sent at once)."""
        if not items:
            return
        if tp in self._committing_txn:
            self._deferred.setdefault(tp, []).append((items, arrival))
            return
        try:
            await self._hold(tp, items, arrival)
        except Exception as err:
            self.metrics.observe_produce_error()
            raise _failure(err, f"deliver {tp_key(tp)}") from err

    async def _hold(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        """Into the open transaction: first what was deferred while the last one committed."""
        producer = await self._begin(tp)
        held = self._held.get(tp)
        if held is None:
            held = self._held[tp] = {}
        for earlier, when in self._deferred.pop(tp, ()):
            await self._append(producer, tp, earlier, when, held)
        if items:
            await self._append(producer, tp, items, arrival, held)

    async def begin_commit(self, commits: dict[TopicPartition, Checkpoint]) -> None:
        """Deferred outputs join the transaction about to commit (its checkpoint covers them); from
        now until it ends, new outputs of these partitions are deferred."""
        for tp in commits:
            if tp in self._deferred:
                try:
                    await self._hold(tp, [], None)
                except Exception as err:  # outputs its checkpoint covers are missing: it must fail
                    self._unheld[tp] = err
            self._committing_txn.add(tp)

    async def finish_commit(
        self, consumer: AIOKafkaConsumer, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        try:
            return await self._commit_all(commits)
        finally:
            self._committing_txn.difference_update(commits)

    async def _commit_all(
        self, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        failed: dict[TopicPartition, SidecarError] = {}

        async def one(tp: TopicPartition, cp: Checkpoint) -> None:
            try:
                unheld = self._unheld.pop(tp, None)
                if unheld is not None:
                    raise unheld
                producer = await self._begin(tp)
                await self._ship_all(producer, self._held.pop(tp, {}))
                dest, key, value = self.checkpoints.record(cp)
                checkpoint = await producer.send(dest.topic, value, key=key, partition=dest.partition)
                offsets = producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(cp.committed, cp.metadata)}, self.group
                )
                pending = self._pending.get(tp)
                sends: list[Any] = list(pending.futures) if pending is not None else []
                # Every send and the offsets answered (in parallel) before deciding: a failed send
                # aborts the transaction, it never commits past an unacknowledged output.
                results = await asyncio.gather(offsets, checkpoint, *sends, return_exceptions=True)
                for result in results:
                    if isinstance(result, BaseException):
                        raise result
                await producer.commit_transaction()
                self._in_txn.discard(tp)
            except Exception as err:
                self.metrics.observe_commit_error()
                failed[tp] = _failure(err, f"commit the transaction of {tp_key(tp)}")
                self._pending.pop(tp, None)
                self._held.pop(tp, None)
                await self._abort(tp)
                return
            self._observe(self._pending.pop(tp, None))

        await asyncio.gather(*(one(tp, cp) for tp, cp in commits.items()))
        return failed

    async def _abort(self, tp: TopicPartition) -> None:
        """After a failed commit: abort (when the producer still can), so the next batch starts clean."""
        producer = self._producers.get(tp)
        if producer is None or tp not in self._in_txn:
            return
        try:
            await producer.abort_transaction()
            self._in_txn.discard(tp)
        except Exception as err:  # fenced or fatal: this producer is done; the sidecar reopens it
            log.warning("aborting the transaction of %s failed: %s", tp_key(tp), err)
            self._in_txn.discard(tp)
            self._producers.pop(tp, None)
            with contextlib.suppress(Exception):
                await producer.stop()
