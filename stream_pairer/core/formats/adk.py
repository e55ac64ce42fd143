"""Google Agent Development Kit (ADK) events, as `Event.model_dump_json()` writes them (the
session services' stored events, `adk web` / `adk api_server` `/run` and `/run_sse` responses,
the eval `.evalset.json` / session exports): `{id, invocationId, author, timestamp, partial?,
content: {role, parts: [{functionCall: {id, name, args}} | {functionResponse: {id, name,
response}} | {text}]}, actions}` (snake_case `invocation_id`, `function_call` when dumped
without aliases).

ADK gives every call an id (`adk-...`) and copies it onto the response, so pairs are by id.
A streamed model turn is written as `partial: true` events followed by the final event, and the
partial copies of a call can carry other ids than the final one (adk-python #4609): partial
events are not read, the final event holds the call. A whole session (`{id, appName, events:
[...]}`) is read event by event, in its own conversation (the session id).
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import gemini
from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import (
    CALL,
    MARK_SCOPE,
    REQUEST_PART,
    RESULT,
    Part,
    mark,
    parse_ts,
    wrong_type,
)

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "adk",
    "a `content` object beside `author` / `invocationId` (Google ADK events; `functionCall` / "
    "`functionResponse` parts), or a session `{appName, events}`",
    {
        "content": {
            "parts": [
                {
                    "functionCall": {
                        "id": "adk-4a5b6c7d-8e9f-4012-a345-6789abcdef01",
                        "args": {"city": "New York"},
                        "name": "get_weather",
                    }
                }
            ],
            "role": "model",
        },
        "invocationId": "e-6a3f1c2d-9b7e-4f01-8a2c-3d4e5f6a7b8c",
        "author": "weather_agent",
        "id": "Rx3vNc4d",
        "timestamp": 1747735501.388,
        "session_id": "adk-sess-01",
    },
)

FORMAT: Final = "adk"


def claims(d: dict[str, Any]) -> bool:
    """An event (`content` object and an author or invocation) or a session holding events."""
    if type(d.get("content")) is dict:
        return "author" in d or "invocationId" in d or "invocation_id" in d
    return type(d.get("events")) is list and ("appName" in d or "app_name" in d)


def parse(d: dict[str, Any]) -> list[Part]:
    events = d.get("events")
    if type(events) is list and "content" not in d:
        return _session(d, events)
    return _event(d, "")


def _event(d: dict[str, Any], prefix: str) -> list[Part]:
    if d.get("partial") is True:
        return []
    content = d.get("content")
    if type(content) is not dict:
        return []
    found = gemini.parts(content, f"{prefix}content.")
    if not found:
        return [REQUEST_PART] if d.get("author") == "user" else []
    return [(p[0], p[1], p[2], p[3], p[4], p[5], FORMAT) for p in found]


def _session(d: dict[str, Any], events: list[Any]) -> list[Part]:
    sid = d.get("id")
    conv = str(sid).strip() if type(sid) in (str, int) and str(sid).strip() else None
    out: list[Part] = []
    for i, ev in enumerate(events):
        if type(ev) is not dict:
            raise wrong_type(ev, "events", i, None, "an event object")
        found = _event(ev, f"events[{i}].")
        if not any(p[0] == CALL or p[0] == RESULT for p in found):
            continue
        ts = ev.get("timestamp")
        ms = parse_ts(ts, f"events[{i}].", "timestamp") if ts is not None else None
        out.append(mark(MARK_SCOPE, conv, ms))
        out.extend(found)
    return out
