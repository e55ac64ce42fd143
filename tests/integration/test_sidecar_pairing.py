"""The sidecar end to end against a real broker: every core case, interleaved across partitions.

What this proves: records keyed by conversation and spread over three partitions come out of the
three output topics paired and classified exactly as the core decides (id pairs, FIFO by name and by
order, parallel calls in one record, unknown id -> orphan after the grace, duplicates, dead letters
with their input key), with Kafka lineage on every side; a call left unanswered on a partition that
then goes quiet is emitted as a timeout by the wall-clock tick alone; each input event is in exactly
one output; the committed offsets pass everything once everything is emitted; the HTTP endpoint
serves metrics, health and readiness; and SIGTERM-style stop is clean.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import orjson
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import OutputReader, config, event, http_get, identities, produce, started, summary


def _traffic() -> list[tuple[bytes | None, bytes | None]]:
    """Per-conversation scripts, interleaved at random but in order within each conversation."""
    scripts: dict[str, list[bytes | None]] = {
        "A": [event("A", "tool_call", "a1"), event("A", "tool_call", "a2", name="fetch"),
              event("A", "tool_result", "a2"), event("A", "tool_result", "a1")],
        "B": [event("B", "tool_call", None, name="search"), event("B", "tool_call", None, name="fetch"),
              event("B", "tool_result", None, name="fetch"), event("B", "tool_result", None, name=None)],
        "C": [event("C", "tool_result", "ghost", name=None)],
        "D": [event("D", "tool_call", "d1"), event("D", "tool_result", "d1"),
              event("D", "tool_result", "d1")],
        "E": [event("E", "tool_call", "e1")],
        "F": [b"{not json"],
        "H": [orjson.dumps({"conversation_id": "H", "role": "user", "content": "hello"})],
        "P": [
            orjson.dumps({"conversation_id": "P", "role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "s", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "s", "input": {"q": 2}}]}),
            orjson.dumps({"conversation_id": "P", "role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "two"},
                {"type": "tool_result", "tool_use_id": "t1", "content": "one"}]}),
        ],
    }  # fmt: skip
    rnd = random.Random(7)
    queues = {conv: list(values) for conv, values in scripts.items()}
    out: list[tuple[bytes | None, bytes | None]] = []
    while queues:
        conv = rnd.choice(sorted(queues))
        out.append((conv.encode(), queues[conv].pop(0)))
        if not queues[conv]:
            del queues[conv]
    # No key and no conversation id in the record: a dead letter whose output key is null.
    out.append((None, orjson.dumps({"type": "tool_call", "id": "x", "name": "n"})))
    return out


def _by_conv(records: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for r in records:
        if r["kind"] == "pair":
            item: tuple[Any, ...] = ("pair", r["match"], r["fifo_by"], r["call"]["id"], r["call"]["name"],
                                     r["result"]["id"])  # fmt: skip
        elif r["kind"] == "dead_letter":
            continue
        else:
            item = (r["kind"], r["reason"], r["event"]["id"])
        out.setdefault(r["conversation_id"], []).append(item)
    return {k: sorted(v, key=repr) for k, v in out.items()}


async def test_all_core_cases_across_partitions(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(3)
    traffic = _traffic()
    placed = await produce(bootstrap, topic, traffic)
    assert len({p for p, _ in placed}) > 1  # the conversations really are spread over partitions

    sidecar = await started(config(bootstrap, topic, f"g-{topic}"))
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: "orphan_call:timeout" in summary(recs), timeout_s=30)
            await reader.settle(1.0)
            records = reader.records
            messages = reader.messages
        port = sidecar.http_port
        assert port is not None
        metrics = await asyncio.to_thread(http_get, port, "/metrics")
        health = await asyncio.to_thread(http_get, port, "/healthz")
        ready = await asyncio.to_thread(http_get, port, "/readyz")
        missing = await asyncio.to_thread(http_get, port, "/nope")
    finally:
        clean = await sidecar.stop()
    assert clean

    assert _by_conv(records) == {
        "A": [("pair", "id", None, "a1", "search", "a1"), ("pair", "id", None, "a2", "fetch", "a2")],
        "B": [("pair", "fifo", "name", None, "fetch", None), ("pair", "fifo", "order", None, "search", None)],
        "C": [("orphan_result", "no_call", "ghost")],
        "D": [("orphan_result", "duplicate_result", "d1"), ("pair", "id", None, "d1", "search", "d1")],
        "E": [("orphan_call", "timeout", "e1")],
        "P": [("pair", "id", None, "t1", "s", "t1"), ("pair", "id", None, "t2", "s", "t2")],
    }
    dead = sorted(((r["reason"], r.get("raw")) for r in records if r["kind"] == "dead_letter"), key=repr)
    assert dead == [
        ("invalid_json", "{not json"),
        ("missing_conversation_id", '{"type":"tool_call","id":"x","name":"n"}'),
    ]
    # Keys: conversation id for pairs/orphans; the input key (or null) for dead letters.
    for msg, rec in zip(messages, records, strict=True):
        if rec["kind"] == "dead_letter":
            assert msg.key == (b"F" if rec["reason"] == "invalid_json" else None)
        else:
            assert msg.key == rec["conversation_id"].encode()

    # Lineage and conservation: every input event exactly once, at the partition/offset it was written.
    expected: Counter[tuple[str, int, int, int | None]] = Counter()
    for (key, value), (partition, offset) in zip(traffic, placed, strict=True):
        assert value is not None
        if key == b"H":
            continue  # a chat line without tool events produces no output, by design
        if value.startswith(b"{not") or key is None:
            expected[(topic, partition, offset, None)] += 1
        elif key == b"P":
            expected.update({(topic, partition, offset, 0): 1, (topic, partition, offset, 1): 1})
        else:
            expected[(topic, partition, offset, 0)] += 1
    assert identities(records) == expected

    # Everything is emitted, so every partition's committed offset is past its last record.
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(f"g-{topic}")
    finally:
        await admin.close()
    ends = Counter[int]()
    for partition, offset in placed:
        ends[partition] = max(ends[partition], offset + 1)
    assert {tp.partition: om.offset for tp, om in committed.items() if tp.topic == topic} == dict(ends)
    assert all(om.metadata.startswith("sp1:") for om in committed.values())

    # HTTP endpoint.
    assert metrics[0] == 200
    text = metrics[1].decode()
    assert 'stream_pairer_pairs_total{fifo_by="none",match="id"} 5.0' in text
    assert 'stream_pairer_orphans_total{kind="orphan_call",reason="timeout"} 1.0' in text
    assert 'stream_pairer_records_read_total{format="canonical"}' in text
    assert "stream_pairer_emit_latency_seconds_count" in text
    assert "stream_pairer_consumer_lag_messages{" in text
    assert health[0] == 200 and ready[0] == 200 and missing[0] == 404
    assert TopicPartition(topic, 0) not in sidecar.states  # stop() left the group and dropped state
