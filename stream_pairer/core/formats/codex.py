"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

Every line is a wrapper `{timestamp, type, payload}`. The types:

* `session_meta`: `payload.id` is the session id. It is on this line only, so the parser returns a
  SESSION marker and the file reader uses it as the conversation id of the rest of the file (the
  Kafka key plays that part in the sidecar).
* `response_item`: `payload` is an OpenAI Responses item: `function_call` / `function_call_output`,
  `custom_tool_call` / `custom_tool_call_output` (apply_patch), `local_shell_call` (a shell call
  with `call_id` and `action`, whose output is a `function_call_output` with the same id),
  `message`, `reasoning`. A user `message` starts a request.
* `event_msg`: UI events; `payload.type == "user_message"` is Codex's own turn marker (a request
  start); the rest (agent_message, token_count, exec_command_end...) carry no event.
* `turn_context`, `compacted`: no event.

The wrapper's `timestamp` is the event time (the payload has none). Function outputs are text;
older versions wrote `{"output": ..., "metadata": {"exit_code": N}}` as a JSON string and newer ones
may write `{content, success}`: a non-zero exit code or `success: false` is an error outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from stream_pairer.core.formats import openai
from stream_pairer.core.formats.common import (
    CALL,
    MARK_SESSION,
    REQUEST_PART,
    RESULT,
    Part,
    as_id,
    mark,
    wrong_type,
)

TYPES: Final = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
FORMAT: Final = "codex"

MessageParser = Callable[[dict[str, Any], str, str], list[Part]]


def parse(d: dict[str, Any], t: str, message: MessageParser) -> list[Part]:
    payload = d.get("payload")
    if type(payload) is not dict:
        raise wrong_type(payload, "", None, "payload", "an object")
    if t == "session_meta":
        sid = as_id(payload.get("id"), "payload.", None, "id")
        return [mark(MARK_SESSION, sid)] if sid is not None else []
    if t == "event_msg":
        return [REQUEST_PART] if payload.get("type") == "user_message" else []
    if t != "response_item":
        return []
    pt = payload.get("type")
    if pt == "local_shell_call":
        action = payload.get("action")
        call_id = as_id(payload.get("call_id"), "payload.", None, "call_id")
        return [(CALL, call_id, "local_shell", action, None, payload, FORMAT)]
    if type(pt) is str and pt in openai.RESPONSES_TOOL_ITEMS:
        parts = openai.responses_item(payload, pt, "payload", None)
        return [_as_codex(p) for p in parts]
    if pt == "message":
        return [_as_codex(p) for p in message(payload, "payload.", "anthropic")]
    return []  # reasoning, web_search_call, ...: no client tool event


def _as_codex(p: Part) -> Part:
    t, event_id, name, payload, is_error, block, _fmt = p
    if t == RESULT and is_error is None:
        is_error = _failed(payload)
    return (t, event_id, name, payload, is_error, block, FORMAT if t in (CALL, RESULT) else _fmt)


def _failed(output: Any) -> bool | None:
    """Codex's own failure signals in a function output, when there is one."""
    value = output
    if type(value) is str and value[:1] == "{":
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    if type(value) is not dict:
        return None
    if value.get("success") is False:
        return True
    meta = value.get("metadata")
    if type(meta) is dict:
        code = meta.get("exit_code")
        if type(code) is int:
            return code != 0
    return None
