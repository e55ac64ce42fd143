"""The state a sidecar's parts share: the fields `Sidecar.__init__` sets, declared once for the mixins.

Why mixins: the sidecar is one object with one lock over its partition table, but its concerns
(health and gauges in health.py; assignment, opening and rebuilding partitions in partitions.py;
sessions and the loop in sidecar.py) read better apart. Each mixin declares what it uses here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from stream_pairer.adapters.kafka.acks import OutputWatch
from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings
from stream_pairer.adapters.kafka.delivery import Backoff, Delivery
from stream_pairer.adapters.kafka.logs import StateLog
from stream_pairer.errors import SessionEnded, SidecarError
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.partition import Emitted, PartitionState

if TYPE_CHECKING:
    from stream_pairer.adapters.kafka.committer import BackgroundCommit
    from stream_pairer.adapters.kafka.config import SidecarConfig


def cancelling() -> bool:
    """True when the current task itself is being cancelled (not a CancelledError bubbling up
    from a client's internal task)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


__all__ = ["SessionEnded", "SidecarState", "cancelling"]


class SidecarState:
    config: SidecarConfig
    metrics: Metrics
    _wall: Callable[[], float]
    states: dict[TopicPartition, PartitionState]
    _parked: dict[TopicPartition, tuple[PartitionState, Checkpoint | None]]
    _last_commit: dict[TopicPartition, Checkpoint]
    _committed: dict[TopicPartition, int]  # the group's committed offset (lag is measured from it)
    _unopened: set[TopicPartition]
    _start_position: dict[TopicPartition, int]
    _open_backoff: Backoff
    _open_retry_at: float
    _session_backoff: Backoff
    _partition_backoff: dict[TopicPartition, Backoff]
    _hold_until: dict[TopicPartition, float]
    states_log: StateLog
    _lock: asyncio.Lock
    _stopping: asyncio.Event
    _task: asyncio.Task[None] | None
    _consumer: AIOKafkaConsumer | None
    _admin: AIOKafkaAdminClient | None
    _delivery: Delivery | None
    _outputs_watch: OutputWatch  # since when outputs are not acknowledged (acks.py, /readyz)
    _store: CheckpointStore | None
    _origin: dict[str, str]
    _last_loop_s: float
    _connected: bool
    refused: str | None
    last_error: str
    settings: KafkaSettings
    _rekeyer: asyncio.Task[None] | None
    _rekey_backoff: Backoff
    _output_topics: list[str]
    _stop_deadline: float | None
    _committer: BackgroundCommit  # the commit beside the loop (committer.py)
    _said_abandoned: bool
    uncommitted: list[str]

    async def _commit(self, consumer: AIOKafkaConsumer, states: dict[TopicPartition, PartitionState]) -> None:
        raise NotImplementedError

    async def _drain_commit(self) -> None:
        raise NotImplementedError

    async def _reset(self, tp: TopicPartition, err: SidecarError) -> None:
        raise NotImplementedError

    async def _send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        raise NotImplementedError

    async def _refresh_limits(self) -> None:
        raise NotImplementedError

    def _publish_assignment(self) -> None:
        raise NotImplementedError
