"""Partitions of a sidecar: assignment, opening (replay from the commit, guided by the checkpoint),
revocation (park, not flush) and rebuilding after a delivery failure (with a backoff kept across
session restarts). See docs/DELIVERY.md for why a rebalance rebuilds by replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from stream_pairer.adapters.kafka.clients import tp_key
from stream_pairer.adapters.kafka.delivery import Backoff
from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.adapters.kafka.shared import SessionEnded, SidecarState
from stream_pairer.adapters.kafka.topics import committed_offsets
from stream_pairer.core.native import NativePipeline
from stream_pairer.errors import Fenced, OutputTooLarge, SidecarError
from stream_pairer.stream.checkpoint import Checkpoint, replay_offset
from stream_pairer.stream.partition import PartitionState

log = logging.getLogger("stream_pairer.adapters.kafka.sidecar")


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, sidecar: PartitionsMixin) -> None:
        self.sidecar = sidecar

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.sidecar._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.sidecar._on_assigned(set(assigned))


class PartitionsMixin(SidecarState):
    async def _reset_refused(self) -> None:
        """Rebuild now the partitions with a refused send (not at the next commit), and every
        partition when an output topic was deleted and re-created under us."""
        if self._delivery is None:
            return
        if self._delivery.recreated:
            await self._output_topic_recreated()
        for tp, err in self._delivery.refused().items():
            self.metrics.observe_produce_error()
            if isinstance(err, OutputTooLarge):
                await self._refresh_limits()
            await self._reset(tp, err)

    async def _output_topic_recreated(self) -> None:
        assert self._delivery is not None
        topics, self._delivery.recreated = sorted(self._delivery.recreated), set()
        committed = sorted(tp_key(tp) for tp in self.states if tp in self._committed)
        self.states_log.change(
            "outputs", "recreated " + ",".join(topics),
            f"output topic(s) {', '.join(topics)} deleted and re-created: rebuilding every partition from "
            f"its last commit, so what was written since is written again; outputs committed before "
            f"(partitions with a commit: {len(committed)}) were deleted with the topic and cannot be",
            level=logging.ERROR, topics=topics, partitions=len(self.states), committed=len(committed),
        )  # fmt: skip
        for tp in list(self.states):
            await self._reset(tp, SidecarError(f"output topic(s) {', '.join(topics)} re-created"))

    async def _reset(self, tp: TopicPartition, err: SidecarError) -> None:
        """Rebuild a partition from its last commit, after a backoff that grows with every failure
        until a commit succeeds (kept across session restarts): what was not made durable is
        produced again, but a partition that cannot deliver does not replay in a tight loop."""
        await self._drain_commit()  # never closed under a commit of its own (committer.py)
        backoff = self._partition_backoff.get(tp)
        if backoff is None:
            backoff = self._partition_backoff[tp] = Backoff(
                self.config.backoff_initial_s, self.config.backoff_max_s
            )
        delay = backoff.next()
        self._hold_until[tp] = time.monotonic() + delay
        self._outputs_watch.partition_failed(tp_key(tp), err)  # not ready until it commits (acks.py)
        first = self.states_log.change(
            f"partition {tp_key(tp)}", "stuck",
            f"outputs not delivered ({err}); rebuilding it from its last commit by replay, with backoff",
            level=logging.ERROR, attempt=backoff.attempt, retry_in_s=round(delay, 1),
        )  # fmt: skip
        if not first:
            log.warning(
                "partition %s still failing (attempt %d, next in %.1fs): %s",
                tp_key(tp),
                backoff.attempt,
                delay,
                err,
            )
        st = self.states.pop(tp, None)
        if st is not None:
            st.discard()
        self._last_commit.pop(tp, None)
        if self._delivery is not None:
            await self._delivery.close_partition(tp)
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.pause(tp)
        self._unopened.add(tp)

    def _report_missed(self, tp: TopicPartition, st: PartitionState) -> None:
        missed, st.missed = st.missed, []
        log.error(
            "partition %s: %d held event(s) were deleted from the log before they could be replayed "
            "(retention shorter than call timeout + downtime?): %s",
            tp_key(tp), len(missed), missed[:20],
        )  # fmt: skip

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before the group rebalances: commit what was processed, park the state (not flushed)."""
        async with self._lock:
            mine = {tp: st for tp, st in self.states.items() if tp in revoked}
            if mine and self._consumer is not None and self._delivery is not None:
                try:
                    await self._commit(self._consumer, mine)
                except Exception as err:  # the new owner replays from the last successful commit
                    log.warning("commit on revocation failed: %s", err)
            for tp, st in mine.items():
                del self.states[tp]
                self._parked[tp] = (st, None if st.dirty else self._last_commit.get(tp))
                self.metrics.forget_partition(tp.topic, tp.partition)
                self._start_position.pop(tp, None)
                self._committed.pop(tp, None)
                self._outputs_watch.partition_delivered(tp_key(tp))  # the next owner's to deliver now
            self._unopened -= revoked
            self._publish_assignment()
            if mine:
                log.info("revoked %s", ", ".join(sorted(tp_key(tp) for tp in mine)))

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        """After the rebalance: pause the new partitions until the loop has opened them."""
        self.metrics.observe_rebalance()
        consumer = self._consumer
        for tp in assigned:
            if tp in self.states:
                continue
            self._unopened.add(tp)
            if consumer is not None:
                consumer.pause(tp)
        self._open_retry_at = 0.0
        self._open_backoff.reset()
        log.info("assigned %s", ", ".join(sorted(tp_key(tp) for tp in assigned)) or "nothing")

    async def _open_assigned(self, consumer: AIOKafkaConsumer) -> None:
        """Open the partitions assigned but not yet opened; drop parked states no longer ours."""
        if time.monotonic() < self._open_retry_at:
            return
        async with self._lock:
            assigned = consumer.assignment()
            for tp in [tp for tp in self._parked if tp not in assigned or tp not in self._unopened]:
                if tp in self.states:
                    continue
                st, _ = self._parked.pop(tp)
                st.discard()
                if tp not in assigned and self._delivery is not None:
                    await self._delivery.close_partition(tp)
            now = time.monotonic()
            for tp in [tp for tp, until in self._hold_until.items() if until <= now or tp not in assigned]:
                del self._hold_until[tp]
            todo = sorted(
                (tp for tp in self._unopened if tp in assigned and tp not in self._hold_until), key=tp_key
            )
            self._unopened &= set(assigned)
            if not todo:
                return
            try:
                await self._unless_stopping(self._open(consumer, todo))
                self._open_backoff.reset()
            except Exception as err:
                if self._stopping.is_set():
                    return  # abandoned for the stop: nothing to retry
                if isinstance(err, Fenced):
                    raise SessionEnded(str(err)) from err
                delay = self._open_backoff.next()
                self._open_retry_at = time.monotonic() + delay
                log.warning(
                    "opening %s failed (attempt %d): %s; retrying in %.1fs",
                    ", ".join(tp_key(tp) for tp in todo), self._open_backoff.attempt,
                    classify(err, during="open partitions"), delay,
                )  # fmt: skip

    async def _unless_stopping(self, step: Coroutine[Any, Any, None]) -> None:
        """Run a step that waits on the broker (opening partitions: fencing, offsets, checkpoints),
        abandoned as soon as a stop is asked: with the broker down it would outlast the shutdown
        timeout, and the partitions it opens would be closed at once anyway."""
        task = asyncio.ensure_future(step)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise SessionEnded("stopping")
        task.result()

    async def _open(self, consumer: AIOKafkaConsumer, todo: list[TopicPartition]) -> None:
        assert self._delivery is not None and self._admin is not None and self._store is not None
        cfg = self.config
        committed = await committed_offsets(self._admin, cfg.group_id, todo)
        fresh: list[TopicPartition] = []
        for tp in todo:
            parked = self._parked.pop(tp, None)
            if parked is not None:
                st, last = parked
                if last is not None and last.matches(*committed[tp]):
                    # Nobody committed this partition since we did: our state is still its state.
                    # Its next checkpoint is a snapshot all the same: another owner may have
                    # written one meanwhile (without committing), which our chain would not extend.
                    st.checkpoint_failed()
                    self._activate(consumer, tp, st, None)
                    log.info("partition %s kept its state (reassigned to this instance)", tp_key(tp))
                    continue
                st.discard()
                await self._delivery.close_partition(tp)
            fresh.append(tp)
        if not fresh:
            return
        for tp in fresh:
            await self._delivery.open_partition(tp)  # exactly-once: fence the previous owner first
        committed = await committed_offsets(self._admin, cfg.group_id, fresh)
        chains = await self._store.latest(fresh)
        newest = {tp: None if chain is None else chain.newest for tp, chain in chains.items()}
        fresh = await self._refuse_rewound(consumer, fresh, committed, newest)
        for tp in fresh:
            offset, metadata = committed[tp]
            chain = chains[tp]
            cp: Checkpoint | None = None
            if chain is not None:
                head: Checkpoint | None = chain.newest
                if head is not None and not head.matches(offset, metadata) and cfg.exactly_once:
                    offset, metadata, head = await self._await_stable(tp, head, offset, metadata)
                if head is not None and head.matches(offset, metadata):
                    cp = chain.state(len(chain.deltas))
                elif not cfg.exactly_once:
                    # At-least-once: a crash between writing a delta and committing the offset
                    # leaves the commit naming an earlier state of the chain, still exact.
                    cp = chain.find(offset, metadata)
                if cp is None:
                    log.info(
                        "partition %s: checkpoint (offset %d) does not match the committed offset %s: "
                        "plain replay",
                        tp_key(tp), chain.newest.committed, offset,
                    )  # fmt: skip
            pipeline = NativePipeline(
                cfg.engine, cfg.formats, tagger=cfg.tagger, observer=self.metrics, routed=True
            )
            start = replay_offset(offset, metadata, cp)  # before the commit when it held events back
            st = PartitionState(
                tp.topic, tp.partition, pipeline, cfg.outputs(self._origin.get(tp.topic, tp.topic)),
                start_offset=start, restore=cp, wall_ms=self._wall() * 1000,
                lineage_headers=cfg.repartition, commit_processed=cfg.commit_processed,
            )  # fmt: skip
            if cp is not None:
                self._last_commit[tp] = cp
            if offset is not None:
                self._committed[tp] = offset
            self._activate(consumer, tp, st, start)
            if cp is None:
                how = "plain replay" if offset is not None else "no commit yet"
            elif st.restoring:
                how = f"replaying {len(cp.held)} held event(s) up to offset {cp.processed}"
            else:
                how = "nothing to replay"
            log.info("partition %s opened at offset %s (%s)", tp_key(tp), offset, how)

    async def _refuse_rewound(
        self,
        consumer: AIOKafkaConsumer,
        tps: list[TopicPartition],
        committed: dict[TopicPartition, tuple[int | None, str]],
        checkpoints: dict[TopicPartition, Checkpoint | None],
    ) -> list[TopicPartition]:
        """A committed offset past the partition's log end means the input topic was deleted and
        re-created (or truncated): its new records reuse offsets the old lineage already names, so
        outputs would collide in audits and warehouse joins. Kafka drops a deleted topic's group
        offsets, so the sign is also "no commit, but our last checkpoint was committed past the log
        end". Refused, said once, retried with the partition's backoff, until an operator resets
        the group's offsets (docs/OPERATIONS.md); the other partitions go on."""
        ends = await consumer.end_offsets(tps)
        ok = []
        for tp in tps:
            offset, end = committed[tp][0], ends.get(tp)
            cp = checkpoints.get(tp)
            if offset is None and cp is not None:
                offset = cp.committed  # the incarnation our checkpoint was taken on
            if offset is not None and end is not None and offset > end:
                backoff = self._partition_backoff.setdefault(
                    tp, Backoff(self.config.backoff_initial_s, self.config.backoff_max_s)
                )
                self._hold_until[tp] = time.monotonic() + backoff.next()
                self._unopened.add(tp)
                await self._delivery_close(tp)
                self.states_log.change(
                    f"partition {tp_key(tp)}", "refused: rewound",
                    f"committed offset {offset} is past the log end {end}: the topic was deleted and "
                    f"re-created (or truncated); not consuming it until the group's offsets are reset "
                    f"(kafka-consumer-groups.sh --reset-offsets --group {self.config.group_id} "
                    f"--topic {tp.topic} --to-earliest --execute)",
                    level=logging.ERROR, committed=offset, log_end=end,
                )  # fmt: skip
                continue
            ok.append(tp)
        return ok

    async def _delivery_close(self, tp: TopicPartition) -> None:
        if self._delivery is not None:
            await self._delivery.close_partition(tp)

    async def _await_stable(
        self, tp: TopicPartition, cp: Checkpoint, offset: int | None, metadata: str
    ) -> tuple[int | None, str, Checkpoint | None]:
        """Exactly-once: the checkpoint and the offset were committed in one transaction, but the
        group coordinator may serve the previous offset for a moment after the commit marker (our
        client predates KIP-447's stable offset fetch). Wait briefly for them to agree."""
        assert self._admin is not None
        deadline = time.monotonic() + self.config.checkpoint_match_wait_s
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            offset, metadata = (await committed_offsets(self._admin, self.config.group_id, [tp]))[tp]
            if cp.matches(offset, metadata):
                return offset, metadata, cp
        return offset, metadata, None

    def _activate(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, st: PartitionState, offset: int | None
    ) -> None:
        self.states[tp] = st
        self._unopened.discard(tp)
        if offset is None:
            # No commit yet: a partition rebuilt before its first commit starts again where the
            # consumer first started it (the --auto-offset-reset position), not where the
            # consumer's fetch position happens to be (past the records whose outputs were lost).
            offset = st.next_offset if st.next_offset is not None else self._start_position.get(tp)
        if offset is not None:
            consumer.seek(tp, offset)
        consumer.resume(tp)
        self._publish_assignment()
