"""The sidecar with `--raw call` against a real broker: its output records carry `raw` on call
sides only (dead letters keep theirs), and its two byte counters are exactly the bytes that went
through Kafka: stream_pairer_input_bytes_total the input message values, and
stream_pairer_output_bytes_total{kind} the output message values, by record kind."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import orjson

from stream_pairer.core.vocab import RawMode
from tests.reference.engine import EngineConfig

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import OutputReader, config, event, http_get, produce, started, summary


def _metric(text: str, name: str, **labels: str) -> float:
    shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(f"{name}{{{shown}}}" if shown else name) + r" (\S+)"
    (value,) = re.findall(f"^{pattern}$", text, re.M)
    return float(value)


async def test_raw_call_records_and_byte_counters(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(2)
    big = {"text": "x" * 2_000}  # results are the large side
    traffic: list[tuple[bytes | None, bytes | None]] = []
    for c in range(6):
        conv = f"conv-{c}"
        traffic += [
            (conv.encode(), event(conv, "tool_call", f"{conv}-a", arguments={"q": c})),
            (conv.encode(), event(conv, "tool_result", f"{conv}-a", content=big)),
            (conv.encode(), event(conv, "tool_result", f"{conv}-ghost")),  # orphan_result: no_call
        ]
    traffic.append((b"bad", b"{not json"))
    await produce(bootstrap, topic, traffic)

    engine = EngineConfig(call_timeout_ms=3_000, result_grace_ms=1_000, raw=RawMode.CALL)
    sidecar = await started(config(bootstrap, topic, f"g-{topic}", engine=engine))
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: summary(recs)["orphan_result:no_call"] == 6, timeout_s=30)
            await reader.settle(1.0)
            messages = list(reader.messages)
        port = sidecar.http_port
        assert port is not None
        status, body = await asyncio.to_thread(http_get, port, "/metrics")
    finally:
        assert await sidecar.stop()
    assert status == 200
    text = body.decode()

    records = [orjson.loads(m.value) for m in messages]
    assert Counter(r["kind"] for r in records) == {"pair": 6, "orphan_result": 6, "dead_letter": 1}
    for r in records:
        if r["kind"] == "pair":
            assert "raw" in r["call"] and "raw" not in r["result"]
            assert r["result"]["content"] == big  # the payload itself is kept, once
        elif r["kind"] == "orphan_result":
            assert "raw" not in r["event"] and r["event"]["source"]["topic"] == topic
        else:
            assert r["raw"] == "{not json"

    sent = sum(len(v) for _, v in traffic if v is not None)
    assert _metric(text, "stream_pairer_input_bytes_total") == sent
    by_kind: Counter[str] = Counter()
    for m, r in zip(messages, records, strict=True):
        by_kind[r["kind"]] += len(m.value)
    for kind in ("pair", "orphan_call", "orphan_result", "dead_letter"):
        assert _metric(text, "stream_pairer_output_bytes_total", kind=kind) == by_kind[kind], kind
