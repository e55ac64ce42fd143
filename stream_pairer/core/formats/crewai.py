"""CrewAI tool-usage events (the event bus, as a listener logs `event.model_dump()`):
`{type: "tool_usage_started", tool_name, tool_args, agent_role, ...}`, then
`{type: "tool_usage_finished", tool_name, tool_args, output, from_cache, started_at,
finished_at}` or `{type: "tool_usage_error" | "tool_execution_error" | ..., error}`.

Where the version writes event ids (`event_id`, and `started_event_id` on the finishing event),
a result answers the call with that id; otherwise the events say only the tool name and its
arguments, and results pair with the oldest open call of that tool (`match: "fifo"`).
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import CALL, RESULT, Part, as_id, as_name, decode_arguments

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "crewai",
    '`type` "tool_usage_started" / "tool_usage_finished" / "tool_usage_error" (CrewAI event bus)',
    {
        "timestamp": "2025-07-01T10:00:02.000000",
        "type": "tool_usage_started",
        "agent_key": "a1f0c3",
        "agent_role": "Senior Researcher",
        "tool_name": "Search the internet",
        "tool_args": {"search_query": "solid state battery 2025"},
        "tool_class": "SerperDevTool",
        "run_attempts": 1,
        "delegations": 0,
        "conversation_id": "crew-run-11",
    },
)

FORMAT: Final = "crewai"
_ERRORS: Final = frozenset(
    {"tool_usage_error", "tool_execution_error", "tool_validate_input_error", "tool_selection_error"}
)
TYPES: Final = frozenset({"tool_usage_started", "tool_usage_finished", *_ERRORS})


def parse(d: dict[str, Any], t: str) -> list[Part]:
    if t == "tool_usage_started":
        call_id = as_id(d.get("event_id"), "", None, "event_id") if "event_id" in d else None
        name = as_name(d.get("tool_name"), "", None, "tool_name", True)
        return [(CALL, call_id, name, decode_arguments(d.get("tool_args")), None, d, FORMAT)]
    result_id = as_id(d.get("started_event_id"), "", None, "started_event_id")
    name = as_name(d.get("tool_name"), "", None, "tool_name", False)
    if t in _ERRORS:
        return [(RESULT, result_id, name, d.get("error"), True, d, FORMAT)]
    return [(RESULT, result_id, name, d.get("output"), False, d, FORMAT)]
