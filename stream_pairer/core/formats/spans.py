"""OpenTelemetry spans as the SDK exporters write them, one span per record, attributes flat:
the shapes people get from a console or file exporter without a Collector (an OTLP export,
`resourceSpans`, is read by otel.py).

* Python `ConsoleSpanExporter` (`span.to_json()`, pretty-printed, one span after the other):
  `{name, context: {trace_id, span_id}, start_time, end_time, status: {status_code,
  description}, attributes: {...}, events: [{name, timestamp, attributes}]}`;
* span snapshots with flat `attributes` (JS `ReadableSpan` dumps, the JSON span exporters of
  agent frameworks, Phoenix span JSON): `{traceId, spanId | id, name, attributes: {...},
  startTime | timestamp, endTime | duration, status: {code, message}, events}`;
* Go `stdouttrace`: `{Name, SpanContext: {TraceID, SpanID}, StartTime, EndTime, Attributes:
  [{Key, Value: {Type, Value}}], Events: [{Name, Attributes, Time}], Status: {Code,
  Description}}`.

Each becomes the plain attributes and `otel.Span` that otel.py reads for every span (GenAI
semantic conventions, OpenLLMetry, OpenInference), so one span shape, however written, gives the
same events. Nested attribute objects (`{"gen_ai": {"tool": {...}}}`) are flattened to dotted keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from stream_pairer.core.formats import otel
from stream_pairer.core.formats.common import FormatError, Part, parse_ts

_FAILED: Final = frozenset({"ERROR", "STATUS_CODE_ERROR", "Error", 2})


def claims(d: dict[str, Any]) -> bool:
    """Whether a top-level record is one span as an SDK exporter writes it."""
    ctx = d.get("context")
    if type(ctx) is dict and "trace_id" in ctx and type(d.get("attributes")) is dict:
        return True
    if type(d.get("SpanContext")) is dict and "Name" in d:
        return True
    return type(d.get("traceId")) is str and type(d.get("attributes")) is dict and "name" in d


@dataclass(frozen=True, slots=True)
class _Shape:
    """Where one exporter writes each part of a span."""

    name: str
    status: str
    code: str
    message: str
    trace: tuple[str, str]  # (context object, trace id member); context "" = the span itself
    start: tuple[str, ...]  # the first present is the start time
    end: tuple[str, ...]
    attributes: str
    events: str
    event_name: str
    read: Callable[[Any], dict[str, Any]]  # the attribute list or object, as plain attributes


def parse(d: dict[str, Any]) -> list[Part]:
    if "SpanContext" in d:
        shape = _GO
    elif type(d.get("context")) is dict:
        shape = _PYTHON
    else:
        shape = _SNAPSHOT
    status = d.get(shape.status)
    status = status if type(status) is dict else {}
    ctx = d.get(shape.trace[0]) if shape.trace[0] else d
    trace = ctx.get(shape.trace[1]) if type(ctx) is dict else None
    attrs = shape.read(d.get(shape.attributes))
    start = _ms(next((d[k] for k in shape.start if k in d), None))
    end = _ms(next((d[k] for k in shape.end if k in d), None))
    duration = d.get("duration")
    if end is None and start is not None and (type(duration) is int or type(duration) is float):
        end = start + duration / 1000.0  # JS ReadableSpan dumps: microseconds
    events = [
        (ev.get(shape.event_name), shape.read(ev.get(shape.attributes)))
        for ev in _list(d.get(shape.events))
        if type(ev) is dict
    ]
    span = otel.Span(
        d.get(shape.name),
        _failed(status.get(shape.code)),
        status.get(shape.message),
        otel.conversation(attrs, trace),
        start,
        end,
        events,
    )
    return otel.span_parts(attrs, span, d)


def _failed(code: Any) -> bool:
    return (type(code) is int or type(code) is str) and code in _FAILED


def _key_values(items: Any) -> dict[str, Any]:
    """Go's `[{Key, Value: {Type, Value}}]` attribute list."""
    out: dict[str, Any] = {}
    for kv in _list(items):
        if type(kv) is dict and type(kv.get("Key")) is str:
            v = kv.get("Value")
            out[kv["Key"]] = v.get("Value") if type(v) is dict else v
    return out


def _flat(attrs: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    if out is None:
        out = {}
    if type(attrs) is not dict:
        return out
    for k, v in attrs.items():
        if type(v) is dict:
            _flat(v, f"{prefix}{k}.", out)
        else:
            out[f"{prefix}{k}"] = v
    return out


def _list(v: Any) -> list[Any]:
    return v if type(v) is list else []


def _ms(v: Any) -> float | None:
    """A span time: RFC 3339 (Go writes nanoseconds: cut to microseconds), epoch numbers of any
    unit, or an `[seconds, nanoseconds]` HrTime (JS). None when unreadable: the record's time is
    then used, the span is not refused for its clock."""
    if v is None:
        return None
    if type(v) is list and len(v) == 2 and type(v[0]) is int and type(v[1]) is int:
        seconds: int = v[0]
        nanos: int = v[1]
        return seconds * 1000.0 + nanos / 1_000_000
    if type(v) is str and "." in v:
        head, _, frac = v.partition(".")
        digits = len(frac) - len(frac.lstrip("0123456789"))
        if digits > 6:
            v = f"{head}.{frac[:6]}{frac[digits:]}"
    try:
        return parse_ts(v, "", "time")
    except FormatError:
        return None


# The exporters' spellings (after the readers they name).
_PYTHON: Final = _Shape(
    "name", "status", "status_code", "description", ("context", "trace_id"), ("start_time",),
    ("end_time",), "attributes", "events", "name", _flat,
)  # fmt: skip
_SNAPSHOT: Final = _Shape(
    "name", "status", "code", "message", ("", "traceId"), ("startTime", "timestamp", "start_time"),
    ("endTime", "end_time"), "attributes", "events", "name", _flat,
)  # fmt: skip
_GO: Final = _Shape(
    "Name", "Status", "Code", "Description", ("SpanContext", "TraceID"), ("StartTime",), ("EndTime",),
    "Attributes", "Events", "Name", _key_values,
)  # fmt: skip
