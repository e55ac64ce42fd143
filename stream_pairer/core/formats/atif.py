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
