"""OpenHands event streams: the V0 event stream (actions and observations, one JSON object per
event, as `event_to_dict` writes them to the file store, the trajectory export and the
`/events` API) and the V1 agent SDK's events (`kind`: ActionEvent, ObservationEvent ...).

V0: an action is `{id, timestamp, source, message, action: "run", args: {...},
tool_call_metadata: {function_name, tool_call_id, ...}}`; its observation is `{id, cause,
observation: "run", content, extras, success?, tool_call_metadata?}`. `cause` is the id of the
action the observation answers: the stream's own link, present on every observation of an
action, while `tool_call_metadata` is copied onto it only by some paths. So a call's id is its
event id and a result's id is its `cause` (both as the decimal text of the integer): never a
FIFO pair. The tool name is `tool_call_metadata.function_name` (the LLM's tool), else the action
type. Actions that are not tool runs (`message`, `system`, `recall`, `change_agent_state`,
`condensation`, and `finish`, which ends the loop and is never answered by design) carry no
event, nor do their observations. A result is an error for an `error` or `user_rejected`
observation, `success: false`, or a non-zero `extras.metadata.exit_code`.

V1: `ActionEvent {tool_name, tool_call_id, action, tool_call}` is a call;
`ObservationEvent {tool_call_id, observation, action_id}`, `AgentErrorEvent {tool_call_id,
error}` and `UserRejectObservation {tool_call_id, rejection_reason}` are its result (the last
two failed); the LLM's `tool_call_id` is the id both sides keep.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import (
    CALL,
    MARK_SCOPE,
    REQUEST_PART,
    RESULT,
    Part,
    as_id,
    as_name,
    mark,
    parse_ts,
    wrong_type,
)

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "openhands",
    "an `action` / `observation` beside an integer `id` (V0 event stream, trajectories, `/events` pages),"
    " or `kind` with `source` and `id` (V1 agent SDK events)",
    {
        "id": 6,
        "timestamp": "2025-06-02T09:14:12.030417",
        "source": "agent",
        "message": "Reading file: /workspace/cart.py",
        "action": "read",
        "tool_call_metadata": {
            "function_name": "str_replace_editor",
            "tool_call_id": "toolu_01BWk7Ls2Xq9CeMfR3tJ8yUa",
            "model_response": {"id": "chatcmpl-a71d", "model": "claude-sonnet-4-20250514"},
            "total_calls_in_response": 2,
        },
        "args": {
            "path": "/workspace/cart.py",
            "start": 0,
            "end": -1,
            "thought": "",
            "impl_source": "oh_aci",
            "view_range": None,
        },
    },
)

FORMAT: Final = "openhands"
# V0 action types that are not tool runs (their observations are not tool results either).
_NOT_TOOLS: Final = frozenset(
    {
        "message",
        "system",
        "recall",
        "change_agent_state",
        "agent_state_changed",
        "condensation",
        "condensation_request",
        "finish",
        "null",
    }
)
_FAILED: Final = frozenset({"error", "user_rejected"})
V1_KINDS: Final = frozenset({"ActionEvent", "ObservationEvent", "AgentErrorEvent", "UserRejectObservation"})


def claims(d: dict[str, Any]) -> bool:
    """A V0 event: an `action` or an `observation` type beside the stream's integer `id`."""
    return ("action" in d or "observation" in d) and type(d.get("id")) is int


def parse(d: dict[str, Any]) -> list[Part]:
    meta = d.get("tool_call_metadata")
    meta = meta if type(meta) is dict else {}
    action = d.get("action")
    if type(action) is str:
        if action in _NOT_TOOLS:
            return []
        name = meta.get("function_name") or action
        call_id = as_id(d.get("id"), "", None, "id")
        return [(CALL, call_id, as_name(name, "", None, "action", True), d.get("args"), None, d, FORMAT)]
    observation = d.get("observation")
    if type(observation) is not str or observation in _NOT_TOOLS or d.get("cause") is None:
        return []
    result_id = as_id(d.get("cause"), "", None, "cause")
    extras = d.get("extras")
    exit_code = None
    if type(extras) is dict and type(extras.get("metadata")) is dict:
        exit_code = extras["metadata"].get("exit_code")
    failed = (
        observation in _FAILED
        or d.get("success") is False
        or (type(exit_code) is int and exit_code not in (0, -1))  # -1: still running / unknown
    )
    name = meta.get("function_name")
    return [(RESULT, result_id, name if type(name) is str else None, d.get("content"), failed, d, FORMAT)]


def parse_page(events: list[Any]) -> list[Part]:
    """A page of the V0 `/events` API (`{events: [...], has_more}`): its events, in order."""
    out: list[Part] = []
    for i, ev in enumerate(events):
        if type(ev) is not dict:
            raise wrong_type(ev, "events", i, None, "an event object")
        found = parse(ev)
        if found:
            ts = ev.get("timestamp")
            out.append(mark(MARK_SCOPE, None, parse_ts(ts, f"events[{i}].", "timestamp") if ts else None))
            out += found
    return out


def parse_v1(d: dict[str, Any], kind: str) -> list[Part]:
    """A V1 SDK event (`kind`, `source`, `id`): the tool events of the four kinds that hold
    them; the other kinds (messages, system prompt, state updates, condensations) hold none, and
    a user's message starts a request."""
    if kind not in V1_KINDS:
        return [REQUEST_PART] if kind == "MessageEvent" and d.get("source") == "user" else []
    call_id = as_id(d.get("tool_call_id"), "", None, "tool_call_id")
    name = as_name(d.get("tool_name"), "", None, "tool_name", kind == "ActionEvent")
    if kind == "ActionEvent":
        args = d.get("action")
        tc = d.get("tool_call")
        if args is None and type(tc) is dict:
            args = tc.get("arguments")  # the action did not validate: the raw arguments
        return [(CALL, call_id, name, args, None, d, FORMAT)]
    if kind == "ObservationEvent":
        obs = d.get("observation")
        failed = type(obs) is dict and obs.get("is_error") is True
        return [(RESULT, call_id, name, obs, failed, d, FORMAT)]
    payload = d.get("error") if kind == "AgentErrorEvent" else d.get("rejection_reason")
    return [(RESULT, call_id, name, payload, True, d, FORMAT)]
