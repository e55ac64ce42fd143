"""AutoGen (0.4+, `autogen-agentchat` and `autogen-core`) messages and events, as their
`model_dump()` writes them (the team's `run_stream` logged, `save_state`, the console log):

* `ToolCallRequestEvent {source, content: [FunctionCall {id, name, arguments}]}` and the model
  context's `AssistantMessage {content: [FunctionCall ...]}`: calls (`arguments` is a JSON text);
* `ToolCallExecutionEvent {content: [FunctionExecutionResult {call_id, name, content,
  is_error}]}` and `FunctionExecutionResultMessage` (same content): results, by `call_id`.

The other message types carry no tool event (`ToolCallSummaryMessage` repeats results already
read from the execution event); a user's `TextMessage` / `UserMessage` starts a request.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import (
    REQUEST_PART,
    RESULT,
    Part,
    as_flag,
    as_id,
    as_name,
    call_list,
    wrong_type,
)

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "autogen",
    '`type` "ToolCallRequestEvent" / "ToolCallExecutionEvent" and the other AutoGen 0.4+ message types',
    {
        "source": "assistant",
        "created_at": "2025-05-20T11:00:01.402Z",
        "content": [{"id": "call_Ly0nP0p1", "arguments": '{"city": "Lyon"}', "name": "population"}],
        "type": "ToolCallRequestEvent",
        "conversation_id": "team-run-3",
    },
)

FORMAT: Final = "autogen"
_CALLS: Final = frozenset({"ToolCallRequestEvent", "AssistantMessage"})
_RESULTS: Final = frozenset({"ToolCallExecutionEvent", "FunctionExecutionResultMessage"})
_QUIET: Final = frozenset(
    {
        "ToolCallSummaryMessage",
        "ThoughtEvent",
        "ModelClientStreamingChunkEvent",
        "HandoffMessage",
        "StopMessage",
        "MultiModalMessage",
        "StructuredMessage",
        "UserInputRequestedEvent",
        "MemoryQueryEvent",
        "SelectSpeakerEvent",
        "SelectorEvent",
        "CodeGenerationEvent",
        "CodeExecutionEvent",
        "SystemMessage",
    }
)
_REQUESTS: Final = frozenset({"TextMessage", "UserMessage"})
TYPES: Final = _CALLS | _RESULTS | _QUIET | _REQUESTS


def parse(d: dict[str, Any], t: str) -> list[Part]:
    content = d.get("content")
    if t in _REQUESTS:
        return [REQUEST_PART] if t == "UserMessage" or d.get("source") == "user" else []
    if t in _QUIET or (t == "AssistantMessage" and type(content) is not list):
        return []
    if t in _CALLS:
        return call_list(content, "", "content", ("id", "name", "arguments"), FORMAT)
    if type(content) is not list:
        raise wrong_type(content, "", None, "content", "an array of function results")
    out: list[Part] = []
    for i, c in enumerate(content):
        if type(c) is not dict:
            raise wrong_type(c, "content", i, None, "an object")
        out.append(
            (
                RESULT,
                as_id(c.get("call_id"), "content", i, "call_id"),
                as_name(c.get("name"), "content", i, "name", False),
                c.get("content"),
                as_flag(c.get("is_error"), "content", i, "is_error"),
                c,
                FORMAT,
            )
        )
    return out
