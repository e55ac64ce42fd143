"""Replay checkpoints on Kafka: where each partition's checkpoint lives, and reading the latest back.

The checkpoint itself (what is held, the codec) is pure and lives in stream/checkpoint.py; this
module only addresses and reads it with aiokafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_pairer.adapters.kafka.clients import KafkaSettings, make_consumer, tp_key
from stream_pairer.adapters.kafka.topics import render_template
from stream_pairer.errors import BrokerUnavailable, CheckpointError
from stream_pairer.stream import checkpoint as ckpt
from stream_pairer.stream.checkpoint import Checkpoint

log = logging.getLogger("stream_pairer.kafka")


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
        return render_template(self.template, {"topic": input_topic, "group": self.group})

    def address(self, tp: TopicPartition) -> TopicPartition:
        topic = self.topic_for(tp.topic)
        return TopicPartition(topic, tp.partition % self.partitions.get(topic, 1))

    def record(self, cp: Checkpoint) -> tuple[TopicPartition, bytes, bytes]:
        dest = self.address(TopicPartition(cp.topic, cp.partition))
        return dest, ckpt.key(cp.group, cp.topic, cp.partition), ckpt.encode(cp)

    async def start(self) -> None:
        if self._reader is None:
            reader = make_consumer(
                self.settings,
                "checkpoints",
                group_id=None,
                isolation_level="read_committed",
                fetch_max_wait_ms=50,  # reads are short and targeted: do not park in a long poll
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
