"""The two delivery modes, output size fitting, and the backoff that survives session restarts.

The sidecar decides *what* to produce and *which* offset may be committed; this module knows *how*:

* `AtLeastOnce`: one idempotent producer (acks=all). A commit awaits every output send of the
  partition, writes the partition's checkpoint, and only then commits the consumer offset (with the
  checkpoint's token as commit metadata). A failed send fails the commit: the offset stays.
* `ExactlyOnce` (transactions.py): one *transactional* producer per assigned input partition;
  outputs, checkpoint and offset in one transaction.

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
import functools
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError, RecordListTooLargeError, RecordTooLargeError
from aiokafka.structs import OffsetAndMetadata

from stream_pairer.adapters.kafka.acks import OutputWatch
from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import RECORD_OVERHEAD_BYTES, KafkaSettings, make_producer, tp_key
from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.core.model import OutputMeta
from stream_pairer.core.vocab import RecordKind
from stream_pairer.errors import CommitFailed, OutputTooLarge, SidecarError
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.partition import Emitted
from stream_pairer.stream.partitioner import KeyPartitioner

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
    if rec.get("kind") == RecordKind.DEAD_LETTER:
        small["detail"] = str(rec.get("detail", ""))[:512]
        small["raw"] = ""
        small["raw_truncated"] = True
    small["payload_truncated"] = True
    small["output_truncated"] = True
    small["payload_bytes"] = size
    return small


def fit_output(record: bytes, limit: int) -> bytes:
    """An encoded output record, fitted under `limit` bytes: first without its payloads
    (`payload_truncated: true`), then, if still too large (huge ids or tool names), with only its
    identity, verdict and lineage (`output_truncated: true`). Raises OutputTooLarge only when even
    that does not fit (a topic limit of a few KB: a configuration error)."""
    if len(record) <= limit:  # as the compiled core encoded it
        return record
    rec: dict[str, Any] = orjson.loads(record)
    value = record
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


@dataclass(slots=True)
class _Pending:
    """Outputs sent for one partition since its last commit: one future per produced batch."""

    futures: list[asyncio.Future[Any]] = field(default_factory=list)
    metas: list[OutputMeta] = field(default_factory=list)  # what the metrics count once acknowledged
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (arrival, outputs) per fetch
    outstanding: int = 0  # batches not answered yet
    since: float | None = None  # when the oldest batch still outstanding went out
    error: BaseException | None = None  # the first refused batch: the partition must be rebuilt
    on_error: Any = None  # called with each refused batch's error (the delivery's producer check)
    on_ack: Any = None  # called with each acknowledged batch's RecordMetadata (base offset) and size

    def add(self, fut: asyncio.Future[Any], records: int = 1, *, acks: bool = True) -> None:
        """Track a batch of `records` outputs (its future resolves to the batch's base offset).
        `acks=False`: a batch shared with another input partition that reports its acknowledgement
        (the offset check must see each batch once)."""
        self.futures.append(fut)
        if self.outstanding == 0:
            self.since = time.monotonic()
        self.outstanding += 1
        fut.add_done_callback(functools.partial(self._done, records if acks else 0))

    def _done(self, records: int, fut: asyncio.Future[Any]) -> None:
        self.outstanding -= 1
        if self.outstanding == 0:
            self.since = None
        if fut.cancelled():
            return
        err = fut.exception()  # retrieved here, always: no "exception was never retrieved" noise
        if err is None:
            if records and self.on_ack is not None:
                self.on_ack(fut.result(), records)
        else:
            if self.error is None:
                self.error = err
            if self.on_error is not None:
                self.on_error(err)


@dataclass(slots=True)
class _Open:
    """A batch being filled for one output topic-partition, and the input partitions whose
    outputs it holds (each of them must see its answer: none may commit past a lost batch)."""

    builder: Any
    owners: dict[TopicPartition, None] = field(default_factory=dict)  # an ordered set


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
        # (producer, output topic, partition) -> the last offset of its newest acknowledged batch
        self._acked_offsets: dict[tuple[Any, str, int], int] = {}
        self.recreated: set[str] = set()  # output topics seen deleted and re-created (see _acked)
        self._pending: dict[TopicPartition, _Pending] = {}
        # Outputs a commit in flight waits for (detached by `begin_commit`): the sends made while it
        # runs start a new _Pending, so its answer never vouches for outputs it did not wait for.
        self._committing: dict[TopicPartition, _Pending] = {}
        self._partitioner = KeyPartitioner()
        self.watch = OutputWatch()  # the sidecar's own, kept across sessions, replaces it (acks.py)

    def set_limits(self, max_message_bytes: dict[str, int]) -> None:
        """Per output topic: the smaller of --max-output-bytes and the topic's `max.message.bytes`
        less a record's batch overhead."""
        cap = self.settings.max_output_bytes
        self.limits = {t: max(1, min(cap, n - RECORD_OVERHEAD_BYTES)) for t, n in max_message_bytes.items()}

    def oldest_unacked_s(self) -> float:
        """Age of the oldest output not yet acknowledged (0 when all are): a sidecar that cannot get
        its outputs acknowledged is not ready, whatever its consumer does."""
        now = time.monotonic()
        ages = [now - p.since for p in self._tracked() if p.since is not None]
        return max(ages, default=0.0)

    def unacked(self) -> int:
        return sum(p.outstanding for p in self._tracked())

    def _tracked(self) -> list[_Pending]:
        return [*self._pending.values(), *self._committing.values()]

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
        self._committing.pop(tp, None)

    async def send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        raise NotImplementedError

    async def commit(
        self, consumer: AIOKafkaConsumer, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        """Make the partitions' outputs durable and commit their offsets; return the failures.
        Both halves at once (revocation, shutdown); the consume loop runs them apart (committer.py)."""
        await self.begin_commit(commits)
        return await self.finish_commit(consumer, commits)

    async def begin_commit(self, commits: dict[TopicPartition, Checkpoint]) -> None:
        """The part of a commit that must happen in the consume loop, at the moment the
        checkpoints were taken: every output of the records they cover is handed to the client and
        set apart as what this commit waits for (later outputs are not its to wait for)."""
        raise NotImplementedError

    async def finish_commit(
        self, consumer: AIOKafkaConsumer, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        """The waiting part (acknowledgements, checkpoint, offsets), which may run beside the loop
        (committer.py); one at a time, after `begin_commit` of the same partitions."""
        raise NotImplementedError

    def _observe(self, pending: _Pending | None) -> None:
        """A partition's outputs are durable: count them (one grouped update) and their emit
        latency (one weighted observation per fetch: the outputs of one fetch share its arrival)."""
        if pending is None:
            return
        now = time.monotonic()
        self.metrics.observe_outputs(pending.metas)
        for arrival, n in pending.arrivals:
            self.metrics.observe_emit_latency(now - arrival, n)

    def _track(self, tp: TopicPartition) -> _Pending:
        pending = self._pending.get(tp)
        if pending is None:
            on_ack = functools.partial(self._acked, source=self._producer_of(tp))
            pending = self._pending[tp] = _Pending(on_error=self._refused_send, on_ack=on_ack)
        return pending

    def _producer_of(self, tp: TopicPartition) -> Any:
        """Which producer sends the outputs of input partition `tp` (a key of `_acked`): at-least-
        once one producer sends them all (None); exactly-once, the partition's own."""
        return None

    def _acked(self, meta: Any, records: int = 1, source: Any = None) -> None:
        """Offsets of one output partition only grow: an acknowledged batch whose base offset is
        below the last offset of a batch acknowledged before means the topic was deleted and
        re-created (the broker's auto-creation brings it back the moment our producer asks for it,
        so it never looks missing): what was written to the old one is gone, and the sidecar must
        rebuild to write it again. The last offset, not the base: one batch of n outputs written at
        0 and the re-created topic's first batch at 0 again must differ (`records` is n).

        Per producer (`source`): one producer's batches to a partition are acknowledged in the
        order they were written (one request in flight per broker), but the answers of several
        producers writing to the same partition (exactly-once: one per input partition) come in
        any order, and comparing them read every overtaken answer as a re-created topic: the
        sidecar rebuilt all its partitions again and again in every exactly-once run (issue 15)."""
        key = (source, meta.topic, meta.partition)
        last = self._acked_offsets.get(key)
        if last is not None and meta.offset < last:
            self.recreated.add(meta.topic)
        self._acked_offsets[key] = meta.offset + max(records, 1) - 1

    def _refused_send(self, err: BaseException) -> None:
        """A send the broker refused for good. Overridden where that poisons a shared producer."""

    async def _append(
        self,
        producer: AIOKafkaProducer,
        tp: TopicPartition,
        items: list[Emitted],
        arrival: float | None,
        open_batches: dict[tuple[str, int], _Open],
    ) -> None:
        """Add `items` to the open batches, one per output topic-partition (`create_batch`), to be
        sent by `_ship_all` with one `send_batch` and one future each, instead of one `send()`,
        one partitioner call and one future per record. The partition of a keyed record is the
        default partitioner's (see stream/partitioner.py) over the topic's partition count as the
        producer's metadata knows it now (refreshed by the client as for `send()`). Keyless
        records (dead letters of keyless input) go, per call, to one partition drawn at random
        among those with a leader, as the Java client's sticky partitioner would place them
        (aiokafka's `send()` drew one per record). A batch that refuses a record (full: the
        producer's batch size, which fits the smallest output topic's `max.message.bytes`) is
        sent at once and a new one started; order per output partition is the order of `items`."""
        pending = self._track(tp)
        default = self.settings.max_output_bytes
        limits = self.limits
        hashes = self._partitioner
        counts: dict[str, int] = {}
        sticky: dict[str, int] = {}
        metas = pending.metas
        sizes: dict[str, int] = {}  # output bytes by record kind (output bytes per input byte)
        for item in items:
            topic = item.topic
            n = counts.get(topic)
            if n is None:
                self.watch.waiting(topic)  # finding a deleted topic's partitions waits too (acks.py)
                n = counts[topic] = len(await producer.partitions_for(topic))
            key = item.key
            if key is not None:
                partition = hashes.partition(key, n)
            else:
                partition = sticky.get(topic, -1)
                if partition < 0:
                    partition = sticky[topic] = self._keyless_partition(producer, topic, n)
            value = fit_output(item.record, limits.get(topic, default))
            dest = (topic, partition)
            batch = open_batches.get(dest)
            if batch is None:
                batch = open_batches[dest] = _Open(producer.create_batch())
            if batch.builder.append(key=key, value=value, timestamp=None) is None:  # full: send it
                del open_batches[dest]
                await self._ship(producer, dest, batch)
                batch = open_batches[dest] = _Open(producer.create_batch())
                batch.builder.append(key=key, value=value, timestamp=None)  # the first always fits
            batch.owners[tp] = None
            meta = item.meta
            metas.append(meta)
            sizes[meta.kind] = sizes.get(meta.kind, 0) + len(value)
        for kind, n in sizes.items():
            self.metrics.observe_output_bytes(kind, n)
        if arrival is not None and items:
            pending.arrivals.append((arrival, len(items)))

    async def _ship(self, producer: AIOKafkaProducer, dest: tuple[str, int], batch: _Open) -> None:
        """Send one batch; every input partition with outputs in it tracks its future. A batch the
        client would not even queue becomes a failed future, so each of them is rebuilt (and none
        commits past it) through the same path as a batch the broker refused."""
        builder = batch.builder
        builder.close()  # complete: the client sends it without lingering
        records = builder.record_count()
        try:
            fut: asyncio.Future[Any] = await producer.send_batch(builder, dest[0], partition=dest[1])
        except Exception as err:
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(err)
        self.watch.track(dest[0], fut)
        first = True
        for owner in batch.owners:
            self._track(owner).add(fut, records, acks=first)
            first = False

    async def _ship_all(self, producer: AIOKafkaProducer, open_batches: dict[tuple[str, int], _Open]) -> None:
        while open_batches:
            dest = next(iter(open_batches))
            await self._ship(producer, dest, open_batches.pop(dest))

    async def flush(self) -> None:
        """Send the batches `send` left open (at-least-once: shared by the input partitions of one
        fetch, so that each output partition gets one batch per fetch, not one per input
        partition: a second batch to a partition waits until the client has sent the first).
        The sidecar calls it once per loop turn; a commit calls it first."""

    @staticmethod
    def _keyless_partition(producer: AIOKafkaProducer, topic: str, n: int) -> int:
        available = producer.client.cluster.available_partitions_for_topic(topic)
        return random.choice(sorted(available)) if available else random.randrange(n)


class AtLeastOnce(Delivery):
    """Idempotent producer; offsets committed by the consumer only after every output is acked."""

    def __init__(self, settings: KafkaSettings, group: str, checkpoints: CheckpointStore, metrics: Metrics):
        super().__init__(settings, group, checkpoints, metrics)
        self._producer: AIOKafkaProducer | None = None
        self._poisoned = False
        self._open: dict[tuple[str, int], _Open] = {}  # filled by send, sent by flush

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
        for dest, batch in list(self._open.items()):  # its outputs are produced again by the rebuild
            batch.owners.pop(tp, None)
            if not batch.owners:
                del self._open[dest]
        if self._poisoned and self._producer is not None:
            self._poisoned = False
            old, self._producer = self._producer, None
            log.info("replacing the output producer after a refused send (new producer id)")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(old.stop(), self.settings.request_timeout_ms / 1000)
            await self.start()

    async def flush(self) -> None:
        if self._producer is not None:
            await self._ship_all(self._producer, self._open)

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
        self._open.clear()  # not committed: replayed by the next owner
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        assert self._producer is not None
        try:
            await self._append(self._producer, tp, items, arrival, self._open)
        except Exception as err:
            self.metrics.observe_produce_error()
            raise _failure(err, f"deliver {tp_key(tp)}") from err

    async def begin_commit(self, commits: dict[TopicPartition, Checkpoint]) -> None:
        await self.flush()
        for tp in commits:
            pending = self._pending.pop(tp, None)
            if pending is not None:
                self._committing[tp] = pending

    async def finish_commit(
        self, consumer: AIOKafkaConsumer, commits: dict[TopicPartition, Checkpoint]
    ) -> dict[TopicPartition, SidecarError]:
        assert self._producer is not None
        failed: dict[TopicPartition, SidecarError] = {}

        async def durable(tp: TopicPartition, cp: Checkpoint) -> None:
            pending = self._committing.get(tp)
            try:
                if pending is not None and pending.futures:
                    await asyncio.gather(*pending.futures)
                dest, key, value = self.checkpoints.record(cp)
                assert self._producer is not None
                await (await self._producer.send(dest.topic, value, key=key, partition=dest.partition))
            except Exception as err:
                self.metrics.observe_produce_error()
                self._committing.pop(tp, None)
                failed[tp] = _failure(err, f"deliver {tp_key(tp)}")

        await asyncio.gather(*(durable(tp, cp) for tp, cp in commits.items()))
        offsets = {
            tp: OffsetAndMetadata(cp.committed, cp.metadata) for tp, cp in commits.items() if tp not in failed
        }
        for tp in offsets:  # acknowledged (acks=all): emitted, whatever the commit does next
            self._observe(self._committing.pop(tp, None))
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
