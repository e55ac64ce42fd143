"""The format layer: one raw input record (bytes) in, zero or more normalized `ToolEvent`s out.

Detection is one `orjson.loads` followed by a dispatch on key presence, cheapest and most
specific first; no parser is ever tried "to see if it works". The shapes recognized, in order:

1. `type` tells: canonical (`tool_call`/`tool_result`, also inside a wrapper), Claude Code
   lines (`assistant`/`user` with `message`; other line types such as `summary` carry no event),
   OpenAI Responses items, an Anthropic API response (`type: "message"`).
2. `jsonrpc`: MCP.
3. A wrapper: the message under `message`, the conversation id and ts beside it.
4. Response envelopes: Responses `output: [items]`, Bedrock `output: {message}`, Chat Completions
   `choices[].message`, Gemini `candidates[].content`.
5. A bare message: Gemini `parts`, OpenAI `tool_calls` / `function_call` / role `tool` /
   role `function`, or `content: [blocks]` (Anthropic blocks by `type`, Bedrock blocks by key).

A readable record of a known shape without tool events returns []; anything else raises
`FormatError` with a stable `reason` and a `detail` naming the offending field.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from stream_pairer.core.formats import anthropic, canonical, gemini, mcp, openai
from stream_pairer.core.formats.common import (
    DEFAULT_CONFIG,
    DEPTH_CHECK_MIN_BYTES,
    MAX_DEPTH,
    FormatConfig,
    Part,
    conversation_id,
    json_type,
    record_ts,
    too_deep,
    wrong_type,
)
from stream_pairer.core.model import FormatError, Source, ToolEvent

__all__ = ["DEFAULT_CONFIG", "FORMATS", "FormatConfig", "parse_record"]

# Every value `ToolEvent.format` can take.
FORMATS: Final = (
    "canonical",
    "anthropic",
    "claude_code",
    "openai_chat",
    "openai_legacy",
    "openai_responses",
    "bedrock",
    "gemini",
    "mcp",
)

# Claude Code session lines (and `claude -p --output-format stream-json` lines) that are not
# conversation turns: they are known, and carry no tool event.
CLAUDE_CODE_QUIET: Final = frozenset(
    {"summary", "system", "file-history-snapshot", "queue-operation", "progress", "result"}
)
_BOM: Final = b"\xef\xbb\xbf"


def parse_record(
    raw: bytes, source: Source, *, key: str | None = None, config: FormatConfig = DEFAULT_CONFIG
) -> list[ToolEvent]:
    """Normalize one input record. `key` is the Kafka message key, the conversation id fallback."""
    n = len(raw)
    if n > config.max_record_bytes:
        raise FormatError(
            "too_large", f"the record is {n} bytes, more than the {config.max_record_bytes} byte limit"
        )
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        record = _retry_without_bom(raw, err)
    if type(record) is not dict:
        raise FormatError("not_an_object", f"the record is {json_type(record)}, expected a JSON object")
    parts = _dispatch(record, "", True)
    if not parts:
        return []
    if n > DEPTH_CHECK_MIN_BYTES and raw.count(b"{") + raw.count(b"[") > MAX_DEPTH:
        _check_depth(parts)
    conv = conversation_id(record, config, key)
    _check_id_lengths(conv, parts, config.max_id_bytes)
    ts = record_ts(record, "")
    if ts is None:
        inner = record.get("message")
        if type(inner) is dict:
            ts = record_ts(inner, "message.")
    size = n // len(parts) or 1
    # Positional arguments: 40% cheaper than keywords for this 12-field dataclass, on the hottest
    # line of the service. The order is ToolEvent's field order (pinned by a test).
    return [
        ToolEvent(t, conv, event_id, name, payload, ts, fmt, source, i, is_error, block, size)
        for i, (t, event_id, name, payload, is_error, block, fmt) in enumerate(parts)
    ]


def _check_id_lengths(conv: str, parts: list[Part], limit: int) -> None:
    """Refuse ids and tool names longer than `limit` UTF-8 bytes (`max_id_bytes`). A string of
    n characters takes at most 4n bytes, so only long strings are measured (hot path)."""
    quick = limit // 4
    if len(conv) > quick:
        _measure("conversation id", conv, limit)
    for i, part in enumerate(parts):
        event_id, name = part[1], part[2]
        if event_id is not None and len(event_id) > quick:
            _measure(f"id of tool event {i}", event_id, limit)
        if name is not None and len(name) > quick:
            _measure(f"tool name of tool event {i}", name, limit)


def _measure(what: str, value: str, limit: int) -> None:
    n = len(value.encode("utf-8", "surrogatepass"))
    if n > limit:
        raise FormatError(
            "too_large", f"the {what} is {n} bytes, more than the {limit} byte limit (--max-id-bytes)"
        )


def _check_depth(parts: list[Part]) -> None:
    """Refuse a kept block nested deeper than MAX_DEPTH. Only called when the record holds more
    than MAX_DEPTH opening brackets: nesting N levels deep takes N of them, and every kept block
    is a part of the decoded record (never built), so fewer brackets in the bytes (brackets
    inside strings only add to the count) prove every block shallow enough. That pre-filter is
    two C-speed scans; the walk it spares was 9 % of the engine loop (BENCHMARKS.md part 1)."""
    previous = None
    for i, part in enumerate(parts):
        block = part[5]
        if block is not previous and too_deep(block):  # mcp_call's call and result share a block
            raise FormatError(
                "too_large",
                f"the block of tool event {i} nests more than {MAX_DEPTH} levels of arrays and objects",
            )
        previous = block


def _retry_without_bom(raw: bytes, err: orjson.JSONDecodeError) -> Any:
    """The error path of the decode. A UTF-8 byte order mark (Windows editors put one at the
    start of a file) before valid JSON is tolerated; checking for it only here means clean
    records pay nothing for it. Otherwise: say precisely why the bytes are unreadable."""
    if raw.startswith(_BOM):
        try:
            return orjson.loads(raw[3:])
        except orjson.JSONDecodeError as retry_err:
            err = retry_err
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as uerr:
        raise FormatError(
            "invalid_utf8",
            f"the record is not valid UTF-8: byte 0x{raw[uerr.start]:02x} at offset {uerr.start}",
        ) from None
    if not raw.strip():
        raise FormatError("invalid_json", "the record is empty") from None
    if "depth limit" in str(err):
        raise FormatError("too_large", f"the record nests too deeply to be read: {err}") from None
    raise FormatError("invalid_json", f"the record is not valid JSON: {err}") from None


def _dispatch(d: dict[str, Any], prefix: str, top: bool) -> list[Part]:
    t = d.get("type")
    if type(t) is str:
        if t in canonical.TYPES:
            return canonical.parse(d)
        if t in openai.RESPONSES_TOOL_ITEMS:
            return openai.responses_item(d, t, prefix, None)
        if t == "message" and "content" in d:
            # An Anthropic API response, or a Responses `message` item (no tool blocks in it).
            return _message(d, prefix, "anthropic")
        if top:
            if t in {"assistant", "user"}:
                m = d.get("message")
                if type(m) is dict:
                    return _message(m, "message.", "claude_code")
                if m is not None:
                    raise wrong_type(m, "", None, "message", "an object")
            elif t in CLAUDE_CODE_QUIET and type(d.get("message")) is not dict:
                return []
        if t in openai.RESPONSES_QUIET_ITEMS:
            return []
    if "jsonrpc" in d:
        return mcp.parse(d, prefix)
    if top:
        m = d.get("message")
        if type(m) is dict:
            return _dispatch(m, "message.", False)
    output = d.get("output")
    if output is not None:
        if type(output) is list:
            return openai.responses_output(output, prefix)
        if type(output) is dict and "message" in output:
            m = output["message"]
            if type(m) is not dict:
                raise wrong_type(m, f"{prefix}output.", None, "message", "an object")
            return _message(m, f"{prefix}output.message.", "anthropic")
    choices = d.get("choices")
    if choices is not None:
        return _choices(choices, prefix)
    candidates = d.get("candidates")
    if candidates is not None:
        return _candidates(candidates, prefix)
    return _message(d, prefix, "anthropic")


def _message(m: dict[str, Any], prefix: str, anthropic_format: str) -> list[Part]:
    """A single chat message of any provider. `anthropic_format` names the Anthropic-style blocks
    (`anthropic`, or `claude_code` inside a Claude Code session line)."""
    if "parts" in m:
        return gemini.parts(m, prefix)
    tool_calls = m.get("tool_calls")
    if tool_calls is not None:
        return openai.chat_calls(tool_calls, prefix)
    fc = m.get("function_call")
    if fc is not None:
        return openai.legacy_call(m, fc, prefix)
    role = m.get("role")
    if role == "tool":
        return openai.chat_result(m, prefix)
    if role == "function":
        return openai.legacy_result(m, prefix)
    content = m.get("content")
    if type(content) is list:
        return anthropic.blocks(content, f"{prefix}content", anthropic_format)
    if role is None:
        raise FormatError("unknown_shape", _unknown_detail(m, prefix))
    if content is None or type(content) is str:
        return []  # a plain text turn (system, user prompt, assistant answer)
    raise wrong_type(content, prefix, None, "content", "a string or an array of content blocks")


def _choices(choices: object, prefix: str) -> list[Part]:
    if type(choices) is not list:
        raise wrong_type(choices, prefix, None, "choices", "an array")
    out: list[Part] = []
    streaming = False
    for i, ch in enumerate(choices):
        if type(ch) is not dict:
            raise wrong_type(ch, f"{prefix}choices", i, None, "a choice object")
        msg = ch.get("message")
        if msg is None:
            streaming = streaming or "delta" in ch
            continue
        if type(msg) is not dict:
            raise wrong_type(msg, f"{prefix}choices", i, "message", "an object")
        out.extend(_message(msg, f"{prefix}choices[{i}].message.", "anthropic"))
    if streaming and not out:
        raise FormatError(
            "unknown_shape",
            "a Chat Completions streaming chunk (choices[].delta): tool call arguments arrive in "
            "fragments; log the assembled message instead",
        )
    return out


def _candidates(candidates: object, prefix: str) -> list[Part]:
    if type(candidates) is not list:
        raise wrong_type(candidates, prefix, None, "candidates", "an array")
    out: list[Part] = []
    for i, cand in enumerate(candidates):
        if type(cand) is not dict:
            raise wrong_type(cand, f"{prefix}candidates", i, None, "a candidate object")
        content = cand.get("content")
        if content is None:
            continue  # e.g. a candidate blocked by a safety filter
        if type(content) is not dict:
            raise wrong_type(content, f"{prefix}candidates", i, "content", "an object")
        out.extend(gemini.parts(content, f"{prefix}candidates[{i}].content."))
    return out


def _unknown_detail(d: dict[str, Any], prefix: str) -> str:
    keys = sorted(str(k) for k in d)
    shown = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "")
    where_ = f"{prefix[:-1]} " if prefix else "the record "
    t = d.get("type")
    kind = f" (type {t!r})" if type(t) is str else ""
    return (
        f"{where_}matches no supported format{kind}: keys [{shown}]; expected a canonical event, a "
        "message (role + content/tool_calls/parts), a response envelope, or a JSON-RPC message"
    )
