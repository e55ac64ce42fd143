"""Input records read, counted per record in plain integers and moved into Prometheus counters when
the registry is collected.

Why: the compiled core reports every record it reads (`observe_record_read`), and two labelled
counter increments per record (each taking the client's lock) cost the sidecar as much as the
core's failure tagging (BENCHMARKS.md, issue 23: `bench/partition_feed.py --metrics`). A scrape
sees every record counted: the tally's collector is registered before the counters, and a
registry collects in registration order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from stream_pairer.core.vocab import EventType

UNKNOWN_FORMAT: Final = "unknown"  # the format label of a record with no tool events
_CALL, _RESULT = EventType.TOOL_CALL.value, EventType.TOOL_RESULT.value


class ReadTally(Collector):
    """Per format: records, calls, results since the last collection. `counters()` gives the
    `records_read` and `events_read` counters (created after this, which must come first)."""

    def __init__(self, registry: CollectorRegistry, counters: Callable[[], tuple[Counter, Counter]]) -> None:
        self._counters = counters
        self._lock = threading.Lock()  # the HTTP thread collects while the loop adds
        self._pending: dict[str | None, list[int]] = {}
        self._children: dict[str | None, tuple[Counter, Counter, Counter]] = {}
        registry.register(self)

    def add(self, fmt: str | None, n_calls: int, n_results: int) -> None:
        with self._lock:
            acc = self._pending.get(fmt)
            if acc is None:
                acc = self._pending[fmt] = [0, 0, 0]
            acc[0] += 1
            acc[1] += n_calls
            acc[2] += n_results

    def collect(self) -> Iterator[Metric]:
        """Yields nothing: moves the pending counts into their counters, read after it."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for fmt, (records, calls, results) in pending.items():
            children = self._children.get(fmt)
            if children is None:
                label = fmt or UNKNOWN_FORMAT
                records_read, events_read = self._counters()
                children = (
                    records_read.labels(label),
                    events_read.labels(label, _CALL),
                    events_read.labels(label, _RESULT),
                )
                self._children[fmt] = children
            children[0].inc(records)
            if calls:
                children[1].inc(calls)
            if results:
                children[2].inc(results)
        return iter(())
