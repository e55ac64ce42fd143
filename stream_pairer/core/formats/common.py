"""Helpers shared by every format parser: ids, names, flags, timestamps, conversation ids.

Parsers run once per input record, so the happy path of each helper is a couple of `type(x) is`
checks and no allocation; the error path builds the precise human sentence only when it raises.
Field locations in error details are written as JSON paths relative to the record
(`message.content[2].tool_use_id`) so that an operator can find the culprit in the dead letter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from stream_pairer.core.model import CALL, RESULT, EventType, FormatError
from stream_pairer.core.vocab import DEFAULT_MAX_ID_BYTES, MAX_DEPTH, MAX_TS_MS, TS_FIELDS, DeadLetterReason

# One event as a parser sees it, before the record-level fields (conversation id, ts, source,
# block, size) are known: (type, id, name, payload, is_error, raw block, format name).
# A part whose type is one of the MARK_* kinds below is not an event but a note to
# `parse_record` (see `mark`); parsers put one first in the list when they return any.
Part = tuple[EventType | str, str | None, str | None, Any, bool | None, Any, str]

# Marker kinds. REQUEST: a new request (agent turn) starts here, in the current conversation;
# the loop caps of the tagger count from it. SKIP: a readable record of a type the format layer
# does not know (its name in the id slot), skipped and counted by type rather than
# dead-lettered. SESSION: the record names the session id (id slot) that the rest of its file
# belongs to (Codex `session_meta`, a gemini-cli header). SCOPE: the following parts belong to
# the conversation in the id slot (None: the record's own), at the time in the payload slot (None:
# the record's) - for records that hold several conversations (OTLP exports).
MARK_REQUEST: Final = "request"
MARK_SKIP: Final = "skip"
MARK_SESSION: Final = "session"
MARK_SCOPE: Final = "scope"
MARKS: Final = frozenset({MARK_REQUEST, MARK_SKIP, MARK_SESSION, MARK_SCOPE})
REQUEST_PART: Final[Part] = (MARK_REQUEST, None, None, None, None, None, "")


def mark(kind: str, value: str | None = None, ts_ms: float | None = None) -> Part:
    """A marker part (see MARK_*); `value` is the type, session id or conversation id."""
    return (kind, value, None, ts_ms, None, None, "")


__all__ = [
    "CALL",
    "DEFAULT_CONFIG",
    "DEPTH_CHECK_MIN_BYTES",
    "MARKS",
    "MARK_REQUEST",
    "MARK_SCOPE",
    "MARK_SESSION",
    "MARK_SKIP",
    "MAX_DEPTH",
    "REQUEST_PART",
    "RESULT",
    "FormatConfig",
    "FormatError",
    "Part",
    "as_flag",
    "as_id",
    "as_name",
    "call_list",
    "conversation_id",
    "decode_arguments",
    "json_type",
    "mark",
    "missing",
    "record_ts",
    "too_deep",
    "where",
    "wrong_type",
]


@dataclass(frozen=True, slots=True)
class FormatConfig:
    """What the format layer needs to know beyond the record itself.

    `conversation_fields` are dotted paths into the record, tried in order; the first one present
    (non-null, non-empty) is the conversation id. The defaults cover the formats' own fields
    (Claude Code `sessionId`, Claude Code stream-json `session_id`, OpenAI Responses
    `conversation.id`, request `metadata`) and the usual names loggers put in a wrapper.
    """

    conversation_fields: tuple[str, ...] = (
        "conversation_id",
        "sessionId",
        "session_id",
        "thread_id",
        "conversation.id",
        "metadata.conversation_id",
    )
    max_record_bytes: int = 1_048_576
    # Past this length a record is dead-lettered (too_large): why, in core/vocab.json.
    max_id_bytes: int = DEFAULT_MAX_ID_BYTES
    # Ids remembered per conversation to count re-sent history once (wire logs, OTel spans; see
    # core/dedup.py): past it the oldest is forgotten, and a later copy of it becomes an orphan.
    max_history_ids: int = 10_000
    # Conversations whose ids are remembered for that (least recently used forgotten first).
    max_history_conversations: int = 10_000
    # `--map FILE`: a compiled jq mapping (core/mapping.py `Mapping`) that reads every record in
    # place of the readers; None: the readers (and, for what none claims, discovery).
    mapping: Any = None


DEFAULT_CONFIG: Final = FormatConfig()

# Split dotted paths, cached per config object (identity): configs are built once per run, and
# hashing the fields tuple on every record would cost more than the lookup itself.
# Each path is (first key, remaining keys): most paths are a single key, read with one `get`.
_PATHS: dict[int, tuple[FormatConfig, tuple[tuple[str, tuple[str, ...]], ...]]] = {}


def _paths(config: FormatConfig) -> tuple[tuple[str, tuple[str, ...]], ...]:
    hit = _PATHS.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    split = [f.split(".") for f in config.conversation_fields]
    paths = tuple((parts[0], tuple(parts[1:])) for parts in split)
    if len(_PATHS) > 64:  # configs are few; never let a caller that builds one per record leak
        _PATHS.clear()
    _PATHS[id(config)] = (config, paths)
    return paths


# ---------------------------------------------------------------------------------------------
# Error helpers


_JSON_TYPE_NAMES: Final = {
    type(None): "null",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


def json_type(value: object) -> str:
    """`an array`, `a string`, ...: the JSON name of a value's type, with its article."""
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def where(prefix: str, index: int | None, field: str | None) -> str:
    """`prefix[index].field`, the JSON path of the offending value (prefix ends with '.' or '')."""
    path = prefix[:-1] if prefix.endswith(".") else prefix
    if index is not None:
        path = f"{path}[{index}]"
    if field:
        path = f"{path}.{field}" if path else field
    return path or "the record"


def wrong_type(
    value: object, prefix: str, index: int | None, field: str | None, expected: str
) -> FormatError:
    return FormatError(
        DeadLetterReason.WRONG_TYPE.value,
        f"{where(prefix, index, field)} is {json_type(value)}, expected {expected}",
    )


def missing(prefix: str, index: int | None, field: str, what: str) -> FormatError:
    return FormatError(
        DeadLetterReason.MISSING_FIELD.value, f"{where(prefix, index, field)} is missing: {what}"
    )


# ---------------------------------------------------------------------------------------------
# Field readers


def as_id(value: object, prefix: str, index: int | None, field: str) -> str | None:
    """A call id or referenced call id, trimmed; None when absent or blank (the FIFO case).
    Integers are accepted (JSON-RPC ids are often numbers) and rendered as decimal strings."""
    if value is None:
        return None
    if type(value) is str:
        return value.strip() or None
    if type(value) is int:
        return str(value)
    raise wrong_type(value, prefix, index, field, "a string id")


def as_name(value: object, prefix: str, index: int | None, field: str, required: bool) -> str | None:
    """A tool name, trimmed. A call cannot be identified without one, so `required` raises
    missing_field when it is absent or blank; results may omit it (it only refines FIFO)."""
    if type(value) is str:
        s = value.strip()
        if s:
            return s
    elif value is not None:
        raise wrong_type(value, prefix, index, field, "a string tool name")
    if required:
        raise missing(prefix, index, field, "a tool call needs a tool name")
    return None


def as_flag(value: object, prefix: str, index: int | None, field: str) -> bool | None:
    if value is None or type(value) is bool:
        return value
    raise wrong_type(value, prefix, index, field, "a boolean")


# MAX_DEPTH (the deepest nesting accepted in a kept block), TS_FIELDS and MAX_TS_MS are the
# vocabulary's (core/vocab.json, shared with the compiled core): defined there, with why.
# Nesting N deep takes N opening and N closing brackets: shorter JSON texts need no check.
DEPTH_CHECK_MIN_BYTES: Final = 2 * MAX_DEPTH


def too_deep(value: Any) -> bool:
    """Whether `value` nests more than MAX_DEPTH levels of arrays/objects (itself = level 1).
    A walk over containers only, level by level (no recursion limit to hit); its cost follows the
    number of JSON values, not bytes. `parse_record` only calls it for records with more than
    MAX_DEPTH opening brackets in their bytes (on ~1 KB records: ~1 us to count, ~2 us to walk)."""
    if type(value) is not dict and type(value) is not list:
        return False
    level: list[Any] = [value]
    depth = 1
    while True:
        deeper: list[Any] = []
        for container in level:
            for child in container.values() if type(container) is dict else container:
                if type(child) is dict or type(child) is list:
                    deeper.append(child)
        if not deeper:
            return False
        depth += 1
        if depth > MAX_DEPTH:
            return True
        level = deeper


def decode_arguments(value: Any) -> Any:
    """OpenAI encodes call arguments as a JSON string. Decode it when it holds a JSON object (the
    documented case); anything else (truncated JSON from a max_tokens stop, plain text) is kept
    verbatim: the original is more useful to a reader than a decoding error."""
    if type(value) is str:
        try:
            decoded = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        if type(decoded) is not dict or (len(value) > DEPTH_CHECK_MIN_BYTES and too_deep(decoded)):
            return value
        return decoded
    return value


# ---------------------------------------------------------------------------------------------
# Conversation id


def conversation_id(record: dict[str, Any], config: FormatConfig, key: str | None) -> str:
    """The first configured dotted path present in the record, else the Kafka message key."""
    for first, rest in _paths(config):
        value: Any = record.get(first)
        for part in rest:
            if type(value) is not dict:
                value = None
                break
            value = value.get(part)
        if value is None:
            continue
        if type(value) is str:
            s: str = value.strip()
            if s:
                return s
            continue
        if type(value) is int:
            return str(value)
        raise FormatError(
            DeadLetterReason.WRONG_TYPE.value,
            f"conversation id field '{'.'.join((first, *rest))}' is {json_type(value)}, "
            "expected a string or an integer",
        )
    if key is not None:
        s = key.strip()
        if s:
            return s
    fields = ", ".join(config.conversation_fields)
    tail = "and the message key is blank" if key is not None else "and no message key was given"
    raise FormatError(
        DeadLetterReason.MISSING_CONVERSATION_ID.value,
        f"none of the conversation id fields ({fields}) holds a non-empty value, {tail}",
    )


# ---------------------------------------------------------------------------------------------
# Timestamps


def record_ts(obj: dict[str, Any], prefix: str) -> float | None:
    """The record's own event time as epoch milliseconds, from the first timestamp field present."""
    for field in TS_FIELDS:
        value = obj.get(field)
        if value is None:
            continue
        if type(value) is str:  # inlined fast path: RFC 3339 with an offset, the usual log time
            try:
                dt = datetime.fromisoformat(value)
            except ValueError:
                return parse_ts(value, prefix, field)
            if dt.tzinfo is not None:
                ms = dt.timestamp() * 1000.0
                if 0.0 <= ms < MAX_TS_MS:
                    return ms
        return parse_ts(value, prefix, field)
    return None


def parse_ts(value: object, prefix: str, field: str) -> float:
    """Epoch seconds / ms / µs / ns numbers (told apart by magnitude: any real log time in
    seconds is below 1e11, in ms below 1e14, ...) or RFC 3339 strings, to epoch ms."""
    ms: float | None
    if type(value) is int or type(value) is float:
        ms = _epoch_to_ms(value)
    elif type(value) is str:
        ms = _str_to_ms(value)
        if ms is None:
            raise FormatError(
                DeadLetterReason.WRONG_TYPE.value,
                f"{where(prefix, None, field)} is the string {_clip(value)!r}, "
                "expected an RFC 3339 timestamp or epoch seconds/milliseconds",
            )
    else:
        raise wrong_type(value, prefix, None, field, "an RFC 3339 string or an epoch number")
    if not (0.0 <= ms < MAX_TS_MS):  # also rejects NaN
        raise FormatError(
            DeadLetterReason.WRONG_TYPE.value,
            f"{where(prefix, None, field)} is {_clip(str(value))!r}, outside the years 1970..9999",
        )
    return ms


def _epoch_to_ms(v: float) -> float:
    if v < 1e11:
        return v * 1000.0
    if v < 1e14:
        return float(v)
    if v < 1e17:
        return v / 1000.0
    return v / 1_000_000.0


def _str_to_ms(s: str) -> float | None:
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        try:
            return _epoch_to_ms(float(s))  # a number written as a string
        except (ValueError, OverflowError):
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)  # RFC 3339 requires an offset; naive log times are UTC in practice
    return dt.timestamp() * 1000.0


def _clip(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[:n] + "..."


def call_list(calls: Any, prefix: str, field: str, keys: tuple[str, str, str], fmt: str) -> list[Part]:
    """The calls of an array of call objects `{id, name, arguments}` named by `keys` (the
    frameworks spell them each their own way: LangChain `id/name/args`, ATIF
    `tool_call_id/function_name/arguments`, AutoGen `id/name/arguments`); `field` is the array's
    member in the record, for error paths. Arguments given as a JSON text are decoded."""
    if calls is None:
        return []
    if type(calls) is not list:
        raise wrong_type(calls, prefix, None, field, "an array")
    path = f"{prefix}{field}"
    id_key, name_key, args_key = keys
    out: list[Part] = []
    for i, c in enumerate(calls):
        if type(c) is not dict:
            raise wrong_type(c, path, i, None, "a tool call object")
        call_id = as_id(c.get(id_key), path, i, id_key)
        name = as_name(c.get(name_key), path, i, name_key, True)
        out.append((CALL, call_id, name, decode_arguments(c.get(args_key)), None, c, fmt))
    return out
