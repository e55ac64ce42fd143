"""The two lags with calls held by a long --call-timeout (issue 25), on a real broker.

Ten calls wait for their results (call timeout two hours) while 100 pairs go through. Once the
sidecar has processed everything, `stream_pairer_unprocessed_messages` reads 0 on every partition
(caught up), and so does `stream_pairer_consumer_lag_messages` (the committed lag Burrow and
kafka_exporter compute): the committed offset follows what was processed, the held calls'
positions live in the checkpoint. A restart then replays the held calls from the checkpoint (before
the committed offset) and pairs them with results produced after it: nothing lost, in both delivery
modes. With `--commit-held-back` (the rule before) the committed lag stays pinned by the held calls.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from stream_pairer.adapters.kafka.sidecar import Sidecar
from stream_pairer.core.config import EngineConfig

from .conftest import TopicFactory
from .sidecar_support import (
    OutputReader,
    config,
    event,
    identities,
    produce,
    started,
    summary,
    wait_for,
)


def gauge_sum(sidecar: Sidecar, name: str, topic: str) -> float | None:
    registry = sidecar.metrics.registry
    values = [registry.get_sample_value(name, {"topic": topic, "partition": str(p)}) for p in (0, 1)]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


@pytest.mark.parametrize(
    "exactly_once, commit_processed",
    [(False, True), (True, True), (False, False)],
    ids=["at-least-once", "exactly-once", "commit-held-back"],
)
async def test_committed_lag_follows_processing_and_a_restart_pairs_the_held_calls(
    kafka_broker: object, topic_factory: TopicFactory, exactly_once: bool, commit_processed: bool
) -> None:
    topic = await topic_factory(2)
    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    cfg = config(
        bootstrap, topic, f"g-lags-{uuid.uuid4().hex[:8]}",
        engine=EngineConfig(call_timeout_ms=7_200_000, result_grace_ms=1_000),
        exactly_once=exactly_once, commit_processed=commit_processed,
    )  # fmt: skip
    held = [(f"h{i}".encode(), event(f"h{i}", "tool_call", f"hold{i}")) for i in range(10)]
    pairs: list[tuple[bytes | None, bytes | None]] = []
    for i in range(100):
        conv = f"p{i % 10}"
        pairs += [(conv.encode(), event(conv, "tool_call", f"x{i}")),
                  (conv.encode(), event(conv, "tool_result", f"x{i}"))]  # fmt: skip
    placed = await produce(bootstrap, topic, held + pairs)
    sidecar = await started(cfg)
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: summary(recs)["pair"] >= 100, timeout_s=60)
        unprocessed = "stream_pairer_unprocessed_messages"
        await wait_for(lambda: gauge_sum(sidecar, unprocessed, topic) == 0, 30, "unprocessed 0")
        await asyncio.sleep(1.0)  # a few commits and gauge updates later: still 0
        assert gauge_sum(sidecar, unprocessed, topic) == 0
        lag = "stream_pairer_consumer_lag_messages"
        if commit_processed:
            await wait_for(lambda: gauge_sum(sidecar, lag, topic) == 0, 30, "committed lag 0")
        else:
            committed = gauge_sum(sidecar, lag, topic)
            assert committed is not None and committed >= 100, committed  # pinned by the held calls
    finally:
        await sidecar.stop()

    sidecar = await started(cfg)  # the same group: replays from the commit, rebuilds the held calls
    try:
        results = [(f"h{i}".encode(), event(f"h{i}", "tool_result", f"hold{i}")) for i in range(10)]
        placed += await produce(bootstrap, topic, results)
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: summary(recs)["pair"] >= 110, timeout_s=60)
            await reader.settle()
            records = reader.records
    finally:
        await sidecar.stop()
    held_pairs = [r for r in records if r["kind"] == "pair" and r["call"]["id"].startswith("hold")]
    assert sorted(r["call"]["id"] for r in held_pairs) == sorted(f"hold{i}" for i in range(10))
    expected = {(topic, p, o, 0) for p, o in placed}
    assert expected <= set(identities(records)), "an input event was lost"
    assert summary(records)["orphan_call:timeout"] == 0
