"""Liveness, readiness and the state gauges of the sidecar.

Readiness tells the truth about delivery, not only about fetching: a sidecar whose outputs are not
acknowledged (sends retrying against a broker that refuses or cannot be reached), or whose
partitions wait to be rebuilt, is not ready (acks.py keeps that clock). Two lag gauges per
partition: from the committed offset (grows while nothing commits) and from the next offset to
process (what is left to read and pair).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time

from aiokafka import AIOKafkaConsumer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from stream_pairer.adapters.kafka.shared import SidecarState
from stream_pairer.ops.http import Response


class HealthMixin(SidecarState):
    @property
    def alive(self) -> bool:
        """The loop task runs and, while connected, goes round (a consume loop stuck in one call for
        longer than two request timeouts is not coming back; a restart is the remedy). Waiting for
        an unreachable broker is alive: restarting the process would not bring the broker back."""
        task = self._task
        if task is None or task.done():
            return False
        limit = max(30.0, 10 * self.config.poll_timeout_s, 2 * self.config.request_timeout_ms / 1000)
        return not self._connected or time.monotonic() - self._last_loop_s <= limit

    @property
    def ready(self) -> bool:
        return self.not_ready_because() is None

    def not_ready_because(self) -> str | None:
        """None when ready: partitions assigned and all opened, a fetch response recently, and the
        outputs acknowledged (a sidecar stuck retrying its sends is not ready, whatever it fetches)."""
        consumer = self._consumer
        if not self._connected or consumer is None:
            return f"not connected ({self.last_error})" if self.last_error else "not connected"
        stuck_outputs = self._outputs_watch.stuck()
        if stuck_outputs is not None and stuck_outputs[0] > self.config.ready_timeout_s:
            return stuck_outputs[1]
        if not self.states or self._unopened:
            held = len(self._hold_until)
            return (
                f"{held} partition(s) waiting to be rebuilt"
                if held
                else "no partitions assigned or not opened"
            )
        delivery = self._delivery
        stuck = delivery.oldest_unacked_s() if delivery is not None else 0.0
        if stuck > self.config.ready_timeout_s:
            return f"outputs unacknowledged for {stuck:.0f}s"
        newest = 0
        for tp in self.states:
            with contextlib.suppress(Exception):
                newest = max(newest, consumer.last_poll_timestamp(tp) or 0)
        if self._wall() * 1000 - newest > self.config.ready_timeout_s * 1000:
            return "not consuming"
        return None

    def _watch_health(self) -> None:
        """One line when readiness changes (broker unreachable, outputs not acknowledged, partitions
        waiting to be rebuilt, and back), with the counts; silence while it stays the same."""
        why = self.not_ready_because()
        state = "ready" if why is None else re.sub(r"\d+(\.\d+)?", "N", why)
        delivery = self._delivery
        self.states_log.change(
            "readiness", state, "ready" if why is None else f"not ready: {why}",
            level=logging.INFO if why is None else logging.WARNING,
            partitions=len(self.states), waiting=len(self._unopened),
            unacknowledged=delivery.unacked() if delivery is not None else 0,
        )  # fmt: skip

    def _metrics_page(self) -> Response:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)

    def _healthz(self) -> Response:
        return (200, "text/plain", b"ok\n") if self.alive else (503, "text/plain", b"loop not running\n")

    def _readyz(self) -> Response:
        why = self.not_ready_because()
        self.metrics.set_up(why is None)
        if why is None:
            return 200, "text/plain", f"ready: {len(self.states)} partitions\n".encode()
        return 503, "text/plain", f"not ready: {why}\n".encode()

    def _update_gauges(self, consumer: AIOKafkaConsumer) -> None:
        m = self.metrics
        calls = convs = held = pending = 0
        for tp, st in self.states.items():
            g = st.pipeline.gauges()
            calls += g.open_calls
            convs += g.open_conversations
            held += g.held_bytes
            pending += g.pending_results
            with contextlib.suppress(Exception):
                # Two lags: from the committed offset (what external lag tools compute; it grows
                # while nothing commits) and from the next offset to process (what is left to pair).
                hw = consumer.highwater(tp)
                base = self._committed.get(tp, self._start_position.get(tp))
                done = st.next_offset if st.next_offset is not None else base
                if hw is not None and base is not None:
                    m.set_lag(tp.topic, tp.partition, hw - base, None if done is None else hw - done)
        self._outputs_watch.settle(
            all_committed=not self._unopened and not any(st.dirty for st in self.states.values())
        )
        m.set_state(open_calls=calls, open_conversations=convs, held_bytes=held, pending_results=pending)
        self._publish_assignment()
        m.set_up(self.ready)

    def _publish_assignment(self) -> None:
        """Partition count and the limits scaled to it: the limits apply per partition (each
        partition's engine has the whole EngineConfig, so replay rebuilds its state from its own
        input alone), but the state gauges are sums over `self.states`, so the limit gauges must be
        the same sums for a gauge / limit ratio (StreamPairerStateNearLimit) to mean anything."""
        n = len(self.states)
        engine = self.config.engine
        self.metrics.set_assigned_partitions(n)
        self.metrics.set_limits(
            max_conversations=engine.max_conversations,
            max_calls_per_conversation=engine.max_calls_per_conversation,
            max_held_bytes=engine.max_held_bytes,
            partitions=n,
        )
