"""LiteLLM's logging payload (`StandardLoggingPayload`, what its callbacks, the proxy's spend
logs and `litellm --detailed_debug` dumps write): `{id, call_type, model, messages: [...],
response: {...}, status, startTime, endTime, metadata}`, one model call per record.

`messages` is the request's history (Chat Completions messages, whatever the provider: LiteLLM
translates) and `response` the ModelResponse (a Chat Completion): the record is read as an HTTP
exchange (wire.py), so the history re-sent by every call is counted once by id.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats import wire
from stream_pairer.core.formats.common import Part


def claims(d: dict[str, Any]) -> bool:
    return "call_type" in d and "messages" in d and "response" in d


def parse(d: dict[str, Any], message: wire.MessageParser, dispatch: wire.Dispatcher) -> list[Part]:
    response = d.get("response")
    if type(response) is not dict or "choices" not in response:
        response = None  # a failed call (`status: failure`) or an embedding: no model turn
    exchange = {"request": {"body": {"messages": d.get("messages")}}, "response": {"body": response}}
    return wire.parse(exchange, exchange["request"], message, dispatch)
