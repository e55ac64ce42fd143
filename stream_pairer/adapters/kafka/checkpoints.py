"""Replay checkpoints on Kafka: where each partition's checkpoint lives, and reading the latest back.

The checkpoint itself (what is held, the codec, the snapshot + delta chain) is pure and lives in
stream/checkpoint.py; this module only addresses and reads it with aiokafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_pairer.adapters.kafka.clients import KafkaSettings, make_consumer, tp_key
from stream_pairer.adapters.kafka.topics import render_template
from stream_pairer.errors import BrokerUnavailable
from stream_pairer.stream import checkpoint as ckpt
from stream_pairer.stream.checkpoint import Chain, Checkpoint

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
        """Where and how `cp` is written: a snapshot under its partition's key, a delta under that
        key's slot `seq` (see checkpoint.key), both to the same checkpoint partition, so one read
        back finds a snapshot and the deltas after it."""
        dest = self.address(TopicPartition(cp.topic, cp.partition))
        return dest, ckpt.key(cp.group, cp.topic, cp.partition, cp.seq), ckpt.encode(cp)

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
    ) -> dict[TopicPartition, Chain | None]:
        """The live checkpoint chain (newest snapshot and the deltas after it) of each partition for
        this group (None: first run, or unreadable). All partitions are read back together, in one
        pass over their checkpoint partitions, so opening many partitions costs about as much as
        opening one."""
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
    ) -> dict[TopicPartition, Chain | None]:
        """Reads each checkpoint partition back from its end, in growing windows, until the newest
        snapshot of every wanted input partition is found: every record of theirs from there on
        (the snapshot, its deltas, other epochs' leftovers) is then in hand, whatever compaction
        removed before it."""
        wanted: dict[TopicPartition, dict[bytes, TopicPartition]] = {}  # checkpoint tp -> key -> input tp
        for tp in tps:
            wanted.setdefault(self.address(tp), {})[ckpt.key(self.group, tp.topic, tp.partition)] = tp
        where = list(wanted)
        reader.assign(where)
        begins = await reader.beginning_offsets(where)
        ends = await reader.end_offsets(where)
        found: dict[TopicPartition, list[tuple[int, bytes, bytes | None]]] = {tp: [] for tp in tps}
        have_snapshot: set[TopicPartition] = set()
        hi = dict(ends)
        window = 64
        todo = [w for w in where if hi[w] > begins[w]]
        while todo:
            lo = {w: max(begins[w], hi[w] - window) for w in todo}
            await self._read_window(reader, where, todo=todo, lo=lo, hi=hi, wanted=wanted, found=found)
            have_snapshot.update(
                tp for tp, recs in found.items() if any(ckpt.snapshot_key(k)[1] == 0 for _, k, _ in recs)
            )
            # Inputs with no snapshot in their window yet: look further back in that checkpoint partition.
            todo = [
                w
                for w in todo
                if any(t not in have_snapshot for t in wanted[w].values()) and lo[w] > begins[w]
            ]
            for w in todo:
                hi[w] = lo[w]
            window *= 4
        return {tp: _chain(tp, found[tp]) for tp in tps}

    @staticmethod
    async def _read_window(
        reader: AIOKafkaConsumer,
        where: list[TopicPartition],
        *,
        todo: list[TopicPartition],
        lo: dict[TopicPartition, int],
        hi: dict[TopicPartition, int],
        wanted: dict[TopicPartition, dict[bytes, TopicPartition]],
        found: dict[TopicPartition, list[tuple[int, bytes, bytes | None]]],
    ) -> None:
        """Read `[lo, hi)` of each checkpoint partition in `todo`: every record of a wanted input
        partition (its snapshots and deltas), added to `found` with its offset."""
        for w in todo:
            reader.seek(w, lo[w])
        reader.pause(*[w for w in where if w not in lo])
        reader.resume(*todo)
        while True:
            behind = [w for w in todo if await reader.position(w) < hi[w]]
            if not behind:
                return
            for w, recs in (await reader.getmany(*behind, timeout_ms=1000)).items():
                for rec in recs:
                    if rec.key is None or not lo[w] <= rec.offset < hi[w]:
                        continue
                    target = wanted[w].get(ckpt.snapshot_key(rec.key)[0])
                    if target is not None:
                        found[target].append((rec.offset, rec.key, rec.value))


def _chain(tp: TopicPartition, records: list[tuple[int, bytes, bytes | None]]) -> Chain | None:
    """The records found, in log order, as a chain; None for none found or no readable snapshot
    (plain replay)."""
    if not records:
        return None
    records.sort(key=lambda r: r[0])
    chain = ckpt.read_chain((k, v) for _, k, v in records)
    if chain is None:
        log.warning("checkpoint of %s ignored (no readable snapshot: plain replay instead)", tp_key(tp))
    return chain
