"""OTLP protobuf records, as the OpenTelemetry Collector's Kafka exporter writes them with its
default encoding (`otlp_proto`): each Kafka message is one binary `TracesData` (or `LogsData`)
protobuf. Decoded with the `opentelemetry-proto` package's generated classes into the OTLP/JSON
shape (`resourceSpans`, camelCase, ids in hex, 64-bit integers as strings) that otel.py reads,
so a Collector-fed topic pairs like an OTLP/JSON file.

Tried only once a record failed to decode as JSON (parse_record's error path): JSON records pay
nothing for it. A record that is not an OTLP protobuf either stays a dead letter for the reason
its JSON decode gave.
"""

from __future__ import annotations

import base64
import contextlib
from typing import Any, Final

# A TracesData / LogsData message starts with field 1 (resource_spans / resource_logs),
# length-delimited: tag byte 0x0A.
_TAG: Final = 0x0A
_ID_KEYS: Final = ("traceId", "spanId", "parentSpanId")


def decode(raw: bytes) -> dict[str, Any] | None:
    """The OTLP/JSON form of a binary TracesData / LogsData record, or None if it is not one."""
    if not raw or raw[0] != _TAG:
        return None
    from google.protobuf import json_format  # noqa: PLC0415 - only protobuf records need it
    from google.protobuf.message import DecodeError  # noqa: PLC0415
    from opentelemetry.proto.logs.v1 import logs_pb2  # noqa: PLC0415
    from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: PLC0415

    for cls, top, scopes, items in (
        (trace_pb2.TracesData, "resourceSpans", "scopeSpans", "spans"),
        (logs_pb2.LogsData, "resourceLogs", "scopeLogs", "logRecords"),
    ):
        msg = cls()
        try:
            msg.ParseFromString(raw)
        except DecodeError:
            continue
        d: dict[str, Any] = json_format.MessageToDict(msg)
        found = [item for rs in d.get(top, []) for ss in rs.get(scopes, []) for item in ss.get(items, [])]
        if found and not all(_unknown_only(item) for item in found):
            for item in found:
                _hex_ids(item)
            return d
    return None


def _unknown_only(item: dict[str, Any]) -> bool:
    """A message of the other kind parses without error (proto3 keeps what it does not know as
    unknown fields) but fills none of the fields that make it a span or a log record."""
    return not any(k in item for k in ("name", "traceId", "body", "attributes", "timeUnixNano"))


def _hex_ids(item: dict[str, Any]) -> None:
    """`MessageToDict` writes bytes in base64; OTLP/JSON writes trace and span ids in hex."""
    for key in _ID_KEYS:
        v = item.get(key)
        if type(v) is str:
            with contextlib.suppress(ValueError):
                item[key] = base64.b64decode(v).hex()
