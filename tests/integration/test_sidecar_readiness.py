"""Readiness while an output cannot be acknowledged (issue 25): a deleted dead-letter topic.

A broker that does not auto-create topics (as production brokers run), a fresh group (nothing
committed yet), `--ready-timeout 3`: the dead-letter topic is deleted, then one non-JSON record and
20 pairs arrive. /readyz is sampled throughout: from the ready timeout after the input arrived
until the topic is re-created, every sample must be 503 and name the output that is not
acknowledged, whatever the rebuild cycle (replay, backoff, reopen) is doing; once the topic is back
the sidecar is ready again and nothing was lost (every input event in exactly one output record at
least once, read_committed). Both delivery modes.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from .conftest import BrokerFactory, TopicFactory
from .sidecar_support import (
    OutputReader,
    config,
    event,
    http_get,
    identities,
    produce,
    started,
    summary,
    wait_async,
)

READY_TIMEOUT_S = 3.0
OUTAGE_S = 14.0


async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    return admin


async def _sample(port: int, until: float, into: list[tuple[float, int, str]]) -> None:
    while time.monotonic() < until:
        status, body = await asyncio.to_thread(http_get, port, "/readyz")
        into.append((time.monotonic(), status, body.decode(errors="replace").strip()))
        await asyncio.sleep(0.5)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
async def test_readyz_is_503_while_an_output_topic_is_gone(
    broker_factory: BrokerFactory, topic_factory: TopicFactory, exactly_once: bool
) -> None:
    broker = await asyncio.to_thread(broker_factory, auto_create_topics=False)
    topic = await topic_factory(2, bootstrap=broker.bootstrap)
    dead = f"{topic}.dead-letter"
    cfg = config(
        broker.bootstrap, topic, f"g-ready-{uuid.uuid4().hex[:8]}",
        exactly_once=exactly_once, ready_timeout_s=READY_TIMEOUT_S, request_timeout_ms=10_000,
    )  # fmt: skip
    sidecar = await started(cfg)
    port = sidecar.http_port
    assert port is not None
    admin = await _admin(broker.bootstrap)
    try:
        assert sidecar._committed == {}  # a fresh group: nothing committed yet
        await admin.delete_topics([dead])
        await asyncio.sleep(1.0)
        traffic: list[tuple[bytes | None, bytes | None]] = [(b"bad", b"{not json")]
        for i in range(20):
            conv = f"c{i % 5}"
            traffic += [(conv.encode(), event(conv, "tool_call", f"x{i}")),
                        (conv.encode(), event(conv, "tool_result", f"x{i}"))]  # fmt: skip
        placed = await produce(broker.bootstrap, topic, traffic)
        arrived = time.monotonic()
        samples: list[tuple[float, int, str]] = []
        await _sample(port, arrived + OUTAGE_S, samples)
        await admin.create_topics([NewTopic(dead, num_partitions=2, replication_factor=1)])
        recreated = time.monotonic()

        async def ready_again() -> bool:
            status, body = await asyncio.to_thread(http_get, port, "/readyz")
            samples.append((time.monotonic(), status, body.decode(errors="replace").strip()))
            return status == 200

        await wait_async(ready_again, 60, "/readyz 200 once the dead-letter topic is back")
        async with OutputReader(broker.bootstrap, topic) as reader:
            await reader.until(lambda recs: len(identities(recs)) >= len(placed), timeout_s=60)
            await reader.settle()
            records = reader.records
    finally:
        await admin.close()
        await sidecar.stop()

    outage = [s for s in samples if arrived + READY_TIMEOUT_S + 1.5 <= s[0] < recreated]
    assert len(outage) >= 12, samples
    wrong = [s for s in outage if s[1] != 503]
    assert not wrong, f"ready while the dead-letter topic was gone: {wrong}\nall: {samples}"
    unnamed = [s for s in outage if "not acknowledged for" not in s[2] or dead not in s[2]]
    assert not unnamed, f"503 without naming the dead-letter topic: {unnamed}"
    assert samples[-1][1] == 200
    seen = identities(records)
    expected = {(topic, p, o, None if i == 0 else 0) for i, (p, o) in enumerate(placed)}
    assert expected <= set(seen), f"lost: {sorted(expected - set(seen))[:10]}"
    assert summary(records)["pair"] >= 20 and summary(records)["dead_letter"] >= 1
    if exactly_once:
        assert all(n == 1 for n in seen.values()), "exactly-once wrote an event twice"
