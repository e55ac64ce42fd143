"""The agent-framework families of the format registry (issue 24), beside the high-volume formats
of `__init__.py`: which reader claims a record that none of those read.

Two ways in, both reached only where the high-volume formats have already declined the record,
so they cost those formats nothing: `TYPED`, by a `type` no other format knows (LangChain and
AutoGen messages, OpenAI Agents SDK run items, CrewAI events); and `claim`, for a top-level
record with no `role` where a message was expected (OpenHands, ATIF, smolagents, SDK exporter
spans, ADK, LiteLLM payloads, HTTP recordings). `tool_calls` reads a `tool_calls` array that is
not Chat Completions' (Cohere v1, ATIF) once the Chat reader refused it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from stream_pairer.core.formats import (
    adk,
    atif,
    autogen,
    cohere,
    crewai,
    langchain,
    litellm,
    openai,
    openai_agents,
    openhands,
    recordings,
    smolagents,
    spans,
    wire,
)
from stream_pairer.core.formats.common import FormatError, Part

# Families told by their `type` (a message class or an event type), read where no format above
# knew the type: LangChain / LangGraph messages, AutoGen messages and events.
TYPED: Final[dict[str, Callable[[dict[str, Any], str], list[Part]]]] = {
    **dict.fromkeys(langchain.TYPES, langchain.parse),
    **dict.fromkeys(autogen.TYPES, autogen.parse),
    **dict.fromkeys(openai_agents.TYPES, openai_agents.parse),
    **dict.fromkeys(crewai.TYPES, crewai.parse),
}


def claim(d: dict[str, Any], message: wire.MessageParser, dispatch: wire.Dispatcher) -> list[Part] | None:
    """Families told by their keys, tried only for a top-level record no format above read (a
    record with no role where a message was expected): the high-volume formats never get here.
    None: nobody claims it."""
    if ("action" in d or "observation" in d) and openhands.claims(d):
        return openhands.parse(d)
    events = d.get("events")
    if type(events) is list and events and type(events[0]) is dict and openhands.claims(events[0]):
        return openhands.parse_page(events)  # a page of the OpenHands `/events` API
    kind = d.get("kind")
    if type(kind) is str and "source" in d and "id" in d:
        return openhands.parse_v1(d, kind)
    if spans.claims(d):
        return spans.parse(d)
    if adk.claims(d):
        return adk.parse(d)
    if atif.claims(d):
        return atif.parse(d)
    if smolagents.claims(d):
        return smolagents.parse(d)
    if litellm.claims(d):
        return litellm.parse(d, message, dispatch)
    if recordings.is_nock(d):
        return recordings.nock(d, message, dispatch)
    if recordings.is_response(d):
        return recordings.response(d, dispatch)
    return None


def tool_calls(m: dict[str, Any], calls: Any, prefix: str) -> list[Part]:
    """`tool_calls` of Chat Completions; where they do not read as such, Cohere v1 (`{name,
    parameters}`, no ids) or an ATIF step (`{tool_call_id, function_name}`): only a record the
    Chat reader refuses pays for asking."""
    try:
        return openai.chat_calls(calls, prefix)
    except FormatError:
        if cohere.is_v1_calls(calls):
            return cohere.calls(calls, prefix)
        if not prefix and atif.claims(m):
            return atif.parse(m)
        raise
