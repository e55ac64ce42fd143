"""Issue 11 through a real broker: conversations whose clocks lag each other by an hour, in the same
partitions, lose no id pair.

Two groups of conversations are produced interleaved into the same partitions of one topic: one
live (timestamps now), one an hour behind (as a backfill or a delayed log shipper writes them). The
call timeout is 3 s, so under a single partition-wide event time every call of the lagging group
was expired by the next live record and its result came out as `late_result`. Each conversation's
own clock decides now: every id pair is found, nothing else is emitted, and then a call left
unanswered in each group is still closed out by the wall-clock tick (processing time).
"""

from __future__ import annotations

import random

import orjson

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import OutputReader, config, identities, now_ms, produce, started, summary

HOUR_MS = 3_600_000


def _record(conv: str, kind: str, cid: str, ts: int) -> bytes:
    body = {"conversation_id": conv, "type": kind, "id": cid, "name": "search", "ts": ts}
    if kind == "tool_result":
        body["content"] = "ok"
    return orjson.dumps(body)


def _traffic(rnd: random.Random, t0: int) -> tuple[list[tuple[bytes | None, bytes | None]], int]:
    scripts: dict[str, list[bytes]] = {}
    n_calls = 0
    for group, lag in (("live", 0), ("behind", HOUR_MS)):
        for c in range(15):
            conv = f"{group}-{c}"
            t = t0 - lag + rnd.randint(0, 2_000)
            script = []
            for i in range(3):
                cid = f"{conv}-{i}"
                script.append(_record(conv, "tool_call", cid, t))
                t += rnd.randint(20, 1_500)
                script.append(_record(conv, "tool_result", cid, t))
                t += rnd.randint(0, 500)
                n_calls += 1
            scripts[conv] = script
    traffic: list[tuple[bytes | None, bytes | None]] = []
    while scripts:  # interleaved at random, in order within each conversation
        conv = rnd.choice(sorted(scripts))
        traffic.append((conv.encode(), scripts[conv].pop(0)))
        if not scripts[conv]:
            del scripts[conv]
    return traffic, n_calls


async def test_conversations_an_hour_apart_in_the_same_partitions_lose_no_pair(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(2)
    traffic, n_calls = _traffic(random.Random(11), now_ms())
    placed = await produce(bootstrap, topic, traffic)
    groups_in = {
        p: {key.split(b"-")[0] for (key, _), (q, _) in zip(traffic, placed, strict=True) if q == p and key}
        for p in (0, 1)
    }
    assert groups_in == {0: {b"live", b"behind"}, 1: {b"live", b"behind"}}  # both clocks in each partition

    sidecar = await started(config(bootstrap, topic, f"g-{topic}"))  # call timeout 3 s, grace 1 s
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: len(identities(recs)) == len(placed), timeout_s=60)
            await reader.settle(1.0)
            records = list(reader.records)
            # A quiet conversation in each group: the tick alone closes it out.
            late = [(b"live-q", _record("live-q", "tool_call", "q1", now_ms())),
                    (b"behind-q", _record("behind-q", "tool_call", "q2", now_ms() - HOUR_MS))]  # fmt: skip
            await produce(bootstrap, topic, late)
            await reader.until(lambda recs: summary(recs)["orphan_call:timeout"] == 2, timeout_s=30)
            ticked = [r for r in reader.records if r["kind"] != "pair"]
        # Every partition ran the compiled core, the one production pipeline.
        native_ran = {type(st.pipeline).__name__ for st in sidecar.states.values()}
        assert native_ran == {"NativePipeline"}, native_ran
    finally:
        assert await sidecar.stop()

    assert summary(records) == {"pair": n_calls}, summary(records)
    assert all(r["match"] == "id" and r["call"]["id"] == r["result"]["id"] for r in records)
    assert max(identities(records).values()) == 1
    assert all(20 <= r["latency_ms"] <= 1_500 for r in records)  # each pair's own timestamps
    assert sorted(r["event"]["id"] for r in ticked) == ["q1", "q2"]
