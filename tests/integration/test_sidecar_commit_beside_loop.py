"""A commit that does not answer does not stop the pairing (issue 25), on a real broker.

The sidecar's own commit step is held open (its `finish_commit` waits on a gate the test opens;
the broker is real and untouched): while it hangs, records produced afterwards are still paired and
their outputs acknowledged, because the commit runs beside the consume loop (committer.py). Before,
the loop awaited each commit, so nothing after the first commit came out until it ended. Nothing is
committed while the commit hangs (the committed lag stays at what was produced), and once it is let
through the committed lag reaches 0. At-least-once only: exactly-once outputs are visible only at
their transaction's commit by design.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from stream_pairer.adapters.kafka.sidecar import Sidecar

from .conftest import TopicFactory
from .sidecar_support import OutputReader, config, event, produce, started, summary, wait_for


def committed_lag(sidecar: Sidecar, topic: str) -> float | None:
    registry = sidecar.metrics.registry
    name = "stream_pairer_consumer_lag_messages"
    values = [registry.get_sample_value(name, {"topic": topic, "partition": str(p)}) for p in (0, 1)]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def pairs(prefix: str, n: int) -> list[tuple[bytes | None, bytes | None]]:
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(n):
        conv = f"{prefix}{i % 10}"
        out += [(conv.encode(), event(conv, "tool_call", f"{prefix}-{i}")),
                (conv.encode(), event(conv, "tool_result", f"{prefix}-{i}"))]  # fmt: skip
    return out


async def test_a_hung_commit_does_not_stop_pairing_and_commits_nothing_until_it_ends(
    kafka_broker: object, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(2)
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    cfg = config(bootstrap, topic, f"g-bg-{uuid.uuid4().hex[:8]}", commit_interval_s=0.2)
    sidecar = await started(cfg)
    gate = asyncio.Event()
    entered: list[int] = []
    delivery = sidecar._delivery
    assert delivery is not None
    real_finish = delivery.finish_commit

    async def held_finish(consumer: Any, commits: Any) -> Any:
        entered.append(len(commits))
        await gate.wait()  # the broker does not answer (as far as this commit can tell)
        return await real_finish(consumer, commits)

    delivery.finish_commit = held_finish  # type: ignore[method-assign]
    try:
        async with OutputReader(bootstrap, topic, isolation_level="read_uncommitted") as reader:
            await produce(bootstrap, topic, pairs("a", 50))
            await reader.until(lambda recs: summary(recs)["pair"] >= 50, timeout_s=30)
            await wait_for(lambda: bool(entered), 10, "a commit under way")
            # The first commit hangs; records produced now must still be paired and acknowledged.
            await produce(bootstrap, topic, pairs("b", 50))
            await reader.until(lambda recs: summary(recs)["pair"] >= 100, timeout_s=30)
            assert entered == entered[:1], "a second commit began while the first was in flight"
            assert sidecar._committer.busy
            lag = committed_lag(sidecar, topic)
            assert lag == 200, f"committed past the hung commit: committed lag {lag}"
            gate.set()
            await wait_for(lambda: committed_lag(sidecar, topic) == 0, 30, "committed lag 0")
            await reader.settle()
            assert summary(reader.records)["pair"] == 100
    finally:
        gate.set()
        await sidecar.stop()
