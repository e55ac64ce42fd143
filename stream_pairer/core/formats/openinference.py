"""OpenInference span attributes (Arize Phoenix, and the openinference-instrumentation-*
packages): the attributes of one span, flat, as an OTLP export or an SDK exporter carries them.

An LLM span (`openinference.span.kind` LLM) holds the messages the model saw and wrote, one
attribute per field, indexed:

* `llm.output_messages.N.message.tool_calls.M.tool_call.id`, `...tool_call.function.name`,
  `...tool_call.function.arguments` (a JSON text): the calls the model made;
* `llm.input_messages.N.message.role` `tool` with `...message.tool_call_id` and
  `...message.content`: results sent back; the input's assistant messages repeat earlier calls.

Every LLM span repeats the history, so events have format `openinference`, one of the
RESENT_FORMATS: the pipeline counts each call and each result once by id. Id-less tool parts
are kept only in the output messages (where they are new), as for `otel`.

A TOOL span (`tool.name`, `input.value`, `output.value`) is the run of one tool; it names its
call only when the instrumentation sets `tool_call.id`. With the id it is read (a call and its
result, deduplicated against the LLM spans' copies); without one it is not: the same call is
already in the LLM span's output with its id, and reading it again would count one call twice.
Phoenix's own span JSON (its `attributes` nested rather than flat) is read the same way.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import (
    CALL,
    MARK_SCOPE,
    REQUEST_PART,
    RESULT,
    Part,
    as_id,
    decode_arguments,
    mark,
)

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "openinference",
    "`openinference.span.kind` in a span's attributes (Phoenix / openinference-instrumentation spans: LLM"
    " spans' `llm.output_messages.*.tool_calls`, TOOL spans with `tool_call.id`)",
    {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "c1a0000000000004",
        "name": "get_weather",
        "startTime": "2025-05-20T10:08:22.000000Z",
        "endTime": "2025-05-20T10:08:22.400000Z",
        "status": {"code": 2, "message": "HTTPError 503"},
        "attributes": {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool_call.id": "call_w3ath3r",
            "input.value": '{"city": "Lisbon"}',
            "output.value": "HTTPError 503: upstream unavailable",
            "session.id": "sess-9d2",
        },
    },
)

FORMAT: Final = "openinference"
_MESSAGE: Final = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_TOOL_CALL: Final = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(.+)$")


def parts(
    attrs: dict[str, Any],
    failed: bool,
    scope: tuple[str | None, float | None, float | None],
    block: dict[str, Any],
) -> list[Part]:
    """The events of one span; `scope` is its (conversation, start, end)."""
    conv, start, end = scope
    kind = attrs.get("openinference.span.kind")
    if kind == "TOOL":
        call_id = as_id(attrs.get("tool_call.id"), "", None, "tool_call.id")
        name = attrs.get("tool.name")
        if call_id is None or type(name) is not str or not name.strip():
            return []
        output = attrs.get("output.value")
        return [
            mark(MARK_SCOPE, conv, start),
            (CALL, call_id, name.strip(), decode_arguments(attrs.get("input.value")), None, block, FORMAT),
            mark(MARK_SCOPE, conv, end if end is not None else start),
            (RESULT, call_id, name.strip(), _text_or_json(output), failed, block, FORMAT),
        ]
    msgs = _messages(attrs)
    if not msgs:
        return []
    out: list[Part] = []
    last_input = max((i for side, i in msgs if side == 0), default=None)
    for (side, i), fields in sorted(msgs.items()):
        history = side == 0
        if fields.get("role") == "tool":
            rid = as_id(fields.get("tool_call_id"), "", None, f"llm.input_messages.{i}.message.tool_call_id")
            if rid is not None or not history:
                out.append((RESULT, rid, None, _text_or_json(fields.get("content")), None, fields, FORMAT))
            continue
        for _, c in sorted(_calls(fields).items()):
            cid = as_id(c.get("id"), "", None, "tool_call.id")
            name = c.get("function.name")
            if (history and cid is None) or type(name) is not str or not name.strip():
                continue
            args = decode_arguments(c.get("function.arguments"))
            out.append((CALL, cid, name.strip(), args, None, c, FORMAT))
        if history and i == last_input and fields.get("role") == "user":
            out.append(REQUEST_PART)
    if not out:
        return []
    return [mark(MARK_SCOPE, conv, start), *out]


def _messages(attrs: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    """(side, index) -> the message's fields (`role`, `tool_call_id`, `tool_calls.M.tool_call.*`),
    from flat attributes or from Phoenix's nested lists (`llm.input_messages: [{message.role...}]`)."""
    msgs: dict[tuple[int, int], dict[str, Any]] = {}
    for side, key in ((0, "llm.input_messages"), (1, "llm.output_messages")):
        nested = attrs.get(key)
        if type(nested) is list:
            for i, m in enumerate(nested):
                if type(m) is dict:
                    msgs[(side, i)] = _flatten(m.get("message", m), "")
    if msgs:
        return msgs
    for k, v in attrs.items():
        if not k.startswith("llm."):
            continue
        m = _MESSAGE.match(k)
        if m is not None:
            side = 0 if m.group(1) == "input" else 1
            msgs.setdefault((side, int(m.group(2))), {})[m.group(3)] = v
    return msgs


def _flatten(v: Any, prefix: str) -> dict[str, Any]:
    """Phoenix's nested form to the flat one: `{"message.tool_calls": [{"tool_call.id": ...}]}`
    -> `{"tool_calls.0.tool_call.id": ...}` (its keys are themselves dotted)."""
    out: dict[str, Any] = {}
    if type(v) is dict:
        for k, x in v.items():
            key = str(k)
            if not prefix and key.startswith("message."):
                key = key[len("message.") :]
            out.update(_flatten(x, f"{prefix}{key}."))
    elif type(v) is list and prefix:
        for i, x in enumerate(v):
            out.update(_flatten(x, f"{prefix}{i}."))
    elif prefix:
        out[prefix[:-1]] = v
    return out


def _calls(fields: dict[str, Any]) -> dict[int, dict[str, Any]]:
    calls: dict[int, dict[str, Any]] = {}
    for k, v in fields.items():
        tm = _TOOL_CALL.match(k)
        if tm is not None:
            calls.setdefault(int(tm.group(1)), {})[tm.group(2)] = v
    return calls


def _text_or_json(v: Any) -> Any:
    if type(v) is str and v[:1] in ("[", "{"):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v
