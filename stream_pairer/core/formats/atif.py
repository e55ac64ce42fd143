"""ATIF, the Agent Trajectory Interchange Format (Harbor / Terminal-Bench trajectories):
`{schema_version: "ATIF-v1.x", session_id, agent, steps: [{step_id, timestamp, source, message,
tool_calls: [{tool_call_id, function_name, arguments}], observation: {results: [{source_call_id,
content}]}}], final_metrics}`.

A step's calls are `tool_calls`; its observation's results name the call they answer by
`source_call_id` (a result without one, e.g. a plain terminal read-out, is no tool result). The
whole trajectory is one JSON document, read as one record (within --max-record-bytes); a single
step written on its own line is read the same way. A user step starts a request.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import (
    MARK_SCOPE,
    REQUEST_PART,
    RESULT,
    Part,
    as_id,
    call_list,
    mark,
    parse_ts,
    wrong_type,
)

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "atif",
    '`schema_version` "ATIF-v1.x" with `steps[]` (Harbor / Terminal-Bench trajectories), or a single step'
    " `{step_id, tool_calls, observation}`",
    {
        "schema_version": "ATIF-v1.2",
        "session_id": "7f3c2a91-terminal-bench-fix-git",
        "agent": {
            "name": "terminus-2",
            "version": "2.0.0",
            "model_name": "anthropic/claude-sonnet-4-20250514",
        },
        "steps": [
            {
                "step_id": 3,
                "timestamp": "2025-09-12T08:00:04Z",
                "source": "agent",
                "model_name": "anthropic/claude-sonnet-4-20250514",
                "message": "Looking at the reflog.",
                "tool_calls": [
                    {
                        "tool_call_id": "call_3_1",
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": "cd /app/repo && git reflog | head\n", "duration": 1.0},
                    }
                ],
                "observation": {
                    "results": [
                        {
                            "source_call_id": "call_3_1",
                            "content": (
                                "a1b2c3d HEAD@{0}: checkout: moving from feature to master\n"
                                "9f8e7d6 HEAD@{1}: commit: Add about page"
                            ),
                        }
                    ]
                },
            }
        ],
    },
)

FORMAT: Final = "atif"


def claims(d: dict[str, Any]) -> bool:
    if type(d.get("steps")) is list:
        v = d.get("schema_version")
        return type(v) is str and v.startswith("ATIF")
    return "step_id" in d and ("tool_calls" in d or "observation" in d or "source" in d)


def parse(d: dict[str, Any]) -> list[Part]:
    steps = d.get("steps")
    if type(steps) is not list:
        return step(d, "")
    out: list[Part] = []
    for i, s in enumerate(steps):
        if type(s) is not dict:
            raise wrong_type(s, "steps", i, None, "a step object")
        found = step(s, f"steps[{i}].")
        if found:
            ts = s.get("timestamp")
            ms = parse_ts(ts, f"steps[{i}].", "timestamp") if ts is not None else None
            out.append(mark(MARK_SCOPE, None, ms))
            out.extend(found)
    return out


def step(s: dict[str, Any], prefix: str) -> list[Part]:
    keys = ("tool_call_id", "function_name", "arguments")
    out = call_list(s.get("tool_calls"), prefix, "tool_calls", keys, FORMAT)
    obs = s.get("observation")
    results = obs.get("results") if type(obs) is dict else None
    for i, r in enumerate(results if type(results) is list else []):
        if type(r) is not dict or r.get("source_call_id") is None:
            continue
        rid = as_id(r.get("source_call_id"), f"{prefix}observation.results", i, "source_call_id")
        out.append((RESULT, rid, None, r.get("content"), None, r, FORMAT))
    if not out and s.get("source") == "user":
        return [REQUEST_PART]
    return out
