"""`--repartition`: input keyed by something other than the conversation (here: at random).

What this proves: a conversation whose calls and results land on different input partitions is
still paired, because stage one re-keys every record by conversation id onto
`<input>.by-conversation`; the outputs' lineage names the ORIGINAL input topic/partition/offset (with
`via` naming the internal record), every input event is accounted exactly once, dead letters keep
their lineage, and, in exactly-once mode, re-keying and pairing both commit transactionally.
"""

from __future__ import annotations

import random

import orjson
import pytest

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import OutputReader, config, event, identities, produce, started, summary


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
async def test_conversations_spread_over_partitions_still_pair(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory, exactly_once: bool
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(3)
    rnd = random.Random(21)
    traffic: list[tuple[bytes | None, bytes | None]] = []
    for n in range(20):
        c = f"r{n}"
        for i in range(2):
            # A random key per record: the call and its result usually land on different partitions.
            traffic.append((f"req-{rnd.random()}".encode(), event(c, "tool_call", f"{c}-{i}")))
            traffic.append((f"req-{rnd.random()}".encode(), event(c, "tool_result", f"{c}-{i}")))
    traffic.append((b"junk", b"{not json"))
    placed = await produce(bootstrap, topic, traffic)
    split = sum(1 for i in range(0, len(placed) - 1, 2) if placed[i][0] != placed[i + 1][0])
    assert split > 10  # most calls and results really are on different input partitions

    cfg = config(bootstrap, topic, f"g-{topic}", repartition=True, exactly_once=exactly_once)
    sidecar = await started(cfg)
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: len(identities(recs)) == len(placed), 60)
            await reader.settle(1.0)
            records = reader.records
    finally:
        assert await sidecar.stop()

    s = summary(records)
    assert s == {"pair": 40, "dead_letter": 1}, s
    seen = identities(records)
    assert set(seen) == {
        (topic, p, o, None if i == len(placed) - 1 else 0) for i, (p, o) in enumerate(placed)
    }
    assert max(seen.values()) == 1
    pair = next(r for r in records if r["kind"] == "pair")
    assert pair["call"]["source"]["topic"] == topic
    assert pair["call"]["source"]["via"]["topic"] == f"{topic}.by-conversation"
    dead = next(r for r in records if r["kind"] == "dead_letter")
    assert dead["source"]["via"]["topic"] == f"{topic}.by-conversation" and dead["raw"] == "{not json"
    assert orjson.loads(orjson.dumps(dead["source"]))["offset"] == placed[-1][1]
