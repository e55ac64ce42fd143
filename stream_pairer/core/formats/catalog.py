"""What each reader reads, how it is detected, and one sample record: `stream-pairer formats`, and
the key signatures an unknown shape is compared with (discover.explain: "nearest known format").

The registry is `formats.FORMATS` (every `ToolEvent.format` value). A reader describes itself
either here (the readers that predate this file) or in its own module as a module-level
`FORMAT_INFO` (one `FormatInfo` or a tuple of them): `describe()` collects both, so a reader added
beside the others appears without an edit here. A test checks that every format in FORMATS is
described and that each sample is read as that format.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Final

import orjson


@dataclass(frozen=True, slots=True)
class FormatInfo:
    """`format`: the `ToolEvent.format` value; `detected_by`: what in a record selects this reader;
    `sample`: one record of it (a JSON object), read as `format` (with `needs_mapping`: through the
    sample mapping of `stream-pairer formats`)."""

    format: str
    detected_by: str
    sample: dict[str, Any]
    needs_mapping: bool = False


# The mapping `stream-pairer formats` shows with the `mapped` sample (and the test reads it with).
SAMPLE_MAPPING: Final = (
    'if .ev == "call" then {type: "tool_call", id: .call, name: .tool, arguments: .args}\n'
    'elif .ev == "done" then {type: "tool_result", call_id: .call, content: .out} else empty end'
)

BUILT_IN: Final = (
    FormatInfo(
        "canonical",
        '`type` is "tool_call" or "tool_result" (at the top or under `message`)',
        {
            "conversation_id": "c1",
            "type": "tool_call",
            "id": "call_1",
            "name": "search",
            "arguments": {"q": "jq"},
        },
    ),
    FormatInfo(
        "anthropic",
        "a message whose `content[]` holds `tool_use` / `tool_result` blocks (also `type: message`)",
        {
            "conversation_id": "c1",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"q": "jq"}}],
        },
    ),
    FormatInfo(
        "claude_code",
        '`type` "assistant" / "user" with a `message` object (Claude Code session lines)',
        {
            "type": "assistant",
            "sessionId": "8f2c6a4e",
            "timestamp": "2025-06-02T18:46:52.104Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}
                ],
            },
        },
    ),
    FormatInfo(
        "openai_chat",
        "a message with `tool_calls[]`, or role `tool` with `tool_call_id` (also under `choices[]`)",
        {
            "conversation_id": "c1",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "jq"}'},
                }
            ],
        },
    ),
    FormatInfo(
        "openai_legacy",
        "a message with `function_call`, or role `function` (no ids: paired by name, FIFO)",
        {
            "conversation_id": "c1",
            "role": "assistant",
            "content": None,
            "function_call": {"name": "search", "arguments": '{"q": "jq"}'},
        },
    ),
    FormatInfo(
        "openai_responses",
        '`type` "function_call" / "function_call_output" (Responses items), or `output: [items]`',
        {
            "conversation_id": "c1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "search",
            "arguments": "{}",
        },
    ),
    FormatInfo(
        "bedrock",
        "content blocks keyed `toolUse` / `toolResult` (Converse), or `output: {message}`",
        {
            "conversation_id": "c1",
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "search", "input": {"q": "jq"}}}],
        },
    ),
    FormatInfo(
        "gemini",
        "`parts[]` with `functionCall` / `functionResponse`, or `candidates[].content`",
        {
            "conversation_id": "c1",
            "role": "model",
            "parts": [{"functionCall": {"id": "fc_1", "name": "search", "args": {"q": "jq"}}}],
        },
    ),
    FormatInfo(
        "mcp",
        "`jsonrpc` present: a `tools/call` request and the response with the same `id`",
        {
            "conversation_id": "c1",
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"q": "jq"}},
        },
    ),
    FormatInfo(
        "codex",
        "`{timestamp, type, payload}` Codex rollout lines (`response_item`, `event_msg`, ...)",
        {
            "timestamp": "2025-10-29T00:59:38.317Z",
            "type": "response_item",
            "payload": {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{}"},
            "session_id": "s1",
        },
    ),
    FormatInfo(
        "gemini_cli",
        '`type` "gemini" / "user" without `message` (gemini-cli recordings; `toolCalls[]` hold both)',
        {
            "sessionId": "s1",
            "id": "m1",
            "timestamp": "2025-12-03T06:35:40.000Z",
            "type": "gemini",
            "content": "",
            "toolCalls": [
                {
                    "id": "read_file-1",
                    "name": "read_file",
                    "args": {"path": "a.py"},
                    "status": "success",
                    "result": [
                        {
                            "functionResponse": {
                                "id": "read_file-1",
                                "name": "read_file",
                                "response": {"output": "x"},
                            }
                        }
                    ],
                }
            ],
        },
    ),
    FormatInfo(
        "wire",
        "`request` and `response` side by side (HTTP exchange logs; bodies as objects or JSON text)",
        {
            "conversation_id": "c1",
            "request": {"body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}},
            "response": {
                "body": {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "jq"}}
                    ],
                }
            },
        },
    ),
    FormatInfo(
        "otel",
        "`resourceSpans` / `resourceLogs` (OTLP/JSON exports, GenAI semantic conventions)",
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "5b8efff798038103d269b633813fc60c",
                                    "spanId": "1111111111111111",
                                    "name": "execute_tool search",
                                    "startTimeUnixNano": "1749636000000000000",
                                    "attributes": [
                                        {
                                            "key": "gen_ai.operation.name",
                                            "value": {"stringValue": "execute_tool"},
                                        },
                                        {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}},
                                        {"key": "gen_ai.tool.call.id", "value": {"stringValue": "call_1"}},
                                    ],
                                }
                            ]
                        }
                    ]
                }
            ]
        },
    ),
    FormatInfo(
        "mapped",
        "every record, when `--map FILE` is given: the jq program's outputs (canonical events)",
        {"ev": "call", "call": "c-9", "tool": "search", "args": {"q": "jq"}, "conversation_id": "c1"},
        needs_mapping=True,
    ),
    FormatInfo(
        "discovered",
        "only a record no reader claims: an object naming a tool with arguments and an id, or a "
        "result pointing at a call id, found anywhere inside it (a guess, labelled as one)",
        {
            "conversation_id": "c1",
            "step": {"action": {"tool_name": "search", "params": {"q": "jq"}, "call_id": "x1"}},
        },
    ),
)


def describe() -> dict[str, FormatInfo]:
    """Every described format: BUILT_IN, then each reader module's own FORMAT_INFO (a module
    wins over BUILT_IN for the same format)."""
    found = {info.format: info for info in BUILT_IN}
    package = importlib.import_module("stream_pairer.core.formats")
    for mod in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{mod.name}")
        own = getattr(module, "FORMAT_INFO", None)
        for info in own if isinstance(own, tuple) else (own,) if own is not None else ():
            if isinstance(info, FormatInfo):
                found[info.format] = info
    return found


def sample_bytes(info: FormatInfo) -> bytes:
    return orjson.dumps(info.sample)


_SIGNATURES: dict[str, frozenset[str]] = {}


def signatures() -> dict[str, frozenset[str]]:
    """format -> the keys of its sample (any depth), for the nearest-format hint; built once."""
    if not _SIGNATURES:
        from stream_pairer.core.formats.discover import keys_of  # noqa: PLC0415 - no import cycle

        for fmt, info in describe().items():
            if fmt not in {"mapped", "discovered"}:
                _SIGNATURES[fmt] = frozenset(keys_of(info.sample, depth=6))
    return _SIGNATURES
