"""OpenTelemetry GenAI semantic conventions, as OTLP/JSON (`{"resourceSpans": [...]}` and
`{"resourceLogs": [...]}`, one export request per record: what the Collector's file exporter
writes, and what an OTLP/HTTP JSON receiver gets).

Read from spans:

* `execute_tool` spans (`gen_ai.operation.name`): `gen_ai.tool.call.id`, `gen_ai.tool.name`,
  `gen_ai.tool.call.arguments` -> a call at the span start; `gen_ai.tool.call.result` -> its
  result at the span end, an error when the span status is ERROR or `error.type` is set. Content
  capture is opt-in, so a span often has no result attribute: the result is then the text
  NOT_RECORDED (or the status message of a failed span), never an empty payload.
* chat / inference spans: `gen_ai.input.messages` and `gen_ai.output.messages` (JSON arrays of
  `{role, parts: [{type: "tool_call", id, name, arguments} | {type: "tool_call_response", id,
  response} | {type: "text", ...}]}`); the OpenLLMetry attributes of the same data
  (`gen_ai.prompt.N.role/.tool_call_id/.content/.tool_calls.M.*`,
  `gen_ai.completion.N.tool_calls.M.id/.name/.arguments`); and span events named
  `gen_ai.assistant.message` / `gen_ai.choice` (`tool_calls`) and `gen_ai.tool.message` (`id`,
  `content`) as the older conventions emitted them.

Read from log records (the events API): the same event names, with the fields in `body`, and
`gen_ai.client.inference.operation.details` with the message attributes.

The conversation is `gen_ai.conversation.id` when the span or record has it, else its trace id
(a trace is one request of an agent in practice). Chat spans repeat the whole message history and
an `execute_tool` span repeats the call it ran: every event has format `otel`, and the pipeline's
`HistoryDedup` counts each call and each result once by id (an id-less tool part is kept only in
the span's output messages, where it is new). A request starts where a span's input messages end
with a user message that holds no tool result (or at a `gen_ai.user.message` event).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

from stream_pairer.core.formats.common import (
    CALL,
    MARK_SCOPE,
    REQUEST_PART,
    RESULT,
    Part,
    as_id,
    decode_arguments,
    mark,
    wrong_type,
)

FORMAT: Final = "otel"
# The content of an execute_tool result whose span has no gen_ai.tool.call.result attribute.
NOT_RECORDED: Final = "(result not recorded: the span has no gen_ai.tool.call.result)"
_INDEXED: Final = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(.+)$")
_TOOL_CALL: Final = re.compile(r"^tool_calls\.(\d+)\.(id|name|arguments)$")
_CALL_EVENTS: Final = frozenset({"gen_ai.assistant.message", "gen_ai.choice"})


def parse(d: dict[str, Any]) -> list[Part]:
    out: list[Part] = []
    for i, rs in enumerate(_list(d.get("resourceSpans"), "resourceSpans")):
        base = f"resourceSpans[{i}]"
        for j, ss in enumerate(_list(_obj(rs, base).get("scopeSpans"), f"{base}.scopeSpans")):
            path = f"{base}.scopeSpans[{j}].spans"
            for k, span in enumerate(_list(_obj(ss, path).get("spans"), path)):
                out.extend(_span(_obj(span, f"{path}[{k}]")))
    for i, rl in enumerate(_list(d.get("resourceLogs"), "resourceLogs")):
        base = f"resourceLogs[{i}]"
        for j, sl in enumerate(_list(_obj(rl, base).get("scopeLogs"), f"{base}.scopeLogs")):
            path = f"{base}.scopeLogs[{j}].logRecords"
            for k, lr in enumerate(_list(_obj(sl, path).get("logRecords"), path)):
                out.extend(_log(_obj(lr, f"{path}[{k}]")))
    return out


def _list(v: Any, path: str) -> list[Any]:
    if v is None:
        return []
    if type(v) is not list:
        raise wrong_type(v, "", None, path, "an array")
    return v


def _obj(v: Any, path: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise wrong_type(v, "", None, path, "an object")
    return v


def value(v: Any) -> Any:
    """An OTLP/JSON AnyValue as a plain value (intValue is a string in OTLP/JSON)."""
    if type(v) is not dict:
        return v
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "arrayValue" in v:
        arr = v["arrayValue"]
        values = arr.get("values") if type(arr) is dict else None
        return [value(x) for x in values] if type(values) is list else None
    if "kvlistValue" in v:
        kv = v["kvlistValue"]
        return attributes(kv.get("values")) if type(kv) is dict else None
    return None


def attributes(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if type(items) is not list:
        return out
    for kv in items:
        if type(kv) is dict and type(kv.get("key")) is str:
            out[kv["key"]] = value(kv.get("value"))
    return out


def nanos_ms(v: Any) -> float | None:
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n / 1_000_000 if n > 0 else None


def conversation(attrs: dict[str, Any], trace: Any) -> str | None:
    """`gen_ai.conversation.id`, else OpenInference's `session.id`, else the trace id."""
    conv = attrs.get("gen_ai.conversation.id")
    if conv is None:
        conv = attrs.get("session.id")  # OpenInference's session
    if type(conv) is str and conv.strip():
        return conv.strip()
    if type(conv) is int:
        return str(conv)
    return trace.strip() if type(trace) is str and trace.strip() else None


def as_json(v: Any) -> Any:
    if type(v) is str and v[:1] in ("[", "{"):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return None
    return v


def _span(span: dict[str, Any]) -> list[Part]:
    attrs = attributes(span.get("attributes"))
    status = span.get("status")
    code = status.get("code") if type(status) is dict else None
    message = status.get("message") if type(status) is dict else None
    events = [
        (ev.get("name"), attributes(ev.get("attributes")))
        for ev in _list(span.get("events"), "events")
        if type(ev) is dict
    ]
    return span_parts(
        attrs,
        Span(
            span.get("name"),
            code in (2, "STATUS_CODE_ERROR"),  # a tuple: code may be unhashable
            message,
            conversation(attrs, span.get("traceId")),
            nanos_ms(span.get("startTimeUnixNano")),
            nanos_ms(span.get("endTimeUnixNano")),
            events,
        ),
        span,
    )


@dataclass(frozen=True, slots=True)
class Span:
    """What `span_parts` needs of a span besides its attributes, whatever wrote it (an OTLP
    export here, an SDK exporter's JSON in spans.py): its name, whether its status is ERROR and
    its status message, its conversation, start and end (epoch ms), and its events as
    (name, attributes) pairs."""

    name: Any
    failed: bool
    status_message: Any
    conversation: str | None
    start: float | None
    end: float | None
    events: list[tuple[Any, dict[str, Any]]]


def span_parts(attrs: dict[str, Any], span: Span, block: dict[str, Any]) -> list[Part]:
    """The tool events of one span with plain (decoded, flat) attributes; `block` is the span
    as read (the raw of its events)."""
    parts: list[Part] = []
    conv, start, end = span.conversation, span.start, span.end
    if attrs.get("gen_ai.operation.name") == "execute_tool":
        call_id = as_id(attrs.get("gen_ai.tool.call.id"), "", None, "gen_ai.tool.call.id")
        name = attrs.get("gen_ai.tool.name")
        if type(name) is not str or not name.strip():
            span_name = span.name
            name = span_name[len("execute_tool ") :] if type(span_name) is str else None
        name = name.strip() if type(name) is str and name.strip() else "unknown"
        args = decode_arguments(attrs.get("gen_ai.tool.call.arguments"))
        failed = span.failed or attrs.get("error.type") is not None
        result = as_json(attrs.get("gen_ai.tool.call.result"))
        if "gen_ai.tool.call.result" not in attrs:
            # Content capture is opt-in in the conventions: most spans carry no result. The span
            # ended, so the tool ran; its status says how. An absent payload must not read as an
            # empty result (the tagger would call every such call a result_interpretation failure).
            message = span.status_message
            result = message if failed and message else NOT_RECORDED
        parts.append(mark(MARK_SCOPE, conv, start))
        parts.append((CALL, call_id, name, args, None, block, FORMAT))
        parts.append(mark(MARK_SCOPE, conv, end if end is not None else start))
        parts.append((RESULT, call_id, name, result, failed, block, FORMAT))
        return parts
    if "openinference.span.kind" in attrs:
        from stream_pairer.core.formats import openinference  # noqa: PLC0415 - its spans only

        return openinference.parts(attrs, span.failed, (conv, start, end), block)
    found = _messages(attrs, block)
    found += _indexed(attrs, block)
    for ev_name, ev_attrs in span.events:
        found += _event(ev_name, ev_attrs, block)
    if not found:
        return []
    return [mark(MARK_SCOPE, conv, start), *found]


def _log(lr: dict[str, Any]) -> list[Part]:
    attrs = attributes(lr.get("attributes"))
    name = lr.get("eventName") or attrs.get("event.name")
    body = value(lr.get("body"))
    found = _messages(attrs, lr)
    if type(body) is dict:
        found += _event(name, body, lr)
        if not found and ("gen_ai.input.messages" in body or "gen_ai.output.messages" in body):
            found = _messages(body, lr)
    if not found:
        return []
    ts = nanos_ms(lr.get("timeUnixNano")) or nanos_ms(lr.get("observedTimeUnixNano"))
    return [mark(MARK_SCOPE, conversation(attrs, lr.get("traceId")), ts), *found]


def _messages(attrs: dict[str, Any], owner: dict[str, Any]) -> list[Part]:
    """Parts of the semantic-convention message attributes (input history, then output)."""
    out: list[Part] = []
    inp = as_json(attrs.get("gen_ai.input.messages"))
    if type(inp) is list:
        for m in inp:
            if type(m) is dict:
                out.extend(_semconv_message(m, owner, history=True))
        last = inp[-1] if inp else None
        if type(last) is dict and last.get("role") == "user" and not _has_response(last):
            out.append(REQUEST_PART)
    outp = as_json(attrs.get("gen_ai.output.messages"))
    if type(outp) is list:
        for m in outp:
            if type(m) is dict:
                out.extend(_semconv_message(m, owner, history=False))
    return out


def _has_response(m: dict[str, Any]) -> bool:
    ps = m.get("parts")
    return type(ps) is list and any(type(p) is dict and p.get("type") == "tool_call_response" for p in ps)


def _semconv_message(m: dict[str, Any], owner: dict[str, Any], *, history: bool) -> list[Part]:
    out: list[Part] = []
    ps = m.get("parts")
    if type(ps) is not list:
        return out
    for p in ps:
        if type(p) is not dict:
            continue
        pt = p.get("type")
        pid = as_id(p.get("id"), "", None, "parts[].id")
        if history and pid is None:
            continue  # an id-less copy in the history cannot be told from its first occurrence
        if pt == "tool_call":
            name = p.get("name")
            if type(name) is str and name.strip():
                out.append((CALL, pid, name.strip(), decode_arguments(p.get("arguments")), None, p, FORMAT))
        elif pt == "tool_call_response":
            out.append((RESULT, pid, None, as_json(p.get("response")), None, p, FORMAT))
    return out


def _indexed(attrs: dict[str, Any], owner: dict[str, Any]) -> list[Part]:
    """OpenLLMetry's flattened `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` attributes."""
    if not any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in attrs):
        return []
    msgs: dict[tuple[int, int], dict[str, Any]] = {}
    for k, v in attrs.items():
        m = _INDEXED.match(k)
        if m is None:
            continue
        side = 0 if m.group(1) == "prompt" else 1
        msgs.setdefault((side, int(m.group(2))), {})[m.group(3)] = v
    out: list[Part] = []
    last_prompt = max((i for side, i in msgs if side == 0), default=None)
    for (side, i), fields in sorted(msgs.items()):
        history = side == 0
        if fields.get("role") == "tool":
            rid = as_id(fields.get("tool_call_id"), "", None, f"gen_ai.prompt.{i}.tool_call_id")
            if rid is not None:
                out.append((RESULT, rid, None, as_json(fields.get("content")), None, fields, FORMAT))
            continue
        calls: dict[int, dict[str, Any]] = {}
        for k, v in fields.items():
            tm = _TOOL_CALL.match(k)
            if tm is not None:
                calls.setdefault(int(tm.group(1)), {})[tm.group(2)] = v
        for _, c in sorted(calls.items()):
            cid = as_id(c.get("id"), "", None, "tool_calls.id")
            name = c.get("name")
            if (history and cid is None) or type(name) is not str or not name.strip():
                continue
            out.append((CALL, cid, name.strip(), decode_arguments(c.get("arguments")), None, c, FORMAT))
        if history and i == last_prompt and fields.get("role") == "user":
            out.append(REQUEST_PART)
    return out


def _event(name: Any, body: dict[str, Any], owner: dict[str, Any]) -> list[Part]:
    """One GenAI event (span event attributes or a log record body)."""
    if name == "gen_ai.user.message":
        return [REQUEST_PART]
    if name == "gen_ai.tool.message":
        rid = as_id(body.get("id"), "", None, "body.id")
        return [(RESULT, rid, None, as_json(body.get("content")), None, body, FORMAT)]
    if type(name) is str and name in _CALL_EVENTS:
        msg = body.get("message") if name == "gen_ai.choice" else body
        if type(msg) is not dict:
            return []
        calls = as_json(msg.get("tool_calls"))
        out: list[Part] = []
        for tc in calls if type(calls) is list else []:
            if type(tc) is not dict:
                continue
            fn = tc.get("function")
            fn = fn if type(fn) is dict else {}
            fname = fn.get("name")
            if type(fname) is not str or not fname.strip():
                continue
            cid = as_id(tc.get("id"), "", None, "tool_calls[].id")
            out.append((CALL, cid, fname.strip(), decode_arguments(fn.get("arguments")), None, tc, FORMAT))
        return out
    return []
