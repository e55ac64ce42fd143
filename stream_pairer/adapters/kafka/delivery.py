"""The two delivery modes, output size fitting, and the backoff that survives session restarts.

The sidecar decides *what* to produce and *which* offset may be committed; this module knows *how*:

* `AtLeastOnce`: one idempotent producer (acks=all). A commit awaits every output send of the
  partition, writes the partition's checkpoint, and only then commits the consumer offset (with the
  checkpoint's token as commit metadata). A failed send fails the commit: the offset stays.
* `ExactlyOnce`: one *transactional* producer per assigned input partition, transactional id
  `<prefix>.<group>.<topic>.<partition>`. aiokafka 0.14 commits transactional offsets with
  TxnOffsetCommit v0, which carries no consumer-group generation (no KIP-447 fencing), so the only
  zombie fencing available is the transactional id; one per input partition (Kafka Streams'
  original EOS design) means the next owner of a partition fences the previous one and aborts its
  open transaction the moment it starts, whichever instance it runs on.

Sizes: a record the broker refuses (`MESSAGE_TOO_LARGE`) is not a transient error: retrying it,
or replaying the partition to produce it again, fails the same way forever (and re-emits every
output since the last commit each time). So every output is fitted, before it is sent, under the
destination topic's own `max.message.bytes` (read at session start by topics.py): payloads are cut
with a `payload_truncated` marker as file mode does for huge fields, and a record that is still
too large keeps only its identity and verdict (`output_truncated`). Lineage is never cut, so the
audit still finds every event. Errors leave this module as `stream_pairer.errors` classes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError, RecordListTooLargeError, RecordTooLargeError
from aiokafka.structs import OffsetAndMetadata

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import RECORD_OVERHEAD_BYTES, KafkaSettings, make_producer, tp_key
from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.errors import CommitFailed, OutputTooLarge, SidecarError
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.partition import Emitted

log = logging.getLogger("stream_pairer.kafka")

SIZE_ERRORS = (MessageSizeTooLargeError, RecordTooLargeError, RecordListTooLargeError)
PAYLOAD_FIELDS = ("raw", "arguments", "content")
# What an output keeps when even its payload-free form is over the limit: enough to audit it
# (kind, ids, lineage) and to act on it (reason, verdict).
IDENTITY_FIELDS = ("kind", "reason", "pair_id", "match", "fifo_by", "conversation_id", "tool", "outcome",
                   "failure", "raw_bytes", "raw_truncated", "source")  # fmt: skip
SIDE_IDENTITY_FIELDS = ("id", "name", "block", "source", "ts")


class Backoff:
    """Capped exponential backoff with a deterministic 0.75-1.0 spread per attempt number.

    Reset only by the caller's proof of progress (a commit that succeeded), never by merely
    starting again: a session or partition that fails right after every restart must wait longer
    each time, not restart at attempt 1 in a loop."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.attempt = 0

    def next(self) -> float:
        self.attempt += 1
        base = min(self.initial_s * 2.0 ** (self.attempt - 1), self.max_s)
        return base * (0.75 + 0.25 * ((self.attempt * 0.618034) % 1.0))

    def reset(self) -> None:
        self.attempt = 0


def _without_payloads(rec: dict[str, Any], size: int) -> dict[str, Any]:
    small = dict(rec)
    for side in ("call", "result", "event"):
        if isinstance(small.get(side), dict):
            trimmed = dict(small[side])
            for name in PAYLOAD_FIELDS:
                if name in trimmed:
                    trimmed[name] = None
            small[side] = trimmed
    if "raw" in small:
        small["raw"] = ""
        small.pop("raw_base64", None)
        small["raw_truncated"] = True
    small["payload_truncated"] = True
    small["payload_bytes"] = size
    return small


def _cut(value: Any, n: int = 256) -> Any:
    return value[:n] if isinstance(value, str) else value


def _identity_only(rec: dict[str, Any], size: int) -> dict[str, Any]:
    small = {k: rec[k] for k in IDENTITY_FIELDS if k in rec}
    if "tool" in small:
        small["tool"] = _cut(small["tool"])  # names are labels, not identity: cut like a payload
    for side in ("call", "result", "event"):
        if isinstance(rec.get(side), dict):
            small[side] = {k: rec[side][k] for k in SIDE_IDENTITY_FIELDS if k in rec[side]}
            if "name" in small[side]:
                small[side]["name"] = _cut(small[side]["name"])
    if rec.get("kind") == "dead_letter":
        small["detail"] = str(rec.get("detail", ""))[:512]
        small["raw"] = ""
        small["raw_truncated"] = True
    small["payload_truncated"] = True
    small["output_truncated"] = True
    small["payload_bytes"] = size
    return small


def fit_output(record: dict[str, Any] | bytes, limit: int) -> bytes:
    """orjson of an output record, fitted under `limit` bytes: first without its payloads
    (`payload_truncated: true`), then, if still too large (huge ids or tool names), with only its
    identity, verdict and lineage (`output_truncated: true`). Raises OutputTooLarge only when even
    that does not fit (a topic limit of a few KB: a configuration error)."""
    if isinstance(record, bytes) and len(record) <= limit:  # encoded by the compiled core: as is
        return record
    rec: dict[str, Any] = orjson.loads(record) if isinstance(record, bytes) else record
    value = orjson.dumps(rec)
    if len(value) <= limit:
        return value
    value2 = orjson.dumps(_without_payloads(rec, len(value)))
    if len(value2) <= limit:
        return value2
    value3 = orjson.dumps(_identity_only(rec, len(value)))
    if len(value3) <= limit:
        return value3
    raise OutputTooLarge(
        f"a {rec.get('kind')} output is {len(value3)} bytes even without its payloads, over the "
        f"{limit} byte limit of its topic: raise the topic's max.message.bytes"
    )


encode_output = fit_output  # the name file-mode tests and older callers know


def _kind(item: Emitted) -> str:
    """The record kind of an output (its OutputMeta's when it has one: the compiled core's bytes)."""
    if item.meta is not None:
        return item.meta.kind
    rec = item.record
    kind: str = (rec if isinstance(rec, dict) else orjson.loads(rec))["kind"]
    return kind


@dataclass(slots=True)
class _Pending:
    """Outputs sent for one partition since its last commit."""

    futures: list[asyncio.Future[Any]] = field(default_factory=list)
    # (record or its encoding, arrival)
    records: list[tuple[dict[str, Any] | bytes, float | None]] = field(default_factory=list)
    outstanding: int = 0  # sends not answered yet
    since: float | None = None  # when the oldest send still outstanding went out
    error: BaseException | None = None  # the first refused send: the partition must be rebuilt
    on_error: Any = None  # called with each refused send's error (the delivery's producer check)
    on_ack: Any = None  # called with each acknowledged send's RecordMetadata

    def add(self, fut: asyncio.Future[Any]) -> None:
        self.futures.append(fut)
        if self.outstanding == 0:
            self.since = time.monotonic()
        self.outstanding += 1
        fut.add_done_callback(self._done)

    def _done(self, fut: asyncio.Future[Any]) -> None:
        self.outstanding -= 1
        if self.outstanding == 0:
            self.since = None
        if fut.cancelled():
            return
        err = fut.exception()  # retrieved here, always: no "exception was never retrieved" noise
        if err is None:
            if self.on_ack is not None:
                self.on_ack(fut.result())
        else:
            if self.error is None:
                self.error = err
            if self.on_error is not None:
                self.on_error(err)


def _failure(err: BaseException, during: str) -> SidecarError:
    if isinstance(err, SIZE_ERRORS):
        return OutputTooLarge(f"{during}: {type(err).__name__}: {err}")
    return classify(err, during=during)


class Delivery:
    """What the sidecar needs from a delivery mode. One instance per sidecar session."""

    def __init__(self, settings: KafkaSettings, group: str, checkpoints: CheckpointStore, metrics: Metrics):
        self.settings = settings
        self.group = group
        self.checkpoints = checkpoints
        self.metrics = metrics
        self.limits: dict[str, int] = {}  # output topic -> the size each record is fitted under
        self._acked_offsets: dict[tuple[str, int], int] = {}  # output partition -> newest acked offset
        self.recreated: set[str] = set()  # output topics seen deleted and re-created (see _acked)
        self._pending: dict[TopicPartition, _Pending] = {}

    def set_limits(self, max_message_bytes: dict[str, int]) -> None:
        """Per output topic: the smaller of --max-output-bytes and the topic's `max.message.bytes`
        less a record's batch overhead."""
        cap = self.settings.max_output_bytes
        self.limits = {t: max(1, min(cap, n - RECORD_OVERHEAD_BYTES)) for t, n in max_message_bytes.items()}

    def oldest_unacked_s(self) -> float:
        """Age of the oldest output not yet acknowledged (0 when all are): a sidecar that cannot get
        its outputs acknowledged is not ready, whatever its consumer does."""
        now = time.monotonic()
        ages = [now - p.since for p in self._pending.values() if p.since is not None]
        return max(ages, default=0.0)

    def unacked(self) -> int:
        return sum(p.outstanding for p in self._pending.values())

    def refused(self) -> dict[TopicPartition, SidecarError]:
        """Partitions with a send the broker refused since their last commit, found as the answer
        arrives rather than at the next commit (which may be minutes away): they are rebuilt now."""
        out = {}
        for tp, p in self._pending.items():
            if p.error is not None:
                out[tp] = _failure(p.error, f"deliver {tp_key(tp)}")
        return out

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
            metrics.observe_output(orjson.loads(rec) if isinstance(rec, bytes) else rec)
            if arrival is not None:
                metrics.observe_emit_latency(now - arrival)

    def _track(self, tp: TopicPartition) -> _Pending:
        pending = self._pending.get(tp)
        if pending is None:
            pending = self._pending[tp] = _Pending(on_error=self._refused_send, on_ack=self._acked)
        return pending

    def _acked(self, meta: Any) -> None:
        """Offsets of one output partition only grow: an acknowledged offset below one seen before
        means the topic was deleted and re-created (the broker's auto-creation brings it back the
        moment our producer asks for it, so it never looks missing): what was written to the old
        one is gone, and the sidecar must rebuild to write it again."""
        key = (meta.topic, meta.partition)
        last = self._acked_offsets.get(key)
        if last is not None and meta.offset < last:
            self.recreated.add(meta.topic)
        self._acked_offsets[key] = meta.offset

    def _refused_send(self, err: BaseException) -> None:
        """A send the broker refused for good. Overridden where that poisons a shared producer."""

    async def _send_all(
        self, producer: AIOKafkaProducer, tp: TopicPartition, items: list[Emitted], arrival: float | None
    ) -> None:
        pending = self._track(tp)
        default = self.settings.max_output_bytes
        limits = self.limits
        observe_bytes = self.metrics.observe_output_bytes
        for item in items:
            value = fit_output(item.record, limits.get(item.topic, default))
            observe_bytes(_kind(item), len(value))  # output bytes per input byte (issue 15)
            pending.add(await producer.send(item.topic, value, key=item.key))
            pending.records.append((item.record, arrival))


class AtLeastOnce(Delivery):
    """Idempotent producer; offsets committed by the consumer only after every output is acked."""

    def __init__(self, settings: KafkaSettings, group: str, checkpoints: CheckpointStore, metrics: Metrics):
        super().__init__(settings, group, checkpoints, metrics)
        self._producer: AIOKafkaProducer | None = None
        self._poisoned = False

    def _refused_send(self, err: BaseException) -> None:
        # An idempotent producer whose batch was refused (too large, ...) has spent sequence numbers
        # the broker never wrote: every later batch to that partition fails OutOfOrderSequenceNumber.
        # Only a new producer (a new producer id) sends there again.
        if not getattr(err, "retriable", False):
            self._poisoned = True

    async def close_partition(self, tp: TopicPartition) -> None:
        """The partition is rebuilt; a producer poisoned by a refused send is replaced first (its
        other partitions' outstanding sends are flushed by its stop, or fail and rebuild too)."""
        await super().close_partition(tp)
        if self._poisoned and self._producer is not None:
            self._poisoned = False
            old, self._producer = self._producer, None
            log.info("replacing the output producer after a refused send (new producer id)")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(old.stop(), self.settings.request_timeout_ms / 1000)
            await self.start()

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
            raise _failure(err, f"deliver {tp_key(tp)}") from err

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
                failed[tp] = _failure(err, f"deliver {tp_key(tp)}")

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
            raise _failure(err, f"deliver {tp_key(tp)}") from err

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
                failed[tp] = _failure(err, f"commit the transaction of {tp_key(tp)}")
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
