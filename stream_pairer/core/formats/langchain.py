"""LangChain / LangGraph messages, in the three ways they are written to logs and checkpoints:

* `message.model_dump()` (LangGraph state, `stream_mode="values"` dumps, LangServe):
  `{type: "ai", content, tool_calls: [{name, args, id, type: "tool_call"}], invalid_tool_calls}`
  and `{type: "tool", tool_call_id, name, content, status: "success" | "error", artifact}`;
* `messages_to_dict` (chat message histories, Redis / SQL stores): `{type: "ai", data: {...}}`;
* `dumpd` (LangSmith, serialized checkpoints): `{lc: 1, type: "constructor", id: [...,
  "AIMessage"], kwargs: {...}}`.

Calls are `tool_calls` (the parsed ones) and `invalid_tool_calls` (the model called a tool with
arguments that did not parse: still a call, usually answered by an error ToolMessage); the
provider's own copy in `additional_kwargs.tool_calls` is the same calls and is not read again.
A ToolMessage is a result by `tool_call_id`, failed when `status` is `error`. A human message
starts a request (the loop caps count from it).
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.catalog import FormatInfo
from stream_pairer.core.formats.common import (
    REQUEST_PART,
    RESULT,
    Part,
    as_id,
    as_name,
    call_list,
)

# How `stream-pairer formats` lists this reader (catalog.describe collects it).
FORMAT_INFO: Final = FormatInfo(
    "langchain",
    '`type` "ai" / "tool" / "human" (LangChain / LangGraph `model_dump`), also `{type, data}` and `dumpd`'
    " `{lc, kwargs}`",
    {
        "content": "",
        "type": "ai",
        "id": "run-5e1c4a3b-2d7f-4b6a-9c8e-0f1e2d3c4b5a-0",
        "tool_calls": [
            {"name": "multiply", "args": {"a": 3, "b": 12}, "id": "call_m7x2QpLk", "type": "tool_call"}
        ],
        "invalid_tool_calls": [],
        "thread_id": "thread-lc-1",
    },
)

FORMAT: Final = "langchain"
# `type` values of a message (model_dump / messages_to_dict) and class names (dumpd ids).
_AI: Final = frozenset({"ai", "AIMessage", "AIMessageChunk"})
_TOOL: Final = frozenset({"tool", "ToolMessage", "ToolMessageChunk"})
_HUMAN: Final = frozenset({"human", "HumanMessage", "HumanMessageChunk"})
_QUIET: Final = frozenset({"system", "SystemMessage", "chat", "ChatMessage", "remove", "RemoveMessage"})
TYPES: Final = frozenset({*_AI, *_TOOL, *_HUMAN, *_QUIET, "constructor"})


def parse(d: dict[str, Any], t: str) -> list[Part]:
    if t == "constructor":
        ids = d.get("id")
        kwargs = d.get("kwargs")
        if type(ids) is not list or not ids or type(kwargs) is not dict:
            return []
        return _message(kwargs, str(ids[-1]), "kwargs.")
    data = d.get("data")
    if type(data) is dict and "content" not in d:  # messages_to_dict
        return _message(data, t, "data.")
    return _message(d, t, "")


def _message(m: dict[str, Any], t: str, prefix: str) -> list[Part]:
    if t in _AI:
        out: list[Part] = []
        for key in ("tool_calls", "invalid_tool_calls"):
            out += call_list(m.get(key), prefix, key, ("id", "name", "args"), FORMAT)
        return out
    if t in _TOOL:
        status = m.get("status")
        return [
            (
                RESULT,
                as_id(m.get("tool_call_id"), prefix, None, "tool_call_id"),
                as_name(m.get("name"), prefix, None, "name", False),
                m.get("content"),
                status == "error",
                m,
                FORMAT,
            )
        ]
    if t in _HUMAN:
        return [REQUEST_PART]
    return []
