"""aiokafka client construction: one place that knows every client's settings.

Why a module of its own: the producer's batch and request sizes depend on the output topics'
`max.message.bytes` (read at session start, see topics.py), and every client takes the same
connection and security options (`KafkaSettings.extra`); keeping construction here means a new
client option is one edit, not one per call site.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

MAX_BATCH_BYTES = 1 << 20  # see KafkaSettings.max_batch_bytes
# ~20 million held events per partition, delta-encoded + zlib; ~3.5 million when every one is in its
# own conversation and each needs its clock (random clocks over 10 min: ~4.4 B each, see checkpoint.py)
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
# What a record batch adds around one record's key and value (batch header 61 B, record header
# and varints, our lineage headers): a record is fitted to `max.message.bytes` minus this.
RECORD_OVERHEAD_BYTES = 1024
# A transactional producer's wait before retrying a coordinator request (aiokafka: 100 ms). The broker
# answers CONCURRENT_TRANSACTIONS to AddPartitionsToTxn / AddOffsetsToTxn while the previous
# transaction's markers are still being written, which with a commit every 50 ms is routine, not a
# fault: each one cost a transaction 100 ms, a tenth of them before (BENCHMARKS.md, issue 25 "cut").
# --producer-config retry_backoff_ms=N wins.
TXN_RETRY_BACKOFF_MS = 20


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap_servers: str
    client_id: str = "stream-pairer"
    request_timeout_ms: int = 30_000
    max_output_bytes: int = 1_000_000
    linger_ms: int = 5
    # Producer batch per partition. aiokafka's default (16 KiB) holds ~8 pairs, so the producer
    # sent one small request per handful of outputs: the same passthrough ran 2.0-2.2x faster with
    # 1 MiB (BENCHMARKS.md part 2). A batch, header included, never exceeds this (aiokafka checks
    # before appending), and every batch must fit the destination topic's `max.message.bytes`
    # (the broker refuses a whole batch over it): the sidecar lowers this to the smallest output
    # topic's limit at session start (see Delivery.fit_limits).
    max_batch_bytes: int = MAX_BATCH_BYTES
    extra: dict[str, Any] = field(default_factory=dict)  # passed to every client (security options)
    consumer_extra: dict[str, Any] = field(default_factory=dict)  # --consumer-config (security.py)
    producer_extra: dict[str, Any] = field(default_factory=dict)  # --producer-config (security.py)

    def common(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "request_timeout_ms": self.request_timeout_ms,
            **self.extra,
        }


def make_producer(settings: KafkaSettings, transactional_id: str | None = None) -> AIOKafkaProducer:
    # Outputs are fitted by delivery.fit_output; a checkpoint may be larger (its topic allows it). A
    # single record larger than the batch size still goes out, alone in its batch.
    max_request_size = max(settings.max_output_bytes, MAX_CHECKPOINT_BYTES) + 64 * 1024
    extra: dict[str, Any] = {}
    if transactional_id is not None:
        extra["retry_backoff_ms"] = TXN_RETRY_BACKOFF_MS
    extra.update(settings.producer_extra)
    return AIOKafkaProducer(
        client_id=f"{settings.client_id}-producer",
        acks="all",
        enable_idempotence=True,
        transactional_id=transactional_id,
        linger_ms=settings.linger_ms,
        max_batch_size=min(settings.max_batch_bytes, max_request_size),
        max_request_size=max_request_size,
        **settings.common(),
        **extra,
    )


def make_admin(settings: KafkaSettings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(client_id=f"{settings.client_id}-admin", **settings.common())


def make_consumer(settings: KafkaSettings, suffix: str, **kw: Any) -> AIOKafkaConsumer:
    """A consumer that never commits by itself (every commit follows the delivery rules)."""
    return AIOKafkaConsumer(
        client_id=f"{settings.client_id}-{suffix}",
        enable_auto_commit=False,
        **kw,
        **settings.common(),
        **settings.consumer_extra,
    )


def tp_key(tp: TopicPartition) -> str:
    return f"{tp.topic}[{tp.partition}]"
