"""The format layer: one raw input record (bytes) in, zero or more normalized `ToolEvent`s out.

Detection is one `orjson.loads` followed by a dispatch on key presence, cheapest and most
specific first; no parser is ever tried "to see if it works". The shapes recognized, in order:

1. `type` tells: canonical (`tool_call`/`tool_result`, also inside a wrapper), Claude Code
   lines (`assistant`/`user` with `message`; other line types such as `summary` carry no event),
   OpenAI Responses items, an Anthropic API response (`type: "message"`), Codex rollout lines
   (`{timestamp, type, payload}`), gemini-cli messages (`user` / `gemini` with `toolCalls`).
2. `jsonrpc`: MCP.
3. OTLP/JSON exports (`resourceSpans` / `resourceLogs`), HTTP wire exchanges (`request` +
   `response`), a wrapper (the message under `message`, the conversation id and ts beside it).
4. A readable record with a `type` no format knows and no message field: skipped, counted by
   type (a SKIP marker); a gemini-cli session header: its session id (a SESSION marker).
5. Response envelopes: Responses `output: [items]`, Bedrock `output: {message}`, Chat Completions
   `choices[].message`, Gemini `candidates[].content`.
6. A bare message: Gemini `parts`, OpenAI `tool_calls` / `function_call` / role `tool` /
   role `function`, or `content: [blocks]` (Anthropic blocks by `type`, Bedrock blocks by key).
   A user message without tool results starts a request (a REQUEST marker, for the loop caps);
   a message with a role and no content field is a `missing_field` dead letter.

A readable record of a known shape without tool events returns []; anything else raises
`FormatError` with a stable `reason` and a `detail` naming the offending field. Markers (see
`common.MARK_*`) never become events: `parse_record` reports them in the caller's `RecordInfo`.

Which language reads which shape (issue 23: each shape has one reader): canonical events, MCP
JSON-RPC messages, Bedrock Converse blocks, Gemini contents and responses, Anthropic tool blocks
and the OpenAI Chat, legacy and Responses shapes are read in Rust, by the readers the compiled
core's fast path uses (native/src/canonical.rs, mcp.rs, bedrock.rs, gemini.rs, messages/
anthropic.rs, chat.rs, responses.rs); their modules here hand them the decoded object through
`compiled.parts`, and their former Python readers are the oracle in tests/reference/formats.
So are the walks over a message's content array and a Responses `output` array (messages/walk.rs,
through `anthropic.blocks` and `openai.responses_output`). Every other format is read here, and
so are the dispatch, markers and record-level fields (conversation id, time, limits,
`decode_arguments`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from stream_pairer.core.formats import (
    anthropic,
    canonical,
    codex,
    cohere,
    discover,
    gemini,
    gemini_cli,
    mcp,
    openai,
    otel,
    otlp_proto,
    smolagents,
    vercel_ai,
    wire,
)
from stream_pairer.core.formats.common import (
    DEFAULT_CONFIG,
    DEPTH_CHECK_MIN_BYTES,
    MARK_REQUEST,
    MARK_SCOPE,
    MARK_SESSION,
    MARK_SKIP,
    MARKS,
    MAX_DEPTH,
    REQUEST_PART,
    FormatConfig,
    Part,
    conversation_id,
    json_type,
    mark,
    missing,
    record_ts,
    too_deep,
    wrong_type,
)
from stream_pairer.core.model import CALL, RESULT, EventType, FormatError, Source, ToolEvent
from stream_pairer.core.vocab import DeadLetterReason, Format

__all__ = [
    "DEFAULT_CONFIG",
    "FORMATS",
    "RESENT_FORMATS",
    "FormatConfig",
    "RecordInfo",
    "parse_record",
]

# Every value `ToolEvent.format` can take: the vocabulary's Format set, as plain strings.
FORMATS: Final = tuple(f.value for f in Format)
# Formats whose records re-send history (every HTTP request repeats the conversation so far; every
# chat span repeats its input messages): their events are counted once per id by the pipeline's
# `HistoryDedup`, a repeated copy is not a new event. Discovered shapes are counted the same way:
# what is found inside unnamed records (request logs, span dumps) repeats history just as often.
RESENT_FORMATS: Final = frozenset(
    {Format.WIRE.value, Format.OTEL.value, Format.OPENINFERENCE.value, Format.DISCOVERED.value}
)

# Claude Code session lines (and `claude -p --output-format stream-json` lines) that are not
# conversation turns: they are known, and carry no tool event.
CLAUDE_CODE_QUIET: Final = frozenset(
    {"summary", "system", "file-history-snapshot", "queue-operation", "progress", "result"}
)
_BOM: Final = b"\xef\xbb\xbf"
# LAZY: the agent-family readers (families.py) are imported where a record first reaches one, so
# a process that reads only the high-volume formats never loads them (~8 ms of start-up).
# Server-sent events of a streamed Anthropic response: fragments of a message, not records; they
# are dead-lettered with a hint rather than skipped as an unknown type (a call would vanish).
ANTHROPIC_STREAM_EVENTS: Final = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)


@dataclass(slots=True)
class RecordInfo:
    """What a record says besides its events, filled by `parse_record` when the caller passes one
    (reset it between records with `clear`).

    `requests`: (index of the first event after it, conversation id, event time) for each request
    start in the record; the pipeline tells the tagger before that event (the loop caps count per
    request). `skipped_type`: the `type` of a readable record of a type no format knows.
    `session_id`: the session the rest of the file belongs to (Codex `session_meta`)."""

    requests: list[tuple[int, str, float | None]] = field(default_factory=list)
    skipped_type: str | None = None
    session_id: str | None = None

    def clear(self) -> None:
        if self.requests:
            self.requests.clear()
        self.skipped_type = None
        self.session_id = None


def parse_record(
    raw: bytes,
    source: Source,
    *,
    key: str | None = None,
    config: FormatConfig = DEFAULT_CONFIG,
    info: RecordInfo | None = None,
) -> list[ToolEvent]:
    """Normalize one input record. `key` is the Kafka message key (in file mode: the file's
    conversation id), the conversation id fallback. `info` receives the record's markers."""
    n = len(raw)
    if n > config.max_record_bytes:
        raise FormatError(
            DeadLetterReason.TOO_LARGE.value,
            f"the record is {n} bytes, more than the {config.max_record_bytes} byte limit",
        )
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        record = _retry_without_bom(raw, err)
    if config.mapping is not None:  # --map: the mapping reads every record (core/mapping.py)
        parts: list[Part] = config.mapping.parts((raw[3:] if raw.startswith(_BOM) else raw).decode())
        record = record if type(record) is dict else {}
    elif type(record) is not dict:
        raise FormatError(
            DeadLetterReason.NOT_AN_OBJECT.value, f"the record is {json_type(record)}, expected a JSON object"
        )
    else:
        try:
            parts = _dispatch(record, "", True)
        except FormatError as err:
            if err.reason != DeadLetterReason.UNKNOWN_SHAPE.value:
                raise
            parts = discover.read(record, err.detail)  # no reader claims it (formats/discover.py)
    if not parts:
        return []
    if parts[0][0] in MARKS:
        if parts[0][0] == MARK_SKIP and config.mapping is None:
            parts = discover.read(record, None) or parts  # a type no reader knows: look inside
        return _marked(parts, record, n, source, key, config, info)
    if n > DEPTH_CHECK_MIN_BYTES and raw.count(b"{") + raw.count(b"[") > MAX_DEPTH:
        _check_depth(parts)
    conv = conversation_id(record, config, key)
    _check_id_lengths(conv, parts, config.max_id_bytes)
    ts = _record_time(record)
    size = n // len(parts) or 1
    # Positional arguments: 40% cheaper than keywords for this 12-field dataclass, on the hottest
    # line of the service. The order is ToolEvent's field order (pinned by a test).
    return [
        ToolEvent(t, conv, event_id, name, payload, ts, fmt, source, i, is_error, block, size)  # type: ignore[arg-type]
        for i, (t, event_id, name, payload, is_error, block, fmt) in enumerate(parts)
    ]


def _record_time(record: dict[str, Any]) -> float | None:
    ts = record_ts(record, "")
    if ts is None:
        inner = record.get("message")
        if type(inner) is dict:
            ts = record_ts(inner, "message.")
        else:
            inner = record.get("request")  # a wire exchange: the time the request was sent
            if type(inner) is dict:
                ts = record_ts(inner, "request.")
    return ts


def _marked(  # noqa: PLR0917 - parse_record's own arguments, passed on
    parts: list[Part],
    record: dict[str, Any],
    n: int,
    source: Source,
    key: str | None,
    config: FormatConfig,
    info: RecordInfo | None,
) -> list[ToolEvent]:
    """The slow path of `parse_record`, for records whose parts hold markers (see MARK_*)."""
    kept = [p for p in parts if p[0] not in MARKS]
    if kept and n > DEPTH_CHECK_MIN_BYTES:  # the slow path: no bracket-count pre-filter
        _check_depth(kept)
    size = n // len(kept) if kept else 0
    record_conv: str | None = None
    rts = _record_time(record)
    scope_conv: str | None = None
    scope_ts: float | None = None
    events: list[ToolEvent] = []
    for p in parts:
        kind = p[0]
        if kind in MARKS:
            if kind == MARK_SCOPE:
                scope_conv, scope_ts = p[1], p[3]
            elif info is None:
                continue
            elif kind == MARK_REQUEST:
                conv = scope_conv
                if conv is None:
                    try:
                        conv = record_conv or conversation_id(record, config, key)
                    except FormatError:
                        continue  # a prompt with no conversation: nothing to reset
                info.requests.append((len(events), conv, scope_ts if scope_ts is not None else rts))
            elif kind == MARK_SKIP:
                info.skipped_type = p[1]
            elif kind == MARK_SESSION:
                info.session_id = p[1]
            continue
        conv = scope_conv
        if conv is None:
            if record_conv is None:
                record_conv = conversation_id(record, config, key)
            conv = record_conv
        ts = scope_ts if scope_ts is not None else rts
        t, event_id, name, payload, is_error, block, fmt = p
        event_type: EventType = CALL if t == CALL else RESULT
        events.append(
            ToolEvent(
                event_type,
                conv,
                event_id,
                name,
                payload,
                ts,
                fmt,
                source,
                len(events),
                is_error,
                block,
                size or 1,
            )
        )
    quick = config.max_id_bytes // 4
    for ev in events:  # the same id bound as the fast path (--max-id-bytes)
        for what, value in (("conversation id", ev.conversation_id), ("id", ev.id), ("tool name", ev.name)):
            if value is not None and len(value) > quick:
                _measure(f"{what} of tool event {ev.block}", value, config.max_id_bytes)
    return events


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
            DeadLetterReason.TOO_LARGE.value,
            f"the {what} is {n} bytes, more than the {limit} byte limit (--max-id-bytes)",
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
                DeadLetterReason.TOO_LARGE.value,
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
    prefixed = _after_direction_prefix(raw)
    if prefixed is not None:
        return prefixed
    spans = otlp_proto.decode(raw)  # the Collector's Kafka exporter, `otlp_proto` encoding
    if spans is not None:
        return spans
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as uerr:
        raise FormatError(
            DeadLetterReason.INVALID_UTF8.value,
            f"the record is not valid UTF-8: byte 0x{raw[uerr.start]:02x} at offset {uerr.start}",
        ) from None
    if not raw.strip():
        raise FormatError(DeadLetterReason.INVALID_JSON.value, "the record is empty") from None
    if "depth limit" in str(err):
        raise FormatError(
            DeadLetterReason.TOO_LARGE.value, f"the record nests too deeply to be read: {err}"
        ) from None
    raise FormatError(DeadLetterReason.INVALID_JSON.value, f"the record is not valid JSON: {err}") from None


def _after_direction_prefix(raw: bytes) -> Any:
    """An MCP stdio transcript line: a direction (`-->`, `<-`, `[client->server]`, `SEND`, a time)
    before the JSON-RPC message. Tried only once the line failed to decode, so clean records pay
    nothing; only a JSON-RPC object is taken, anything else stays invalid_json."""
    at = raw.find(b"{", 0, 120)
    if at <= 0 or b'"' in raw[:at]:
        return None
    try:
        value = orjson.loads(raw[at:])
    except orjson.JSONDecodeError:
        return None
    return value if type(value) is dict and "jsonrpc" in value else None


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
                    found = _message(m, "message.", "claude_code")
                    if found and found[0] is REQUEST_PART and d.get("isSidechain") is True:
                        # A subagent's prompt (Task tool) runs inside the parent's request, in the
                        # same session: it must not restart the parent's loop caps.
                        return []
                    return found
                if m is not None:
                    raise wrong_type(m, "", None, "message", "an object")
            elif t in CLAUDE_CODE_QUIET and type(d.get("message")) is not dict:
                return []
            if t in codex.TYPES and "payload" in d:
                return codex.parse(d, t, _message)
            if t in gemini_cli.TYPES and "message" not in d:
                return gemini_cli.parse(d, t)
        if t in openai.RESPONSES_QUIET_ITEMS:
            return []
        from stream_pairer.core.formats import families  # noqa: PLC0415 - see LAZY

        family = families.TYPED.get(t)
        if family is not None:
            return family(d, t)
    if "jsonrpc" in d:
        return mcp.parse(d, prefix)
    if top:
        if "resourceSpans" in d or "resourceLogs" in d:
            return otel.parse(d)
        request = d.get("request")
        if request is not None and "response" in d:
            return wire.parse(d, request, _message, _dispatch)
        m = d.get("message")
        if type(m) is dict:
            return _dispatch(m, "message.", False)
        if type(t) is str and not (_MESSAGE_KEYS & d.keys()):
            if t in ANTHROPIC_STREAM_EVENTS:
                raise FormatError(
                    DeadLetterReason.UNKNOWN_SHAPE.value,
                    f"an Anthropic streaming event ({t}): tool input arrives in fragments; log the "
                    "assembled message instead",
                )
            return [mark(MARK_SKIP, t)]  # a readable record of a type no format knows
        if gemini_cli.is_header(d):
            return [mark(MARK_SESSION, gemini_cli.session_of(d))]
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
    if d.get("candidates") is not None:
        return gemini.candidates(d, prefix)
    return _message(d, prefix, "anthropic")


def _message(m: dict[str, Any], prefix: str, anthropic_format: str) -> list[Part]:
    """A single chat message of any provider. `anthropic_format` names the Anthropic-style blocks
    (`anthropic`, or `claude_code` inside a Claude Code session line). A user message without a
    tool result starts a request (a REQUEST marker: the loop caps count from it)."""
    if "parts" in m:
        found = gemini.parts(m, prefix)
        if not found:
            items = m["parts"]
            if type(items) is list and vercel_ai.is_ui(items):  # Vercel AI SDK UI message
                return vercel_ai.ui_parts(items, f"{prefix}parts")
            if m.get("role") == "user":
                return [REQUEST_PART]
        return found
    tool_calls = m.get("tool_calls")
    if tool_calls is not None:
        if "step_number" in m and not prefix:  # a smolagents step: its calls and their outcome
            return smolagents.parse(m)
        from stream_pairer.core.formats import families  # noqa: PLC0415 - see LAZY

        return families.tool_calls(m, tool_calls, prefix)
    fc = m.get("function_call")
    if fc is not None:
        return openai.legacy_call(m, fc, prefix)
    role = m.get("role")
    if role == "tool":
        content = m.get("content")
        if type(content) is list and "tool_call_id" not in m:
            found = anthropic.blocks(content, f"{prefix}content", "anthropic")  # Vercel AI SDK
            if found:
                return found
        return openai.chat_result(m, prefix)
    if role == "function":
        return openai.legacy_result(m, prefix)
    content = m.get("content")
    if type(content) is list:
        found = anthropic.blocks(content, f"{prefix}content", anthropic_format)
        if not found and role == "user":
            return [REQUEST_PART]
        return found
    if role is None:
        from stream_pairer.core.formats import families  # noqa: PLC0415 - see LAZY

        claimed = None if prefix else families.claim(m, _message, _dispatch)
        if claimed is None:
            raise FormatError(DeadLetterReason.UNKNOWN_SHAPE.value, _unknown_detail(m, prefix))
        return claimed
    if content is None:
        if type(role) is str and role in cohere.V1_ROLES:
            return cohere.turn(m, role, prefix)  # Cohere v1 chat history
        if "content" not in m:
            # A message with a role and no content at all: a misspelled field (`contents`,
            # `text`) must not vanish as a plain turn would.
            raise missing(prefix, None, "content", _content_hint(m))
        return []
    if type(content) is str:
        if role == "user":
            return [REQUEST_PART]
        invocations = m.get("toolInvocations")  # a Vercel AI SDK v4 UI message
        return (
            vercel_ai.ui_parts(invocations, f"{prefix}toolInvocations") if type(invocations) is list else []
        )
    raise wrong_type(content, prefix, None, "content", "a string or an array of content blocks")


_MESSAGE_KEYS: Final = frozenset(
    {"role", "content", "parts", "tool_calls", "function_call", "output", "choices", "candidates"}
)


def _content_hint(m: dict[str, Any]) -> str:
    others = sorted(str(k) for k in m if k != "role")[:8]
    return (
        f"a message with role {str(m.get('role'))[:40]!r} needs content, tool_calls or parts "
        f"(its other keys: [{', '.join(others)}])"
    )


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
            DeadLetterReason.UNKNOWN_SHAPE.value,
            "a Chat Completions streaming chunk (choices[].delta): tool call arguments arrive in "
            "fragments; log the assembled message instead",
        )
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
