"""How the consume loop keeps the next fetch in flight: two aiokafka behaviours in the latency tail.

Why a module of its own (issue 25): at 5k records/s the at-least-once arrival-to-ack p99 was ~100 ms
with the pairing engine at ~2.5 ms and the produce step at ~5 ms; the stage histogram put the rest
in `fetch_wait`. A timeline of the sidecar's fetches (BENCHMARKS.md, "Latency: the next fetch in
flight") showed two causes, both inside aiokafka 0.14's fetcher, which runs as a task on the same
event loop as the consume loop:

* **The next fetch went out only at the next `getmany`.** `getmany` drains the buffered records and
  signals the fetch task, but that task runs only when the loop awaits something that really
  suspends. A loop turn (pairing, handing outputs to the producer) rarely does, so the next fetch
  request was written only when the turn was over, and every record appended meanwhile waited for
  the whole turn *plus* a fetch round trip. `hand_off` gives the fetch task the few event-loop
  steps it needs to write its request before the turn starts, so the broker answers while the
  records are paired.
* **One partition's unconsumed records held back every partition of the broker.** The fetcher
  sends no fetch request at all to a node while any partition led by it has fetched records
  younger than `prefetch_backoff` (0.1 s, a `Fetcher` argument `AIOKafkaConsumer` does not pass
  through) that the application has not taken yet: a partition left buffered (a `getmany` that
  stopped at `max_records`, a partition paused while it is opened or rebuilt) stalled the others
  for up to 100 ms. `set_prefetch_backoff` sets it on the consumer's fetcher after `start()`
  (`--prefetch-backoff`, default 0: never hold the others back). What 0 costs: a fetch for the
  other partitions while one is buffered, i.e. more, smaller fetch requests; a partition's buffer
  is still never fetched again before it is consumed, so memory is bounded as before.

Both reach into aiokafka's private fetcher (`_fetcher`, `_prefetch_backoff`, `_in_flight`); a
version that renames them is found at start (`set_prefetch_backoff` raises, naming the version)
and by tests/integration/test_sidecar_fetch_handoff.py, never silently ignored.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiokafka
from aiokafka import AIOKafkaConsumer

from stream_pairer.errors import ConfigError

DEFAULT_PREFETCH_BACKOFF_S = 0.0  # aiokafka's own: 0.1 (see the module docstring)
# Event-loop steps the fetch task needs after `getmany` drained its buffers: the wake-up of its
# wait, the step that builds the request and starts its task, and that task writing it (measured:
# 2 steps until the request is started, 1 more to write it). Bounded, so a fetcher with nothing to
# fetch (every partition paused) costs a turn at most this many empty steps.
HANDOFF_STEPS = 8


def _fetcher(consumer: AIOKafkaConsumer) -> Any:
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None:
        raise ConfigError(f"aiokafka {aiokafka.__version__}: the consumer has no fetcher (not started?)")
    return fetcher


def set_prefetch_backoff(consumer: AIOKafkaConsumer, seconds: float) -> None:
    """Set how long one partition's unconsumed records may hold back fetches for the other
    partitions of its broker (after `consumer.start()`, which creates the fetcher)."""
    fetcher = _fetcher(consumer)
    if not hasattr(fetcher, "_prefetch_backoff"):
        raise ConfigError(
            f"aiokafka {aiokafka.__version__}: its fetcher has no prefetch_backoff any more; "
            "--prefetch-backoff cannot be applied (stream_pairer/adapters/kafka/fetching.py)"
        )
    fetcher._prefetch_backoff = seconds


def prefetch_backoff(consumer: AIOKafkaConsumer) -> float:
    """The value the consumer's fetcher uses (read by the tests)."""
    return float(_fetcher(consumer)._prefetch_backoff)


def fetch_in_flight(consumer: AIOKafkaConsumer) -> bool:
    """Whether the consumer's fetch task has a request to some broker outstanding."""
    return bool(getattr(getattr(consumer, "_fetcher", None), "_in_flight", None))


async def hand_off(consumer: AIOKafkaConsumer) -> None:
    """After a `getmany` that returned records: let aiokafka's fetch task send the next fetch
    request before this loop turn pairs them (the request goes out now, not when the turn ends)."""
    for _ in range(HANDOFF_STEPS):
        if fetch_in_flight(consumer):
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)  # the request task's first step writes the request to the connection
