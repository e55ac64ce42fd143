"""Stopping within --shutdown-timeout, whatever the broker does: the final commit gets what is left
of the timeout, clients are closed together, and what could not be committed is named in one line
(it replays from the last commit: at-least-once duplicates, nothing twice in exactly-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from stream_pairer.adapters.kafka.clients import tp_key
from stream_pairer.adapters.kafka.shared import SessionEnded, SidecarState, cancelling
from stream_pairer.core.vocab import OrphanReason
from stream_pairer.errors import SidecarError

log = logging.getLogger("stream_pairer.adapters.kafka.sidecar")


class ShutdownMixin(SidecarState):
    def _remaining(self, reserve_s: float = 0.0) -> float:
        """Seconds left before the stop deadline (less `reserve_s`), or a request timeout if not stopping."""
        if self._stop_deadline is None:
            return self.config.request_timeout_ms / 1000
        return max(0.05, self._stop_deadline - time.monotonic() - reserve_s)

    def _abandon(self, why: str) -> None:
        """Say which partitions a stop leaves uncommitted (their outputs since the last commit are
        replayed by the next owner: at-least-once duplicates, or nothing in exactly-once)."""
        committing = self._committer.partitions()  # taken, not known committed
        pending = sorted(tp_key(tp) for tp, st in self.states.items() if st.dirty or tp in committing)
        if self._said_abandoned and not pending:
            return  # already said (the clients' close is what ran late)
        self._said_abandoned = True
        self.uncommitted = pending
        if pending:
            log.warning(
                "stopping: %s; %d partition(s) not committed (replayed from their last commit by the "
                "next owner): %s", why, len(pending), ", ".join(pending),
                extra={"fields": {"uncommitted": len(pending)}},
            )  # fmt: skip
        else:
            log.info("stopping: %s; nothing was left to commit", why)

    async def _shutdown(self, consumer: AIOKafkaConsumer) -> None:
        """SIGTERM path: finish, (optionally flush), make durable, commit; then leave the group. The
        commit gets the time left before --shutdown-timeout less what closing the clients needs:
        with the broker down it cannot succeed, and the process must still exit in time."""
        async with self._lock:
            dirty = sum(1 for st in self.states.values() if st.dirty)
            # The periodic commit in flight (committer.py): with the broker up it answers at once,
            # and giving it up would leave its partitions to be replayed by the next owner.
            if self._committer.busy:
                if not await self._finished_in_time(self._committer.all_ended()):
                    self._abandon("the broker did not answer the last commit")
                    return
                with contextlib.suppress(SidecarError, SessionEnded):  # its failures: said below
                    await self._drain_commit()
            try:
                await asyncio.wait_for(self._flush_and_commit(consumer), self._remaining(reserve_s=2.0))
            except (
                TimeoutError,
                SidecarError,
                KafkaError,
                OSError,
                SessionEnded,
                asyncio.CancelledError,
            ) as err:
                if isinstance(err, asyncio.CancelledError) and cancelling():
                    raise
                self._abandon(f"the final commit did not complete ({type(err).__name__}: {err})")
                return
            left = [tp_key(tp) for tp, st in self.states.items() if st.dirty]
            if left:
                self._abandon("the final commit failed for some partitions")
                return
            flushed = " (held events flushed as orphans)" if self.config.flush_on_shutdown else ""
            log.info("stopping: %d of %d partition(s) had work to commit%s", dirty, len(self.states), flushed)

    async def _finished_in_time(self, task: asyncio.Future[Any] | None) -> bool:
        """Wait for a periodic commit the loop gave up on, within what is left of the stop budget
        (less what closing the clients needs); True when it finished without an error."""
        if task is None:
            return True
        if not task.done():
            await asyncio.wait({task}, timeout=self._remaining(reserve_s=2.0))
        return task.done() and not task.cancelled() and task.exception() is None

    async def _flush_and_commit(self, consumer: AIOKafkaConsumer) -> None:
        if self.config.flush_on_shutdown:
            for tp, st in list(self.states.items()):
                await self._send(tp, st.flush(OrphanReason.SHUTDOWN.value), None)
        await self._commit(consumer, self.states)

    async def _close_session(self) -> None:
        """Release every client; unflushed state is dropped (it is rebuilt by replay)."""
        await self._committer.cancel()  # a commit in flight waits on the clients closed below
        for tp, st in list(self.states.items()):
            st.discard()
            self.metrics.forget_partition(tp.topic, tp.partition)
        for st, _ in self._parked.values():
            st.discard()
        self.states.clear()
        self._parked.clear()
        self._unopened.clear()
        self._last_commit.clear()
        self._committed.clear()
        self._start_position.clear()  # a new consumer applies --auto-offset-reset itself
        self._hold_until.clear()
        self._publish_assignment()
        consumer, self._consumer = self._consumer, None
        delivery, self._delivery = self._delivery, None
        store, self._store = self._store, None
        admin, self._admin = self._admin, None
        rekeyer, self._rekeyer = self._rekeyer, None
        if rekeyer is not None:
            if not rekeyer.done() and not self._stopping.is_set():
                rekeyer.cancel()  # a failed session; on a graceful stop it finishes its batch and commits
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(rekeyer, min(15.0, self._remaining(0.5)))
        closers = [
            c
            for c in (
                consumer.stop if consumer else None,
                delivery.stop if delivery else None,
                store.stop if store else None,
                admin.close if admin else None,
            )
            if c is not None
        ]
        # Together, not one after the other: with the broker gone each waits its own timeout, and
        # a stop must end within --shutdown-timeout.
        budget = min(10.0, self._remaining(0.6))
        await asyncio.gather(*(self._close_one(c, budget) for c in closers))

    async def _close_one(self, closer: Callable[[], Coroutine[Any, Any, Any]], budget: float) -> None:
        try:
            await asyncio.wait_for(closer(), budget)
        except (Exception, asyncio.CancelledError) as err:
            # A client's stop can re-raise the cancellation of its own internal tasks (aiokafka's
            # sender, with the broker gone): that is not ours to propagate.
            if cancelling():
                raise
            log.debug("closing a Kafka client failed: %s", type(err).__name__)
