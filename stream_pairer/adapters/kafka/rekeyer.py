"""`--repartition`: stage one re-keys input records by conversation id onto `<input>.by-conversation`.

Why: pairing state is per partition, so a conversation whose records are spread over several input
partitions (the producer keyed by user, by request, or not at all) would have its calls and results
in different engines and never pair. Stage one reads the input, finds each record's conversation id
exactly as the format layer does (the configured fields, else the message key), and produces the
record unchanged to the internal topic keyed by that id, with the original timestamp and its
lineage in headers. The pairing loop (stage two) reads the internal topic and restores the original
`{topic, partition, offset}` as the outputs' lineage (with `via` naming the internal record), so
audits and warehouse joins still point at the input that was written.

A record whose conversation id cannot be found is forwarded with its original key (or none); stage
two then dead-letters it with the same reason it would have had without repartitioning.

A record too large for the internal topic (its `max.message.bytes`, read at start) is forwarded as
a prefix (the 512 KiB a dead letter keeps) with its original size in a header: stage two
dead-letters it as `too_large`, with the same lineage, instead of the broker refusing it and the
stage retrying it forever.

Delivery is the sidecar's: at-least-once (acks=all, commit after every batch's acks) or exactly-once
(a transactional producer per input partition: the re-keyed records and the input offsets commit
together). Stage one has no state, so a rebalance needs nothing but a commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.structs import OffsetAndMetadata

from stream_pairer.adapters.kafka.clients import (
    RECORD_OVERHEAD_BYTES,
    KafkaSettings,
    make_consumer,
    make_producer,
    tp_key,
)
from stream_pairer.adapters.kafka.delivery import SIZE_ERRORS, Backoff
from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.core.formats import FormatConfig
from stream_pairer.core.formats.common import conversation_id
from stream_pairer.core.model import MAX_DEAD_LETTER_RAW_BYTES, FormatError
from stream_pairer.errors import Fenced, SidecarError
from stream_pairer.stream.partition import H_BYTES, lineage_headers

log = logging.getLogger("stream_pairer.adapters.kafka.rekeyer")


def conversation_key(value: bytes | None, key: bytes | None, config: FormatConfig) -> bytes | None:
    """The conversation id as the new key, or the original key when the record has none we can read."""
    if value is None or len(value) > config.max_record_bytes:
        return key
    try:
        record: Any = orjson.loads(value)
    except orjson.JSONDecodeError:
        return key
    if type(record) is not dict:
        return key
    try:
        return conversation_id(
            record, config, key.decode("utf-8", "replace") if key is not None else None
        ).encode()
    except FormatError:
        return key


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, rekeyer: Rekeyer) -> None:
        self.rekeyer = rekeyer

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self.rekeyer.lock:  # the batch in flight is committed before the partitions move
            await self.rekeyer.close_producers(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None


class Rekeyer:
    """Stage one. Runs inside a sidecar session as its own consumer group (`<group>.repartition`)."""

    def __init__(
        self,
        settings: KafkaSettings,
        group: str,
        topics: dict[str, str],  # input topic -> its by-conversation topic
        formats: FormatConfig,
        *,
        exactly_once: bool,
        transactional_id_prefix: str,
        max_records: int,
        poll_timeout_s: float,
        auto_offset_reset: str,
        isolation_level: str,
        max_message_bytes: dict[str, int] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self.group = group
        self.topics = topics
        self.formats = formats
        self.exactly_once = exactly_once
        self.prefix = transactional_id_prefix
        self.max_records = max_records
        self.poll_ms = int(poll_timeout_s * 1000)
        self.auto_offset_reset = auto_offset_reset
        self.isolation_level = isolation_level
        self.lock = asyncio.Lock()
        # Per internal topic: the largest value forwarded whole (its max.message.bytes less overhead).
        self.limits = {t: n - RECORD_OVERHEAD_BYTES for t, n in (max_message_bytes or {}).items()}
        # Retries of a failing partition wait longer each time (kept by the sidecar across sessions).
        self.backoff = backoff or Backoff(0.5, 30.0)
        self.records = 0
        self.truncated = 0  # records forwarded as a prefix (too large for the internal topic)
        self._producers: dict[TopicPartition, AIOKafkaProducer] = {}
        self._shared: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def run(self, stopping: asyncio.Event) -> None:
        """Re-key until `stopping` is set; raises SidecarError when the session must restart."""
        consumer = self._consumer = make_consumer(
            self.settings,
            "repartition",
            group_id=self.group,
            auto_offset_reset=self.auto_offset_reset,
            isolation_level=self.isolation_level,
            max_poll_records=self.max_records,
        )
        consumer.subscribe(list(self.topics), listener=_Listener(self))
        try:
            if not self.exactly_once:
                self._shared = make_producer(self.settings)
                await self._shared.start()
            await consumer.start()
            while not stopping.is_set():
                batch = await consumer.getmany(timeout_ms=self.poll_ms, max_records=self.max_records)
                if not batch:
                    continue
                async with self.lock:
                    assigned = consumer.assignment()
                    batch = {tp: msgs for tp, msgs in batch.items() if tp in assigned and msgs}
                    if self.exactly_once:
                        await asyncio.gather(
                            *(self._transact(consumer, tp, msgs) for tp, msgs in batch.items())
                        )
                    else:
                        await self._at_least_once(consumer, batch)
        except SidecarError:
            raise
        except Exception as err:
            raise classify(err, during="repartition") from err
        finally:
            await self.close()

    async def close(self) -> None:
        await self.close_producers(set(self._producers))
        shared, self._shared = self._shared, None
        consumer, self._consumer = self._consumer, None
        for closer in (shared.stop if shared else None, consumer.stop if consumer else None):
            if closer is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closer(), 10.0)

    async def close_producers(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            producer = self._producers.pop(tp, None)
            if producer is not None:
                with contextlib.suppress(Exception):
                    await producer.stop()

    async def _send_all(self, producer: AIOKafkaProducer, tp: TopicPartition, msgs: list[Any]) -> list[Any]:
        out = self.topics[tp.topic]
        limit = self.limits.get(out)
        futures = []
        for m in msgs:
            value = m.value
            headers = lineage_headers(tp.topic, tp.partition, m.offset)
            if limit is not None and value is not None and len(value) + len(m.key or b"") > limit:
                # Too large to forward: stage two dead-letters the prefix (see H_BYTES).
                headers.append((H_BYTES, b"%d" % len(value)))
                value = value[: min(MAX_DEAD_LETTER_RAW_BYTES, max(0, limit - 4096))]
                key = m.key if m.key is None or len(m.key) < 1024 else m.key[:1024]
                self.truncated += 1
            else:
                key = conversation_key(m.value, m.key, self.formats)
            futures.append(
                await producer.send(out, value, key=key, timestamp_ms=m.timestamp, headers=headers)
            )
        self.records += len(msgs)
        return futures

    async def _at_least_once(
        self, consumer: AIOKafkaConsumer, batch: dict[TopicPartition, list[Any]]
    ) -> None:
        assert self._shared is not None
        futures = []
        for tp, msgs in batch.items():
            futures += await self._send_all(self._shared, tp, msgs)
        await asyncio.gather(*futures)  # a failed send raises: no commit, the batch is read again
        await consumer.commit({tp: OffsetAndMetadata(msgs[-1].offset + 1, "") for tp, msgs in batch.items()})
        self.backoff.reset()

    async def _transact(self, consumer: AIOKafkaConsumer, tp: TopicPartition, msgs: list[Any]) -> None:
        producer = self._producers.get(tp)
        if producer is None:
            producer = make_producer(self.settings, f"{self.prefix}.{self.group}.{tp.topic}.{tp.partition}")
            await producer.start()  # fences the previous owner of this input partition
            self._producers[tp] = producer
            committed = await consumer.committed(tp)
            if committed is not None and committed != msgs[0].offset:
                # The fenced owner's last transaction moved the offset after this batch was fetched.
                consumer.seek(tp, committed)
                return
        try:
            await producer.begin_transaction()
            await asyncio.gather(*await self._send_all(producer, tp, msgs))
            await producer.send_offsets_to_transaction(
                {tp: OffsetAndMetadata(msgs[-1].offset + 1, "")}, self.group
            )
            await producer.commit_transaction()
            self.backoff.reset()
        except Exception as err:
            error = classify(err, during=f"repartition {tp_key(tp)}")
            if isinstance(error, Fenced):
                raise error from err
            delay = self.backoff.next()
            if isinstance(err, SIZE_ERRORS):
                error = SidecarError(
                    f"{error} (the internal topic's max.message.bytes is below its limit read at start?)"
                )
            log.warning(
                "re-keying %s failed (attempt %d), retrying from its last commit in %.1fs: %s",
                tp_key(tp), self.backoff.attempt, delay, error,
            )  # fmt: skip
            await asyncio.sleep(delay)
            with contextlib.suppress(Exception):
                await producer.abort_transaction()
            await self.close_producers({tp})
            committed = await consumer.committed(tp)
            if committed is not None:
                consumer.seek(tp, committed)
            else:
                await consumer.seek_to_beginning(tp)
