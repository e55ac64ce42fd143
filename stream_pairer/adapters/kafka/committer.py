"""Commits beside the consume loop, not inside it (issue 25).

Why: the loop used to await each commit (at-least-once: every output's acknowledgement, the
checkpoint's, then the offset commit's round trip; exactly-once: a whole transaction) before its
next fetch. Records that arrived meanwhile waited in the broker for the commit to end: at 5k
records/s the stage histogram showed the commit, and the fetch wait it caused, as most of the
arrival-to-ack p99 (BENCHMARKS.md, issue 25). Now a commit is split in two:

* `begin` runs in the loop, under its lock, at one instant: each partition's checkpoint is taken and
  every output of the records it covers is handed to the client and set apart (delivery.py
  `begin_commit`): that is what this commit waits for, and nothing emitted later;
* `finish` (the waiting: acknowledgements, checkpoint, offsets or the transaction) runs as a task
  beside the loop, which goes on fetching, pairing and producing. One commit at a time: the next
  begins once the previous has finished and `--commit-interval` has passed since it began, so the
  checkpoint chain (snapshot + deltas) is written in order.

The outcome is applied by the loop, under its lock, at its next turn (`_settle_commit`): the same
rules as before (a retriable offset-commit failure at-least-once is retried by the next commit; any
other failure rebuilds the partition from its last commit after a backoff that only a successful
commit resets, so it never becomes a replay loop). Whatever changes a partition's ownership or
rebuilds it (revocation, a reset, the shutdown's final commit) first waits for the commit in flight
(`_drain_commit`): a partition is never closed under a commit of its own. The committed offset
still never passes an unacknowledged output: `finish` commits a checkpoint's offset only after every
output set apart by its `begin` is acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_pairer.adapters.kafka.clients import tp_key
from stream_pairer.adapters.kafka.shared import SessionEnded, SidecarState
from stream_pairer.errors import CommitFailed, Fenced, OutputTooLarge, SidecarError
from stream_pairer.stream.checkpoint import Checkpoint, new_token
from stream_pairer.stream.partition import PartitionState

log = logging.getLogger("stream_pairer.adapters.kafka.sidecar")

Failures = dict[TopicPartition, SidecarError]


@dataclass(slots=True)
class Begun:
    """One commit between its `begin` and the application of its outcome."""

    todo: dict[TopicPartition, Checkpoint]
    states: dict[TopicPartition, PartitionState]  # the state objects the checkpoints were taken of
    started_s: float = field(default_factory=time.monotonic)


class BackgroundCommit:
    """The one commit in flight beside the loop, if any, and when the next one is due.

    Pure scheduling, no Kafka: `finish` is any awaitable returning the failures, which is what the
    unit tests give it (a slow one, a failing one)."""

    def __init__(self, interval_s: float, now_s: float) -> None:
        self.interval_s = interval_s  # 0: a new commit as soon as the previous one has finished
        self.next_s = now_s + interval_s
        self._task: asyncio.Task[Failures] | None = None
        self._begun: Begun | None = None

    @property
    def busy(self) -> bool:
        return self._task is not None

    @property
    def task(self) -> asyncio.Task[Failures] | None:
        return self._task

    def partitions(self) -> set[TopicPartition]:
        return set(self._begun.todo) if self._begun is not None else set()

    def finished(self) -> bool:
        """A commit has ended and its outcome waits to be applied."""
        return self._task is not None and self._task.done()

    def due(self, now_s: float) -> bool:
        """No commit in flight and the interval since the last one began has passed."""
        return self._task is None and now_s >= self.next_s

    def start(self, begun: Begun, finish: Awaitable[Failures]) -> None:
        assert self._task is None, "one commit at a time"
        self._begun = begun
        self.next_s = begun.started_s + self.interval_s
        self._task = asyncio.ensure_future(finish)

    async def take(self) -> tuple[Begun, Failures] | None:
        """Wait for the commit in flight (if any) to end and hand over its outcome; the slot is
        free from here on. An exception of `finish` is raised here."""
        task, begun = self._task, self._begun
        if task is None or begun is None:
            return None
        try:
            failed = await asyncio.shield(task)
        finally:
            if task.done():
                self._task = self._begun = None
        return begun, failed

    async def cancel(self) -> None:
        """The session ends: the clients the commit waits on are being closed."""
        task, self._task, self._begun = self._task, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class CommitterMixin(SidecarState):
    """The sidecar's commit steps (once in sidecar.py's loop, awaited there)."""

    _committer: BackgroundCommit

    def _begin_checkpoints(
        self, states: dict[TopicPartition, PartitionState], *, force: bool = False
    ) -> Begun | None:
        """Each partition with something new (or all of `states` when forced): its checkpoint."""
        todo: dict[TopicPartition, Checkpoint] = {}
        for tp, st in states.items():
            if not (st.dirty or force):
                continue
            cp = st.checkpoint_record(self.config.group_id, new_token())  # a snapshot or a delta
            if cp is not None:
                todo[tp] = cp
                st.dirty = False  # set again by what it processes next, or by this commit failing
        if not todo:
            return None
        return Begun(todo, {tp: states[tp] for tp in todo})

    async def _commit(
        self,
        consumer: AIOKafkaConsumer,
        states: dict[TopicPartition, PartitionState],
        *,
        force: bool = False,
    ) -> None:
        """Commit now and wait (revocation, shutdown): after the one in flight, if any."""
        await self._drain_commit()
        begun = self._begin_checkpoints(states, force=force)
        if begun is None:
            return
        assert self._delivery is not None
        await self._delivery.begin_commit(begun.todo)
        failed = await self._delivery.finish_commit(consumer, begun.todo)
        await self._commit_done(begun, failed)

    async def _commit_in_background(self, consumer: AIOKafkaConsumer) -> None:
        """The periodic commit, from the loop (under its lock): begin it here, finish it beside."""
        begun = self._begin_checkpoints(self.states)
        if begun is None:
            return
        assert self._delivery is not None
        await self._delivery.begin_commit(begun.todo)
        self._committer.start(begun, self._delivery.finish_commit(consumer, begun.todo))

    async def _settle_commit(self) -> None:
        """Apply the outcome of a commit that has finished (the loop, under its lock)."""
        if self._committer.finished():
            await self._drain_commit()

    async def _drain_commit(self) -> None:
        """Wait for the commit in flight and apply its outcome. An error it raised (not a failure it
        reports per partition) ends the session, as it did when the loop awaited it."""
        outcome = await self._committer.take()
        if outcome is not None:
            await self._commit_done(*outcome)

    async def _commit_done(self, begun: Begun, failed: Failures) -> None:
        self.metrics.stages.observe("commit", time.monotonic() - begun.started_s)
        states = begun.states
        for tp, cp in begun.todo.items():
            err = failed.get(tp)
            done = states.get(tp)
            if err is None:
                self._last_commit[tp] = cp
                self._committed[tp] = cp.committed
                self._outputs_watch.partition_delivered(tp_key(tp))
                backoff = self._partition_backoff.pop(tp, None)
                if backoff is not None:
                    self.states_log.change(
                        f"partition {tp_key(tp)}", "ok", "delivering again", attempts=backoff.attempt
                    )
                self._session_backoff.reset()  # progress: the next session failure starts from attempt 1
                continue
            if done is not None:
                done.dirty = True  # its checkpoint was not committed: the next commit retries
                if self.config.exactly_once or not isinstance(err, CommitFailed):
                    # The record may be unreadable (a failed send, an aborted transaction): the next
                    # one is a snapshot. At-least-once CommitFailed: it was acknowledged, the chain goes on.
                    done.checkpoint_failed()
            if isinstance(err, Fenced):
                raise SessionEnded(str(err))
            if not self.config.exactly_once and isinstance(err, CommitFailed):
                # At-least-once: outputs are acknowledged, only the offset commit failed; no replay needed.
                log.warning(
                    "offset commit of %s failed (outputs delivered; next commit retries): %s", tp_key(tp), err
                )
            elif self.states.get(tp) is done:  # still this state (not reset or revoked meanwhile)
                if isinstance(err, OutputTooLarge):
                    await self._refresh_limits()
                await self._reset(tp, err)
