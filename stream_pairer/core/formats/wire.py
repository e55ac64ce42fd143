"""HTTP wire logs: one `{request, response}` exchange per record, as proxies and recorders write
them (mitmproxy dumps, LiteLLM / Helicone style loggers, claude-code-proxy captures...).

`request.body` and `response.body` (also `json`; an object, or a JSON text) are provider bodies;
a recorder that logs the bodies themselves as `request` / `response` (objects or JSON text, no
`body` envelope) is read the same way:

* request: Anthropic / OpenAI Chat / Bedrock Converse `messages`, OpenAI Responses `input`,
  Gemini `contents`;
* response: an Anthropic message, a Chat Completion (`choices`), a Responses object (`output`),
  a Gemini `candidates` response, a Bedrock `output.message`.

Calls come from the response body, results from the request body. Every request re-sends the
whole history, so the same call and result appear again in every later exchange: all events are
emitted with format `wire`, and the pipeline's `HistoryDedup` admits each (type, id) once per
conversation (a repeated copy is counted as `duplicate_copies`, not as a new event). Calls that
appear only in the history (a response the recorder did not capture, e.g. a streamed one) are
therefore still found, once. Events without an id cannot be recognised again, so id-less calls
are taken from the response only and id-less results only from the messages after the last
assistant turn (the ones this request adds).

A request whose last message is a user message without tool results starts a request (an agent
turn) for the loop caps. A response body that is not JSON (an SSE stream) yields no call: its calls
are read from the next request's history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from stream_pairer.core.formats import gemini, openai
from stream_pairer.core.formats.common import (
    CALL,
    REQUEST_PART,
    RESULT,
    Part,
    wrong_type,
)

FORMAT: Final = "wire"
_ASSISTANT: Final = frozenset({"assistant", "model"})

MessageParser = Callable[[dict[str, Any], str, str], list[Part]]
Dispatcher = Callable[[dict[str, Any], str, bool], list[Part]]


def parse(d: dict[str, Any], request: Any, message: MessageParser, dispatch: Dispatcher) -> list[Part]:
    response = d.get("response")
    req = _body(request, "request")
    resp = _body(response, "response")
    out: list[Part] = []
    if req is not None:
        out.extend(_request_parts(req, message))
    if resp is not None:
        for p in dispatch(resp, "response.body.", False):
            if p[0] == CALL or p[0] == RESULT:  # a server tool's result rides in the response
                out.append(_as_wire(p))
    return out


# Keys that make `request` / `response` the provider body itself (a recorder that logs bodies
# without an HTTP envelope): list-valued message keys, or Bedrock's `output.message`.
_BODY_LISTS: Final = frozenset(
    {"messages", "input", "contents", "content", "choices", "output", "candidates"}
)


def body_of(side: Any, name: str) -> dict[str, Any] | None:
    """The provider body of one side of an exchange (see `_body`), for recordings.py."""
    return _body(side, name)


def _body(side: Any, name: str) -> dict[str, Any] | None:
    if side is None:
        return None
    if type(side) is str or type(side) is bytes:
        body: Any = side  # the body itself, as JSON text
    elif type(side) is not dict:
        raise wrong_type(side, "", None, name, "an object or a JSON text")
    else:
        body = side.get("body")
        if body is None:
            body = side.get("json")
        if body is None and _is_body(side):
            body = side
        elif type(body) is dict and type(body.get("string")) is str:
            body = body["string"]  # a VCR.py cassette's `body: {string: ...}`
    if type(body) is str or type(body) is bytes:
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None  # a streamed (SSE) or non-JSON body: nothing to read here
    return body if type(body) is dict else None


def _is_body(side: dict[str, Any]) -> bool:
    if any(type(side.get(k)) is list for k in _BODY_LISTS):
        return True
    out = side.get("output")
    return type(out) is dict and type(out.get("message")) is dict


def _request_parts(body: dict[str, Any], message: MessageParser) -> list[Part]:
    items = body.get("messages")
    key = "messages"
    if items is None:
        items, key = body.get("input"), "input"
    if items is None:
        items, key = body.get("contents"), "contents"
    if type(items) is str:
        return [REQUEST_PART]  # Responses `input` given as a plain prompt
    if type(items) is not list:
        return []
    prefix = f"request.body.{key}"
    # Per message: its parts, and whether it is an assistant turn.
    per: list[tuple[list[Part], bool]] = []
    for i, m in enumerate(items):
        if type(m) is not dict:
            raise wrong_type(m, prefix, i, None, "a message object")
        t = m.get("type")
        if key == "input" and type(t) is str and t in openai.RESPONSES_TOOL_ITEMS:
            parts = openai.responses_item(m, t, prefix, i)
            per.append((parts, parts[0][0] == CALL))
            continue
        if key == "contents":
            found = gemini.parts(m, f"{prefix}[{i}].")
            if not found and m.get("role") == "user":
                found = [REQUEST_PART]
        elif "role" in m or "content" in m:
            found = message(m, f"{prefix}[{i}].", "anthropic")
        else:
            found = []
        role = m.get("role")
        per.append((found, type(role) is str and role in _ASSISTANT))
    last_assistant = max((i for i, (_, is_assistant) in enumerate(per) if is_assistant), default=-1)
    out: list[Part] = []
    for i, (parts, _) in enumerate(per):
        for p in parts:
            if p[0] == CALL:
                if p[1] is not None:
                    out.append(_as_wire(p))
            elif p[0] == RESULT and (p[1] is not None or i > last_assistant):
                out.append(_as_wire(p))
    if per and per[-1][0][:1] == [REQUEST_PART]:
        out.insert(0, REQUEST_PART)
    return out


def _as_wire(p: Part) -> Part:
    return (p[0], p[1], p[2], p[3], p[4], p[5], FORMAT)
