"""`run --map` and discovery against a real broker: an in-house shape read through a jq mapping,
a record the mapping rejects dead-lettered with its message, and (without a mapping) unnamed shapes
discovered and paired by id; the audit of the topics, with the same mapping, finds every input
event in exactly one output record."""

from __future__ import annotations

from typing import Any

import orjson

from stream_pairer.analysis.audit import Auditor
from stream_pairer.cli.commands.audit import audit_topics
from stream_pairer.core.formats import FormatConfig
from stream_pairer.core.mapping import compile_mapping

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import OutputReader, config, produce, started

PROGRAM = """
if .ev == "start" then {type: "tool_call", id: .span, name: .tool, arguments: .params}
elif .ev == "end" then {type: "tool_result", call_id: .span, content: .out}
elif .ev == "bad" then error("no span in \\(.ev)")
else empty end
"""


async def _run(bootstrap: str, topic: str, formats: FormatConfig, until: int) -> list[dict[str, Any]]:
    sidecar = await started(config(bootstrap, topic, f"g-{topic}", formats=formats))
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: len(recs) >= until, 30)
            await reader.settle(0.5)
            records: list[dict[str, Any]] = reader.records
    finally:
        assert await sidecar.stop()
    report = await audit_topics(
        Auditor(formats),
        bootstrap,
        [topic],
        [f"{topic}.pairs", f"{topic}.orphans", f"{topic}.dead-letter"],
        timeout_s=60,
    )
    assert report.ok and report.lost == 0, report.as_dict()
    return records


async def test_a_mapped_topic_pairs_and_audits(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(2)
    items = [
        (b"s1", {"ev": "start", "span": "a", "tool": "search", "params": {"q": 1}}),
        (b"s2", {"ev": "start", "span": "a", "tool": "fetch", "params": {}}),
        (b"s1", {"ev": "chatter"}),
        (b"s2", {"ev": "bad"}),
        (b"s2", {"ev": "end", "span": "a", "out": "page"}),
        (b"s1", {"ev": "end", "span": "a", "out": "hits"}),
    ]
    await produce(kafka_broker.bootstrap, topic, [(k, orjson.dumps(v)) for k, v in items])
    formats = FormatConfig(mapping=compile_mapping(PROGRAM, "rules.jq"))
    records = await _run(kafka_broker.bootstrap, topic, formats, until=3)
    pairs = sorted(
        (r["conversation_id"], r["tool"], r["result"]["content"], r["call"]["format"])
        for r in records
        if r["kind"] == "pair"
    )
    assert pairs == [("s1", "search", "hits", "mapped"), ("s2", "fetch", "page", "mapped")]
    (dead,) = [r for r in records if r["kind"] == "dead_letter"]
    assert (
        dead["reason"] == "mapping_error"
        and dead["detail"] == "--map rules.jq: the mapping rejected the record: no span in bad"
    )


async def test_unnamed_shapes_are_discovered_in_the_sidecar(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(1)
    items = [
        {"step": {"invoke": {"tool": "weather", "params": {"city": "Oslo"}, "call_id": "v1"}}},
        {"weird": {"shape": 1}},
        {"step": {"reply": {"call_id": "v1", "output": {"c": 4}}}},
    ]
    await produce(kafka_broker.bootstrap, topic, [(b"conv", orjson.dumps(v)) for v in items])
    records = await _run(kafka_broker.bootstrap, topic, FormatConfig(), until=2)
    (pair,) = [r for r in records if r["kind"] == "pair"]
    assert (pair["match"], pair["call"]["format"], pair["result"]["content"]) == (
        "id",
        "discovered",
        {"c": 4},
    )
    (dead,) = [r for r in records if r["kind"] == "dead_letter"]
    assert dead["reason"] == "unknown_shape" and "keys seen: [shape, weird]" in dead["detail"]
