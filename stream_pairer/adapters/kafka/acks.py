"""Since when the sidecar's outputs have not been acknowledged: what /readyz is decided on (issue 25).

Why a watch of its own, kept by the sidecar across partition rebuilds and sessions: the delivery's
per-partition bookkeeping is thrown away every time a partition is rebuilt (a failed send resets
it), so "the oldest send still outstanding" started from zero after each rebuild and a sidecar
whose dead-letter topic was gone answered 200 for most of the outage, between one failure and the
next. Here a clock starts when an output is first handed over for a topic (before the client has
even found the topic's partitions, which can itself wait a request timeout) and stops only when
outputs to that topic are acknowledged again: a failed batch keeps it running through the rebuild,
the backoff and the replay. A partition rebuilt after a failure (a refused send, an aborted
transaction) keeps its own clock until it commits again.

Everything is cleared at once only when nothing is owed: no partition waiting to commit after a
failure, no batch outstanding, every partition committed (`settle`). That covers outputs whose
partition moved to another instance: they are that instance's to deliver now.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any


class OutputWatch:
    """Per output topic (and per failed input partition): since when outputs await acknowledgement."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: dict[str, float] = {}
        self._cause: dict[str, str] = {}
        self._outstanding: dict[str, int] = {}

    def waiting(self, topic: str) -> None:
        """Outputs for `topic` were handed over (their clock starts unless it already runs)."""
        self._since.setdefault(f"outputs to {topic}", self._clock())

    def track(self, topic: str, fut: asyncio.Future[Any]) -> None:
        """A batch for `topic` is in flight; its answer stops the clock (all answered) or names
        the cause (refused)."""
        self.waiting(topic)
        key = f"outputs to {topic}"
        self._outstanding[key] = self._outstanding.get(key, 0) + 1
        fut.add_done_callback(functools.partial(self._answered, key))

    def _answered(self, key: str, fut: asyncio.Future[Any]) -> None:
        left = self._outstanding[key] = self._outstanding.get(key, 1) - 1
        err = None if fut.cancelled() else fut.exception()
        if err is not None:
            self.failed(key, err)
        elif left <= 0 and not fut.cancelled():
            self._clear(key)

    def failed(self, key: str, err: BaseException | str) -> None:
        """Not acknowledged for `err`: the clock goes on until outputs flow again."""
        self._since.setdefault(key, self._clock())
        self._cause[key] = err if isinstance(err, str) else f"{type(err).__name__}: {err}"

    def partition_failed(self, name: str, err: BaseException | str) -> None:
        self.failed(f"outputs of partition {name}", err)

    def partition_delivered(self, name: str) -> None:
        """The partition committed: everything it emitted is acknowledged."""
        self._clear(f"outputs of partition {name}")

    def settle(self, *, all_committed: bool) -> None:
        """Nothing in flight and (`all_committed`) every owned partition committed: nothing is owed."""
        if not all_committed or any(self._outstanding.values()):
            return
        if any(k.startswith("outputs of partition ") for k in self._since):
            return
        self._since.clear()
        self._cause.clear()

    def stuck(self) -> tuple[float, str] | None:
        """(age of the oldest, what and why) of the outputs not acknowledged, or None. Those with a
        cause (refused) are named first: a topic that is gone holds back the others' batches too."""
        if not self._since:
            return None
        age = self._clock() - min(self._since.values())
        keys = sorted(self._since, key=lambda k: (k not in self._cause, self._since[k]))
        named = [k + (f" ({self._cause[k]})" if k in self._cause else "") for k in keys[:3]]
        more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
        return age, f"not acknowledged for {age:.0f}s: {'; '.join(named)}{more}"

    def _clear(self, key: str) -> None:
        self._since.pop(key, None)
        self._cause.pop(key, None)
