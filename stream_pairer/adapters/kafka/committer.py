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
  beside the loop, which goes on fetching, pairing and producing. One commit at a time per lane
  (at-least-once: all partitions together, one OffsetCommit; exactly-once: each partition, its own
  transaction): the next begins once the previous has finished and `--commit-interval` has passed
  since it began, so each checkpoint chain (snapshot + deltas) is written in order.

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
from collections.abc import Awaitable, Hashable
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
    """The commits in flight beside the loop, one per lane at most, and when each lane is due.

    A lane is what commits together: at-least-once, every partition (one OffsetCommit for all);
    exactly-once, each input partition (its own producer and transaction), so a slow transaction
    of one partition does not hold back the commits of the others. Within a lane, one commit at a
    time, in order (a checkpoint chain is extended by one commit after the other).

    Pure scheduling, no Kafka: `finish` is any awaitable returning the failures, which is what the
    unit tests give it (a slow one, a failing one)."""

    def __init__(self, interval_s: float, now_s: float) -> None:
        self.interval_s = interval_s  # 0: a new commit as soon as the lane's previous one has ended
        self._first_s = now_s + interval_s
        self._next_s: dict[Hashable, float] = {}
        self._flight: dict[Hashable, tuple[asyncio.Future[Failures], Begun]] = {}

    @property
    def busy(self) -> bool:
        return bool(self._flight)

    def all_ended(self) -> asyncio.Future[list[Failures]]:
        """Resolves when every commit now in flight has ended (raises the first error)."""
        ended = asyncio.gather(*(task for task, _ in self._flight.values()))
        ended.add_done_callback(lambda f: f.cancelled() or f.exception())  # read by `take`, not here
        return ended

    def partitions(self) -> set[TopicPartition]:
        return {tp for _, begun in self._flight.values() for tp in begun.todo}

    def finished(self) -> bool:
        """A commit has ended and its outcome waits to be applied."""
        return any(task.done() for task, _ in self._flight.values())

    def due(self, now_s: float, lane: Hashable = None) -> bool:
        """No commit in flight in the lane and the interval since its last one began has passed."""
        return lane not in self._flight and now_s >= self._next_s.get(lane, self._first_s)

    def start(self, begun: Begun, finish: Awaitable[Failures], lane: Hashable = None) -> None:
        assert lane not in self._flight, "one commit at a time per lane"
        self._next_s[lane] = begun.started_s + self.interval_s
        self._flight[lane] = (asyncio.ensure_future(finish), begun)

    async def take(self, *, ended_only: bool = False) -> list[tuple[Begun, Failures]]:
        """Wait for the commits in flight (`ended_only`: only those that have ended) and hand over
        their outcomes; their lanes are free from here on. An exception of a `finish` is raised
        here (the outcomes of the other lanes wait for the next call)."""
        out = []
        for lane, (task, begun) in list(self._flight.items()):
            if ended_only and not task.done():
                continue
            try:
                failed = await asyncio.shield(task)
            finally:
                if task.done():
                    self._flight.pop(lane, None)
            out.append((begun, failed))
        return out

    async def cancel(self) -> None:
        """The session ends: the clients the commits wait on are being closed."""
        flight, self._flight = self._flight, {}
        for task, _ in flight.values():
            task.cancel()
        for task, _ in flight.values():
            with contextlib.suppress(BaseException):
                await task


class CommitterMixin(SidecarState):
    """The sidecar's commit steps (once in sidecar.py's loop, awaited there)."""

    _committer: BackgroundCommit

    def _begin_checkpoints(self, states: dict[TopicPartition, PartitionState]) -> Begun | None:
        """Each partition with something new: its checkpoint."""
        todo: dict[TopicPartition, Checkpoint] = {}
        for tp, st in states.items():
            if not st.dirty:
                continue
            cp = st.checkpoint_record(self.config.group_id, new_token())  # a snapshot or a delta
            if cp is not None:
                todo[tp] = cp
                st.dirty = False  # set again by what it processes next, or by this commit failing
        if not todo:
            return None
        return Begun(todo, {tp: states[tp] for tp in todo})

    async def _commit(self, consumer: AIOKafkaConsumer, states: dict[TopicPartition, PartitionState]) -> None:
        """Commit now and wait (revocation, shutdown): after those in flight, if any."""
        await self._drain_commit()
        begun = self._begin_checkpoints(states)
        if begun is None:
            return
        assert self._delivery is not None
        await self._delivery.begin_commit(begun.todo)
        failed = await self._delivery.finish_commit(consumer, begun.todo)
        await self._commit_done(begun, failed)

    async def _commit_in_background(self, consumer: AIOKafkaConsumer) -> None:
        """The periodic commits that are due, from the loop (under its lock): each begins here and
        finishes beside the loop. Exactly-once, each partition in its own lane (BackgroundCommit)."""
        committer, now = self._committer, time.monotonic()
        if self.config.exactly_once:
            lanes = [({tp: st}, tp) for tp, st in self.states.items() if st.dirty and committer.due(now, tp)]
        else:
            lanes = [(self.states, None)] if committer.due(now) else []
        for states, lane in lanes:
            begun = self._begin_checkpoints(states)
            if begun is None:
                continue
            assert self._delivery is not None
            await self._delivery.begin_commit(begun.todo)
            committer.start(begun, self._delivery.finish_commit(consumer, begun.todo), lane)

    async def _settle_commit(self) -> None:
        """Apply the outcomes of the commits that have ended (the loop, under its lock)."""
        if self._committer.finished():
            for outcome in await self._committer.take(ended_only=True):
                await self._commit_done(*outcome)

    async def _drain_commit(self) -> None:
        """Wait for the commits in flight and apply their outcomes. An error one raised (not a
        failure it reports per partition) ends the session, as it did when the loop awaited it."""
        for outcome in await self._committer.take():
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
