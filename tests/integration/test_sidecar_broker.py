"""The broker going away: absent when the sidecar starts, and stopped then restarted while it runs.

Each test uses its own private broker (broker_factory), never the session one, because it stops it.
What this proves: the sidecar never exits on its own while Kafka is unreachable; it logs every
reconnect attempt with the error, answers /healthz but not /readyz meanwhile, and once the broker
is back it carries on: calls held across the outage still pair with results produced after it, and
no input event is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from stream_pairer.adapters.kafka.sidecar import Sidecar
from tests.reference.engine import EngineConfig

from .conftest import BrokerFactory, TopicFactory
from .sidecar_support import (
    OutputReader,
    _free_ports,
    config,
    event,
    http_get,
    identities,
    now_ms,
    produce,
    started,
    summary,
    wait_for,
)


async def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


async def test_broker_absent_at_start_then_appears(
    broker_factory: BrokerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="stream_pairer")
    (port,) = _free_ports(1)
    topic = "late-broker-in"
    sidecar = Sidecar(config(f"127.0.0.1:{port}", topic, "g-late"))
    await sidecar.start()
    try:
        await wait_for(lambda: sidecar.sessions >= 3, 30, "three connection attempts")
        http = sidecar.http_port
        assert http is not None
        assert (await asyncio.to_thread(http_get, http, "/healthz"))[0] == 200
        assert (await asyncio.to_thread(http_get, http, "/readyz"))[0] == 503
        # One line for the state change (with the attempt count), not one per attempt.
        ours = [r for r in caplog.records if r.name.startswith("stream_pairer")]
        down = [r.getMessage() for r in ours if r.getMessage().startswith("kafka: unreachable")]
        assert len(down) == 1, [r.getMessage() for r in ours]
        assert "BrokerUnavailable" in down[0] and "retrying every" in down[0]

        broker = await asyncio.to_thread(broker_factory, port=port)
        await _create(broker.bootstrap, topic, 2)
        await produce(
            broker.bootstrap,
            topic,
            [(b"c", event("c", "tool_call", "x")), (b"c", event("c", "tool_result", "x"))],
        )
        async with OutputReader(broker.bootstrap, topic) as reader:
            await reader.until(lambda recs: summary(recs)["pair"] == 1, timeout_s=60)
        await wait_for(lambda: sidecar.ready, 30, "ready once the broker is there")
        up = [r for r in caplog.records if r.getMessage().startswith("kafka: connected")]
        assert len(up) == 1 and up[0].fields["previous"] == "unreachable"  # type: ignore[attr-defined]
        assert up[0].fields["attempts"] >= 2  # type: ignore[attr-defined]
    finally:
        assert await sidecar.stop()


async def test_broker_stopped_and_restarted_while_running(
    broker_factory: BrokerFactory, topic_factory: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="stream_pairer")
    broker = await asyncio.to_thread(broker_factory)
    bootstrap = broker.bootstrap
    topic = await topic_factory(2, bootstrap=bootstrap)
    cfg = config(
        bootstrap, topic, f"g-{topic}", ready_timeout_s=2.0,
        engine=EngineConfig(call_timeout_ms=8_000, result_grace_ms=1_000),
    )  # fmt: skip
    sidecar = await started(cfg)
    try:
        convs = [f"conv{i}" for i in range(6)]
        t0 = now_ms()
        before = [(c.encode(), event(c, "tool_call", f"{c}-open", ts=t0)) for c in convs]
        before += [
            (c.encode(), v) for c in convs for v in (event(c, "tool_call", "p"), event(c, "tool_result", "p"))
        ]
        placed = await produce(bootstrap, topic, before)
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: summary(recs)["pair"] == len(convs), timeout_s=30)
        await wait_for(
            lambda: sum(st.pipeline.gauges().open_calls for st in sidecar.states.values()) == 6,
            10,
            "calls held",
        )

        await asyncio.to_thread(broker.stop)
        await wait_for(lambda: not sidecar.ready, 20, "unready while the broker is down")
        await asyncio.sleep(9)  # longer than the call timeout: an outage must not time the calls out
        http = sidecar.http_port
        assert http is not None
        assert (await asyncio.to_thread(http_get, http, "/healthz"))[0] == 200
        assert (await asyncio.to_thread(http_get, http, "/readyz"))[0] == 503
        await asyncio.to_thread(broker.start)
        await wait_for(lambda: sidecar.ready, 30, "ready again")

        # One state line for the outage and one for the recovery, not one per retry.
        def readiness_lines() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.getMessage().startswith("readiness:")]

        await wait_for(lambda: readiness_lines()[-1:] == ["readiness: ready"], 10, "the ready line")
        lines = readiness_lines()
        assert any(m.startswith("readiness: not ready") for m in lines[1:]), lines
        assert len(lines) <= 6, lines
        await asyncio.sleep(1.0)  # several ticks with fresh fetches and no results yet
        assert sum(st.pipeline.gauges().open_calls for st in sidecar.states.values()) == 6

        # The results' own times say they answered within 0.1 s (their producer was stalled by the same
        # outage): in event time nothing timed out, so only a wall tick that counted the outage could.
        after = [(c.encode(), event(c, "tool_result", f"{c}-open", ts=t0 + 100)) for c in convs]
        placed += await produce(bootstrap, topic, after)
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: summary(recs)["pair"] >= 2 * len(convs), timeout_s=60)
            await reader.settle(1.5)
            records = reader.records
        await wait_for(lambda: sidecar.ready, 30, "ready again")
    finally:
        assert await sidecar.stop()

    # The calls held across the outage paired with results written after it: no timeouts.
    s = summary(records)
    assert s["orphan_call:timeout"] == 0, s
    pairs = {(r["conversation_id"], r["call"]["id"]) for r in records if r["kind"] == "pair"}
    assert pairs == {(c, "p") for c in convs} | {(c, f"{c}-open") for c in convs}
    # Nothing lost (at-least-once allows repeats; count them so a regression shows).
    seen = identities(records)
    assert {(topic, p, o, 0) for p, o in placed} <= set(seen)
    assert set(seen) <= {(topic, p, o, 0) for p, o in placed}


async def test_a_recreated_input_topic_is_refused_with_the_reset_command(
    kafka_broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleted and re-created under a running sidecar: the new incarnation's offsets would collide
    with the old lineage, so each partition whose committed offset is past its new log end is
    refused (one ERROR line naming the reset command, /readyz 503), never silently consumed."""
    caplog.set_level(logging.INFO, logger="stream_pairer")
    bootstrap = kafka_broker.bootstrap
    topic = f"recreated-{uuid.uuid4().hex[:8]}"
    await _create(bootstrap, topic, 1)
    sidecar = await started(config(bootstrap, topic, f"g-{topic}"))
    try:
        first = [(b"c", event("c", "tool_call", f"k{i}")) for i in range(10)]
        first += [(b"c", event("c", "tool_result", f"k{i}")) for i in range(10)]
        await produce(bootstrap, topic, first)

        def committed() -> bool:
            return any(st.next_offset == 20 and not st.dirty for st in sidecar.states.values())

        await wait_for(committed, 30, "the first records committed")
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([topic])
        finally:
            await admin.close()
        await asyncio.sleep(3)
        await _create(bootstrap, topic, 1)
        await produce(bootstrap, topic, [(b"d", event("d", "tool_call", "n1"))])

        def refusals() -> list[str]:
            return [r.getMessage() for r in caplog.records if "is past the log end" in r.getMessage()]

        await wait_for(lambda: bool(refusals()), 90, "the refusal line")
        assert len(refusals()) == 1 and "--reset-offsets" in refusals()[0]
        http = sidecar.http_port
        assert http is not None
        status, body = await asyncio.to_thread(http_get, http, "/readyz")
        assert status == 503, body
    finally:
        assert await sidecar.stop()
