"""aiokafka wiring: clients, topics, committed offsets, checkpoints, and the two delivery modes.

The sidecar (sidecar.py) decides *what* to produce and *which* offset may be committed; this module
knows *how* with aiokafka, so the orchestration reads without client details:

* `AtLeastOnce`: one idempotent producer (acks=all). A commit awaits every output send of the
  partition, writes the partition's checkpoint, and only then commits the consumer offset (with the
  checkpoint's token as commit metadata). A failed send fails the commit: the offset stays.
* `ExactlyOnce`: one *transactional* producer per assigned input partition, transactional id
  `<prefix>.<group>.<topic>.<partition>`. aiokafka 0.14 commits transactional offsets with
  TxnOffsetCommit v0, which carries no consumer-group generation (no KIP-447 fencing), so the only
  zombie fencing available is the transactional id; one per input partition (Kafka Streams'
  original EOS design) means the next owner of a partition fences the previous one and aborts its
  open transaction the moment it starts, whichever instance it runs on.

Errors leave this module as `stream_pairer.errors` classes (see `adapters/kafka/errors.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata

from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.errors import (
    BrokerUnavailable,
    CheckpointError,
    CommitFailed,
    ConfigError,
    SidecarError,
)
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream import checkpoint as ckpt
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.partition import Emitted

log = logging.getLogger("stream_pairer.kafka")

TOPIC_ALREADY_EXISTS = 36
MAX_BATCH_BYTES = 1 << 20  # see KafkaSettings.max_batch_bytes
# ~20 million held events per partition, delta-encoded + zlib; ~3.5 million when every one is in its
# own conversation and each needs its clock (random clocks over 10 min: ~4.4 B each, see checkpoint.py)
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
CHECKPOINT_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "max.message.bytes": str(MAX_CHECKPOINT_BYTES + 1024),
    # Small segments and an eager cleaner: only the latest checkpoint per partition matters.
    "segment.ms": "600000",
    "min.cleanable.dirty.ratio": "0.1",
}


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
    # before appending), and 1 MiB stays under the broker's default message.max.bytes (1,048,588)
    # which every batch must fit; lower it for a broker or topic configured below that.
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
    # Outputs are capped by encode_output; a checkpoint may be larger (its topic allows it). A single
    # record larger than the batch size still goes out, alone in its batch.
    max_request_size = max(settings.max_output_bytes, MAX_CHECKPOINT_BYTES) + 64 * 1024
    return AIOKafkaProducer(
        client_id=f"{settings.client_id}-producer",
        acks="all",
        enable_idempotence=True,
        transactional_id=transactional_id,
        linger_ms=settings.linger_ms,
        max_batch_size=min(settings.max_batch_bytes, max_request_size),
        max_request_size=max_request_size,
        **settings.common(),
        **settings.producer_extra,
    )


def make_admin(settings: KafkaSettings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(client_id=f"{settings.client_id}-admin", **settings.common())


def tp_key(tp: TopicPartition) -> str:
    return f"{tp.topic}[{tp.partition}]"


# ---------------------------------------------------------------------------------- topics


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    compacted: bool = False


async def topic_partitions(admin: AIOKafkaAdminClient, names: Sequence[str]) -> dict[str, int]:
    """Partition counts of the topics that exist (missing ones are absent from the result)."""
    out: dict[str, int] = {}
    if not names:
        return out
    for meta in await admin.describe_topics(list(names)):
        if meta.get("error_code", 0) == 0 and meta.get("partitions"):
            out[meta["topic"]] = len(meta["partitions"])
    return out


async def ensure_topics(
    admin: AIOKafkaAdminClient, specs: Iterable[TopicSpec], *, replication_factor: int
) -> dict[str, int]:
    """Create the topics that do not exist yet; return every topic's partition count."""
    specs = list(specs)
    existing = await topic_partitions(admin, [s.name for s in specs])
    missing = [s for s in specs if s.name not in existing]
    if missing:
        new = [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=replication_factor,
                topic_configs=dict(CHECKPOINT_TOPIC_CONFIG) if s.compacted else {},
            )
            for s in missing
        ]
        resp = await admin.create_topics(new)
        for name, code, *rest in resp.topic_errors:
            if code not in (0, TOPIC_ALREADY_EXISTS):
                message = rest[0] if rest else ""
                raise ConfigError(f"cannot create topic {name}: error {code} {message}")
        log.info("created topics %s", ", ".join(s.name for s in missing))
        deadline = time.monotonic() + 30
        while True:  # wait until the new partitions have leaders
            existing = await topic_partitions(admin, [s.name for s in specs])
            if all(s.name in existing for s in specs) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
    return existing


async def committed_offsets(
    admin: AIOKafkaAdminClient, group: str, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, tuple[int | None, str]]:
    """The group's committed offset and commit metadata per partition ((None, "") when none)."""
    tps = list(tps)
    got = await admin.list_consumer_group_offsets(group, partitions=tps)
    out: dict[TopicPartition, tuple[int | None, str]] = {}
    for tp in tps:
        om = got.get(tp)
        if om is None or om.offset is None or om.offset < 0:
            out[tp] = (None, "")
        else:
            out[tp] = (int(om.offset), om.metadata or "")
    return out


# ----------------------------------------------------------------------------- checkpoints


class CheckpointStore:
    """Reads and addresses replay checkpoints on `<input>.pairer-checkpoints` (compacted).

    Partition p of an input topic checkpoints to partition `p % n` of its checkpoint topic, so the
    latest checkpoint of a partition is found by reading back from the end of one partition
    (read_committed: an aborted transaction's checkpoint is invisible) rather than scanning a topic.
    """

    def __init__(self, settings: KafkaSettings, group: str, template: str) -> None:
        self.settings = settings
        self.group = group
        self.template = template
        self.partitions: dict[str, int] = {}  # checkpoint topic -> partition count
        self._reader: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()

    def topic_for(self, input_topic: str) -> str:
        return self.template.format(topic=input_topic, group=self.group)

    def address(self, tp: TopicPartition) -> TopicPartition:
        topic = self.topic_for(tp.topic)
        return TopicPartition(topic, tp.partition % self.partitions.get(topic, 1))

    def record(self, cp: Checkpoint) -> tuple[TopicPartition, bytes, bytes]:
        dest = self.address(TopicPartition(cp.topic, cp.partition))
        return dest, ckpt.key(cp.group, cp.topic, cp.partition), ckpt.encode(cp)

    async def start(self) -> None:
        if self._reader is None:
            reader = AIOKafkaConsumer(
                client_id=f"{self.settings.client_id}-checkpoints",
                group_id=None,
                enable_auto_commit=False,
                isolation_level="read_committed",
                fetch_max_wait_ms=50,  # reads are short and targeted: do not park in a long poll
                **self.settings.common(),
                **self.settings.consumer_extra,
            )
            await reader.start()
            self._reader = reader

    async def stop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()

    async def latest(
        self, tps: Sequence[TopicPartition], timeout_s: float = 30.0
    ) -> dict[TopicPartition, Checkpoint | None]:
        """The newest committed checkpoint of each partition for this group (None: first run, or
        unreadable). All partitions are read back together, in one pass over their checkpoint
        partitions, so opening many partitions costs about as much as opening one."""
        async with self._lock:
            await self.start()
            assert self._reader is not None
            try:
                return await asyncio.wait_for(self._read_back(self._reader, list(tps)), timeout_s)
            except TimeoutError as err:
                names = ", ".join(tp_key(tp) for tp in tps)
                raise BrokerUnavailable(f"reading the checkpoints of {names} timed out") from err

    async def _read_back(
        self, reader: AIOKafkaConsumer, tps: list[TopicPartition]
    ) -> dict[TopicPartition, Checkpoint | None]:
        wanted: dict[TopicPartition, dict[bytes, TopicPartition]] = {}  # checkpoint tp -> key -> input tp
        for tp in tps:
            wanted.setdefault(self.address(tp), {})[ckpt.key(self.group, tp.topic, tp.partition)] = tp
        where = list(wanted)
        reader.assign(where)
        begins = await reader.beginning_offsets(where)
        ends = await reader.end_offsets(where)
        found: dict[TopicPartition, bytes] = {}  # input partition -> its newest checkpoint
        hi = dict(ends)
        window = 64
        todo = [w for w in where if hi[w] > begins[w]]
        while todo:
            lo = {w: max(begins[w], hi[w] - window) for w in todo}
            newest = await self._read_window(reader, where, todo=todo, lo=lo, hi=hi, wanted=wanted)
            for target, value in newest.items():
                found.setdefault(target, value)  # a newer window's find is never replaced by an older one
            # Inputs with no checkpoint in their window: look further back in that checkpoint partition.
            todo = [w for w in todo if any(t not in found for t in wanted[w].values()) and lo[w] > begins[w]]
            for w in todo:
                hi[w] = lo[w]
            window *= 4
        return {tp: _decoded(tp, found.get(tp)) for tp in tps}

    @staticmethod
    async def _read_window(
        reader: AIOKafkaConsumer,
        where: list[TopicPartition],
        *,
        todo: list[TopicPartition],
        lo: dict[TopicPartition, int],
        hi: dict[TopicPartition, int],
        wanted: dict[TopicPartition, dict[bytes, TopicPartition]],
    ) -> dict[TopicPartition, bytes]:
        """Read `[lo, hi)` of each checkpoint partition in `todo`: the newest checkpoint found there
        of each wanted input partition (within a window the last one wins)."""
        for w in todo:
            reader.seek(w, lo[w])
        reader.pause(*[w for w in where if w not in lo])
        reader.resume(*todo)
        newest: dict[TopicPartition, bytes] = {}
        while True:
            behind = [w for w in todo if await reader.position(w) < hi[w]]
            if not behind:
                return newest
            for w, recs in (await reader.getmany(*behind, timeout_ms=1000)).items():
                for rec in recs:
                    target = wanted[w].get(rec.key) if rec.key is not None else None
                    if target is not None and lo[w] <= rec.offset < hi[w] and rec.value is not None:
                        newest[target] = rec.value


def _decoded(tp: TopicPartition, raw: bytes | None) -> Checkpoint | None:
    """A found checkpoint, decoded; None for none found or an undecodable one (plain replay)."""
    if raw is None:
        return None
    try:
        return ckpt.decode(raw)
    except CheckpointError as err:
        log.warning("checkpoint of %s ignored (plain replay instead): %s", tp_key(tp), err)
        return None


# -------------------------------------------------------------------------------- delivery


def encode_output(rec: dict[str, Any], limit: int) -> bytes:
    """orjson of an output record; one larger than `limit` keeps its identity and verdict but loses
    its payloads (`payload_truncated: true`), because a record the broker refuses would block the
    partition forever and dropping it would break conservation."""
    value = orjson.dumps(rec)
    if len(value) <= limit:
        return value
    small = dict(rec)
    for side in ("call", "result", "event"):
        if isinstance(small.get(side), dict):
            trimmed = dict(small[side])
            for name in ("raw", "arguments", "content"):
                if name in trimmed:
                    trimmed[name] = None
            small[side] = trimmed
    if "raw" in small:
        small["raw"] = None
        small.pop("raw_base64", None)
    small["payload_truncated"] = True
    small["payload_bytes"] = len(value)
    return orjson.dumps(small)


@dataclass(slots=True)
class _Pending:
    """Outputs sent for one partition since its last commit."""

    futures: list[asyncio.Future[Any]] = field(default_factory=list)
    records: list[tuple[dict[str, Any], float | None]] = field(default_factory=list)  # (record, arrival)


class Delivery:
    """What the sidecar needs from a delivery mode. One instance per sidecar run."""

    def __init__(self, settings: KafkaSettings, group: str, checkpoints: CheckpointStore, metrics: Metrics):
        self.settings = settings
        self.group = group
        self.checkpoints = checkpoints
        self.metrics = metrics
        self._pending: dict[TopicPartition, _Pending] = {}

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def open_partition(self, tp: TopicPartition) -> None:
        """Before the partition's committed offset is read (exactly-once: fences the previous owner)."""

    async def close_partition(self, tp: TopicPartition) -> None:
        self._pending.pop(tp, None)

    async def send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        raise NotImplementedError

    async def commit(
        self, consumer: AIOKafkaConsumer, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        """Make the partitions' outputs durable and commit their offsets; return the failures."""
        raise NotImplementedError

    def _observe(self, tp: TopicPartition) -> None:
        pending = self._pending.pop(tp, None)
        if pending is None:
            return
        now = time.monotonic()
        metrics = self.metrics
        for rec, arrival in pending.records:
            metrics.observe_output(rec)
            if arrival is not None:
                metrics.observe_emit_latency(now - arrival)

    def _track(self, tp: TopicPartition) -> _Pending:
        pending = self._pending.get(tp)
        if pending is None:
            pending = self._pending[tp] = _Pending()
        return pending

    async def _send_all(
        self, producer: AIOKafkaProducer, tp: TopicPartition, items: list[Emitted], arrival: float | None
    ) -> None:
        pending = self._track(tp)
        limit = self.settings.max_output_bytes
        for item in items:
            fut = await producer.send(item.topic, encode_output(item.record, limit), key=item.key)
            pending.futures.append(fut)
            pending.records.append((item.record, arrival))


class AtLeastOnce(Delivery):
    """Idempotent producer; offsets committed by the consumer only after every output is acked."""

    def __init__(self, settings: KafkaSettings, group: str, checkpoints: CheckpointStore, metrics: Metrics):
        super().__init__(settings, group, checkpoints, metrics)
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        if self._producer is None:
            producer = make_producer(self.settings)
            try:
                await producer.start()
            except BaseException:
                await producer.stop()
                raise
            self._producer = producer

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        assert self._producer is not None
        try:
            await self._send_all(self._producer, tp, items, arrival)
        except Exception as err:
            self.metrics.observe_produce_error()
            raise classify(err, during=f"deliver {tp_key(tp)}") from err

    async def commit(
        self, consumer: AIOKafkaConsumer, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        assert self._producer is not None
        failed: dict[TopicPartition, SidecarError] = {}

        async def durable(tp: TopicPartition, cp: Checkpoint) -> None:
            pending = self._pending.get(tp)
            try:
                if pending is not None and pending.futures:
                    await asyncio.gather(*pending.futures)
                dest, key, value = self.checkpoints.record(cp)
                assert self._producer is not None
                await (await self._producer.send(dest.topic, value, key=key, partition=dest.partition))
            except Exception as err:
                self.metrics.observe_produce_error()
                self._pending.pop(tp, None)
                failed[tp] = classify(err, during=f"deliver {tp_key(tp)}")

        await asyncio.gather(*(durable(tp, cp) for tp, cp in commits.items()))
        offsets = {
            tp: OffsetAndMetadata(cp.committed, cp.metadata) for tp, cp in commits.items() if tp not in failed
        }
        for tp in offsets:
            self._observe(tp)  # acknowledged (acks=all): emitted, whatever the commit does next
        if offsets:
            try:
                await consumer.commit(offsets)
            except Exception as err:
                # Outputs and checkpoints are acknowledged: whatever went wrong, only the offset
                # commit is missing, and the next commit (or a replay) covers it.
                self.metrics.observe_commit_error()
                error = CommitFailed(str(classify(err, during="commit offsets")))
                failed.update(dict.fromkeys(offsets, error))
        return failed


class ExactlyOnce(Delivery):
    """A transactional producer per input partition: outputs, checkpoint and offset in one transaction."""

    def __init__(
        self, settings: KafkaSettings, group: str, checkpoints: CheckpointStore, metrics: Metrics, prefix: str
    ) -> None:
        super().__init__(settings, group, checkpoints, metrics)
        self.prefix = prefix
        self._producers: dict[TopicPartition, AIOKafkaProducer] = {}
        self._in_txn: set[TopicPartition] = set()

    def transactional_id(self, tp: TopicPartition) -> str:
        return f"{self.prefix}.{self.group}.{tp.topic}.{tp.partition}"

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
        if not items:
            return
        try:
            producer = await self._begin(tp)
            await self._send_all(producer, tp, items, arrival)
        except Exception as err:
            self.metrics.observe_produce_error()
            raise classify(err, during=f"deliver {tp_key(tp)}") from err

    async def commit(
        self, consumer: AIOKafkaConsumer, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        failed: dict[TopicPartition, SidecarError] = {}

        async def one(tp: TopicPartition, cp: Checkpoint) -> None:
            try:
                producer = await self._begin(tp)
                pending = self._pending.get(tp)
                if pending is not None and pending.futures:
                    await asyncio.gather(*pending.futures)  # a failed send must abort, not commit
                dest, key, value = self.checkpoints.record(cp)
                await producer.send(dest.topic, value, key=key, partition=dest.partition)
                await producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(cp.committed, cp.metadata)}, self.group
                )
                await producer.commit_transaction()
                self._in_txn.discard(tp)
            except Exception as err:
                self.metrics.observe_commit_error()
                failed[tp] = classify(err, during=f"commit the transaction of {tp_key(tp)}")
                self._pending.pop(tp, None)
                await self._abort(tp)
                return
            self._observe(tp)

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
