"""How the consume loop keeps the next fetch in flight: two aiokafka behaviours in the latency tail.

Why a module of its own (issue 25): at 5k records/s the at-least-once arrival-to-ack p99 was ~100 ms
with the pairing engine at ~2.5 ms and the produce step at ~5 ms; the stage histogram put the rest
in `fetch_wait`. Two behaviours of aiokafka 0.14's fetcher (a task on the consume loop's event loop)
were suspects; a timeline of the sidecar's fetch requests and interleaved runs (BENCHMARKS.md,
"Latency: the fetch side") settled them:

* **The next fetch went out only at the next `getmany`.** `getmany` drains the buffered records and
  signals the fetch task, but that task runs only when the loop awaits something that really
  suspends. A loop turn (pairing, handing outputs to the producer) rarely does, so the next fetch
  request was written only when the turn was over: the broker's round trip came on top of the
  turn instead of beside it. `hand_off` gives the fetch task the few event-loop steps it needs to
  write its request before the turn starts. What it trades: the records of that fetch are the
  ones that arrived while the turn had just begun, and the ones arriving later in the turn wait
  for the next fetch; and fetches get smaller, ~8 % more CPU per record at full speed. It pays
  where turns are long (exactly-once, visible p99 lower in 3 of 3 paired runs) and was even for
  at-least-once at 5k records/s; `--no-fetch-ahead` (`SidecarConfig.fetch_ahead`) turns it off.
  The loop hands off only when it is caught up (`caught_up`: the batch reached every fetched
  partition's high watermark). Behind, the next records are already waiting at the broker: the
  next fetch comes back full whenever it is sent, and sending it early only makes fetches smaller.
  On a quiet machine (BENCHMARKS.md, *Latency targets*) at 5k records/s at-least-once ack p99 was
  17-24 ms with fetch ahead and 27-41 ms without; at full speed, handing off after every batch
  shorter than `--max-records`, it cost CPU (25.1-25.4 us/record against 21.6 without, the sidecar
  at 0.48-0.52 of the passthrough against 0.53), which the caught-up rule is for.
* **One partition's unconsumed records hold back every partition of its broker.** The fetcher
  sends no fetch request to a node while any partition it leads has fetched records younger than
  `prefetch_backoff` (0.1 s, a `Fetcher` argument `AIOKafkaConsumer` does not pass through) that
  the application has not taken. `--prefetch-backoff` sets it (`set_prefetch_backoff`, after
  `start()`), but the default stays aiokafka's 0.1 s: with 0, a fetch for the partitions that came
  back empty goes out alone while the others' records are being paired, the broker holds it until
  their next records arrive, and meanwhile the drained partitions cannot be fetched (one request
  per broker at a time): fetches split into out-of-phase halves, and ack p50 at 5k records/s rose
  from 9-12 ms to 16-23 ms in three interleaved runs. The sidecar drains every partition each
  turn (`getmany` of all of them), so the 0.1 s hold rarely applies; lower it only where some
  partitions stay buffered (a `--max-records` cap reached every turn).

Both reach into aiokafka's private fetcher: a version without `_fetcher._prefetch_backoff` is
refused at start (`set_prefetch_backoff` raises, naming the version); without `_in_flight`,
`hand_off` still yields, only never ends early. tests/integration/test_sidecar_fetch_handoff.py
checks both against the installed aiokafka and a real broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import aiokafka
from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_pairer.errors import ConfigError

DEFAULT_PREFETCH_BACKOFF_S = 0.1  # aiokafka's own; 0 measured worse (see the module docstring)
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


def caught_up(consumer: AIOKafkaConsumer, batch: Mapping[TopicPartition, Sequence[Any]]) -> bool:
    """Whether a `getmany` batch took every one of its partitions to the high watermark its fetch
    reported: only then is the next fetch worth sending early (a partition behind has records
    waiting at the broker, and its next fetch comes back full whenever it goes out)."""
    for tp, msgs in batch.items():
        high = consumer.highwater(tp)
        if high is None or (msgs and msgs[-1].offset + 1 < high):
            return False
    return True


async def hand_off(consumer: AIOKafkaConsumer) -> None:
    """After a `getmany` that returned records: let aiokafka's fetch task send the next fetch
    request before this loop turn pairs them (the request goes out now, not when the turn ends)."""
    for _ in range(HANDOFF_STEPS):
        if fetch_in_flight(consumer):
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)  # the request task's first step writes the request to the connection
