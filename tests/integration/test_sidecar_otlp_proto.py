"""A topic fed by the OpenTelemetry Collector's Kafka exporter, default encoding `otlp_proto`:
each message is one binary `TracesData` protobuf (no key, as the exporter writes it unless
told to partition by trace id). The sidecar reads it as it is, against a real broker: the
`execute_tool` spans pair by `gen_ai.tool.call.id`, a failed span is an error result, a chat
span's output call that never ran ends as an orphan call on the wall-clock timeout, a tool
result for an unknown id as an orphan result, and the `otlp_json` encoding of the same spans
gives the same records."""

from __future__ import annotations

import time
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2

from .conftest import KafkaBroker, TopicFactory
from .sidecar_support import OutputReader, config, produce, started, summary

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")


def _attrs(d: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in d.items()]


def _span(n: int, name: str, attrs: dict[str, Any], error: str | None = None) -> trace_pb2.Span:
    start = time.time_ns()
    span = trace_pb2.Span(
        trace_id=TRACE,
        span_id=n.to_bytes(8, "big"),
        name=name,
        kind=trace_pb2.Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=start + 5_000_000,
        attributes=_attrs({"gen_ai.conversation.id": "otlp-conv-1", **attrs}),
    )
    if error is not None:
        span.status.code = trace_pb2.Status.STATUS_CODE_ERROR
        span.status.message = error
    return span


def _traces(*spans: trace_pb2.Span) -> trace_pb2.TracesData:
    data = trace_pb2.TracesData()
    rs = data.resource_spans.add()
    rs.resource.attributes.extend(_attrs({"service.name": "support-agent"}))
    ss = rs.scope_spans.add()
    ss.scope.name = "opentelemetry.instrumentation.openai_v2"
    ss.spans.extend(spans)
    return data


def _tool(
    n: int, call_id: str, name: str, result: str | None = None, error: str | None = None
) -> trace_pb2.Span:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
    }
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result
    return _span(n, f"execute_tool {name}", attrs, error)


def _messages() -> list[trace_pb2.TracesData]:
    chat = _span(
        1,
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"tool_call","id":"call_n3ver",'
            '"name":"send_sms","arguments":{"to":"+15550100"}}]}]',
            "gen_ai.input.messages": '[{"role":"tool","parts":[{"type":"tool_call_response",'
            '"id":"call_gh0st","response":"stale"}]}]',
        },
    )
    return [
        _traces(_tool(2, "call_0rder", "lookup_order", result='{"status":"shipped"}')),
        _traces(_tool(3, "call_r3fund", "issue_refund", error="PermissionError: refunds disabled"), chat),
    ]


async def _pairs_from(bootstrap: str, topic: str, values: list[bytes]) -> list[dict[str, Any]]:
    await produce(bootstrap, topic, [(None, v) for v in values])
    sidecar = await started(config(bootstrap, topic, f"g-{topic}"))
    try:
        async with OutputReader(bootstrap, topic) as reader:
            await reader.until(lambda recs: "orphan_call:timeout" in summary(recs), timeout_s=30)
            await reader.settle(1.0)
            records = reader.records
    finally:
        assert await sidecar.stop()
    return records


def _view(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for r in records:
        if r["kind"] == "pair":
            out.append(
                (
                    "pair",
                    r["match"],
                    r["call"]["id"],
                    r["tool"],
                    r["result"]["is_error"],
                    r["conversation_id"],
                )
            )
        else:
            out.append(
                (r["kind"], r.get("reason"), (r.get("event") or {}).get("id"), r.get("conversation_id"))
            )
    return sorted(out, key=repr)


EXPECTED = [
    ("orphan_call", "timeout", "call_n3ver", "otlp-conv-1"),
    ("orphan_result", "no_call", "call_gh0st", "otlp-conv-1"),
    ("pair", "id", "call_0rder", "lookup_order", False, "otlp-conv-1"),
    ("pair", "id", "call_r3fund", "issue_refund", True, "otlp-conv-1"),
]


async def test_collector_kafka_exporter_otlp_proto_topic_pairs(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(1)
    values = [m.SerializeToString() for m in _messages()]
    assert all(v[:1] == b"\x0a" for v in values)  # binary protobuf, not JSON
    records = await _pairs_from(kafka_broker.bootstrap, topic, values)
    assert _view(records) == EXPECTED
    assert all(r["call"]["format"] == "otel" for r in records if r["kind"] == "pair")


async def test_collector_kafka_exporter_otlp_json_topic_pairs_the_same(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(1)
    values = []
    for m in _messages():  # otlp_json: the OTLP/JSON mapping, ids in hex
        d = json_format.MessageToDict(m)
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    sp["traceId"], sp["spanId"] = TRACE.hex(), "00"
        values.append(json_format.json.dumps(d).encode())
    records = await _pairs_from(kafka_broker.bootstrap, topic, values)
    assert _view(records) == EXPECTED
