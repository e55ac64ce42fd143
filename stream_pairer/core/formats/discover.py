"""The reader of shapes nobody named: what every family has in common, found inside any record.

Runs only where no reader claimed a record (the dispatch raised `unknown_shape`, or the record is of
a `type` no format knows), never on a record a reader reads: the fast path and every named reader
cost nothing more. It walks the record (bounded: MAX_DEPTH levels, MAX_NODES values, MAX_DECODED
bytes of JSON text found in strings, e.g. an HTTP body) looking for
* a call: an object that names a tool (`name`, `tool_name`, `toolName`, `tool`, `function_name`,
  `function: "x"` or `function: {name, arguments}`), carries arguments (`arguments`, `args`,
  `input`, `parameters`, `params`, `kwargs`, `tool_input`; an object or JSON text, never a list of
  messages) and an id (`tool_call_id`, `call_id`, `tool_use_id`, `toolCallId`, `toolUseId`,
  `callId`, else `id`);
* a result: an object that carries a result (`result`, `output`, `response`, `observation`,
  `return_value`, `tool_result`, `content`, `error`) and points at a call id (the keys above,
  `source_call_id`, `function_call_id`, or a list of ids: `tool_call_ids`, one result per id); its
  plain `id` counts as the pointer only under a result-ish key (`function_response`, ...) or in a
  message whose role is a tool's (`tool`, `function`, `ipython`); the pointer may also sit in a
  metadata object beside the result (`tool_call_metadata: {tool_call_id}`);
* both at once: a tool invocation logged whole (name, arguments, id and `result`/`output`), a call
  and its result sharing the id.
Nothing is guessed without an id: the engine pairs what is found by id only, and id-less look-alikes
are reported, not paired by position. Events are labelled `discovered` (their own format, counted in
the summary and `stream_pairer_events_read_total{format="discovered"}`), so nobody mistakes a guess for a
reader. Re-sent copies (the same id seen again, as in request logs) are counted once (RESENT_FORMATS).

When nothing is found, `explain` says what was seen: the keys, the nearest known family by key
overlap (catalog samples), or that a mapping is needed (`--map`).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from stream_pairer.core.formats.common import (
    CALL,
    MARK_SCOPE,
    RESULT,
    Part,
    decode_arguments,
    mark,
    record_ts,
)
from stream_pairer.core.model import FormatError
from stream_pairer.core.vocab import DeadLetterReason

__all__ = ["DISCOVERED", "discover", "explain", "read"]

DISCOVERED: Final = "discovered"
MAX_DEPTH: Final = 24
MAX_NODES: Final = 50_000
MAX_DECODED: Final = 1_048_576

NAME_KEYS: Final = ("name", "tool_name", "toolName", "tool", "function_name", "functionName")
ARG_KEYS: Final = ("arguments", "args", "input", "parameters", "params", "kwargs", "tool_input", "toolInput")
# Keys that can only mean "the call this answers" on a result, or the call's own id on a call.
REF_KEYS: Final = (
    "tool_call_id",
    "call_id",
    "tool_use_id",
    "toolCallId",
    "toolUseId",
    "callId",
    "source_call_id",
    "function_call_id",
)
REF_LIST_KEYS: Final = ("tool_call_ids", "toolCallIds", "call_ids")
STRONG_RESULT_KEYS: Final = (
    "result",
    "output",
    "response",
    "observation",
    "return_value",
    "returnValue",
    "tool_result",
    "toolResult",
)
RESULT_KEYS: Final = (*STRONG_RESULT_KEYS, "content", "error")
TOOL_ROLES: Final = frozenset({"tool", "function", "ipython", "tool_result", "observation"})
_RESULTISH: Final = ("result", "response", "output", "observation")
_ERROR_STATUS: Final = frozenset({"error", "failed", "failure", "errored"})
_TS_KEYS: Final = ("ts", "timestamp", "created_at", "created", "createTime", "start_time", "startTime")


def read(record: dict[str, Any], detail: str | None) -> list[Part]:
    """The discovered events of a record no reader claimed. `detail`: why the readers refused it
    (the unknown_shape sentence); when nothing is found that becomes the dead letter's detail,
    with what was seen (`explain`). None (a record of an unknown `type`, skipped unless something
    is found): nothing found returns []."""
    parts, idless = discover(record)
    if parts or detail is None:
        return parts
    from stream_pairer.core.formats.catalog import signatures  # noqa: PLC0415 - the error path only

    raise FormatError(DeadLetterReason.UNKNOWN_SHAPE.value, explain(record, detail, idless, signatures()))


def discover(record: Any) -> tuple[list[Part], int]:
    """The events found inside `record` (SCOPE markers carry each one's own time when it has
    one), and how many call-like objects had no id (found, not paired)."""
    walker = _Walker()
    walker.walk(record)
    return walker.parts, walker.idless


class _Walker:
    __slots__ = ("budget", "idless", "nodes", "parts")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.idless = 0
        self.nodes = 0
        self.budget = MAX_DECODED

    def walk(self, root: Any) -> None:
        # (value, depth, key it sits under, inherited time): depth-first, in document order
        stack: list[tuple[Any, int, str, float | None]] = [(root, 0, "", None)]
        while stack:
            value, depth, key, ts = stack.pop()
            self.nodes += 1
            if self.nodes > MAX_NODES or depth > MAX_DEPTH:
                continue
            if type(value) is str:
                value = self._decoded(value)
                if value is None:
                    continue
            if type(value) is list:
                stack.extend((v, depth + 1, key, ts) for v in reversed(value))
                continue
            if type(value) is not dict:
                continue
            own = _time(value)
            if own is not None:
                ts = own
            if self._found(value, key, ts):
                continue  # a call or result owns its payload: never looked into
            stack.extend(
                (v, depth + 1, str(k), ts)
                for k, v in reversed(value.items())
                if type(v) is dict or type(v) is list or (type(v) is str and v[:1] in "{[" and len(v) > 1)
            )

    def _decoded(self, text: str) -> Any:
        """JSON text inside a string (an HTTP body, a serialized message), within the budget."""
        if len(text) > self.budget or text[:1] not in "{[" or text[-1:] not in "}]":
            return None
        self.budget -= len(text)
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return None

    def _found(self, d: dict[str, Any], key: str, ts: float | None) -> bool:
        name, args = _name_and_args(d)
        ref, refs = _refs(d)
        result_key = next((k for k in RESULT_KEYS if k in d), None)
        strong = result_key is not None and result_key in STRONG_RESULT_KEYS
        if refs is None and result_key is not None:
            own = _id(d.get("id")) if _id_points_back(d, key) else None
            refs = [own] if own is not None else _nested_ref(d)
        if name is not None and args is not None and not (refs is not None and strong):
            call_id = ref if ref is not None else _id(d.get("id"))
            if call_id is None:
                self.idless += 1
                return True
            self._emit(ts, (CALL, call_id, name, decode_arguments(args), None, d, DISCOVERED))
            if strong and result_key is not None:  # a tool invocation logged whole
                self._emit(
                    ts, (RESULT, call_id, name, d[result_key], _is_error(d, result_key), d, DISCOVERED)
                )
            return True
        if refs is not None and result_key is not None:
            payload, is_error = d[result_key], _is_error(d, result_key)
            for ref_id in refs:
                self._emit(ts, (RESULT, ref_id, name, payload, is_error, d, DISCOVERED))
            return True
        return False

    def _emit(self, ts: float | None, part: Part) -> None:
        self.parts.append(mark(MARK_SCOPE, None, ts))
        self.parts.append(part)


def _name_and_args(d: dict[str, Any]) -> tuple[str | None, Any]:
    fn = d.get("function")
    if type(fn) is dict:  # OpenAI-style {id, function: {name, arguments}}
        name, args = _str(fn.get("name")), _args(fn.get("arguments", fn.get("parameters")))
        if name is not None and args is not None:
            return name, args
    name = _str(fn) if type(fn) is str else None
    if name is None:
        name = next((s for s in (_str(d.get(k)) for k in NAME_KEYS) if s is not None), None)
    if name is None:
        return None, None
    args = next((a for a in (_args(d.get(k)) for k in ARG_KEYS) if a is not None), None)
    return name, args


def _args(value: Any) -> Any:
    """Arguments are an object (or its JSON text); a list of messages is a model's input, not a
    tool's, and an object holding `messages` likewise."""
    if type(value) is dict:
        return None if "messages" in value else value
    if type(value) is str and value[:1] == "{":
        return value
    return None


def _refs(d: dict[str, Any]) -> tuple[str | None, list[str] | None]:
    """The first call-id key present (as an id), and the ids it points at (None: none)."""
    for k in REF_KEYS:
        if k in d:
            ref = _id(d[k])
            if ref is not None:
                return ref, [ref]
    for k in REF_LIST_KEYS:
        v = d.get(k)
        if type(v) is list:
            ids = [i for i in (_id(x) for x in v) if i is not None]
            if ids:
                return None, ids
    return None, None


def _nested_ref(d: dict[str, Any]) -> list[str] | None:
    """A result whose call id sits in a metadata object beside it (OpenHands observations:
    `tool_call_metadata.tool_call_id`): a child object holding a call-id key and no result."""
    for v in d.values():
        if type(v) is dict and not any(k in v for k in RESULT_KEYS):
            refs = _refs(v)[1]
            if refs is not None:
                return refs
    return None


def _id_points_back(d: dict[str, Any], key: str) -> bool:
    """Whether a plain `id` names the call answered: under a result-ish key
    (`function_response`, `functionResponse`, ...) or in a tool-role message."""
    if "id" not in d:
        return False
    k = key.lower()
    if any(w in k for w in _RESULTISH):
        return True
    role = d.get("role")
    return type(role) is str and role in TOOL_ROLES


def _is_error(d: dict[str, Any], result_key: str) -> bool | None:
    for k in ("is_error", "isError"):
        v = d.get(k)
        if type(v) is bool:
            return v
    status = d.get("status")
    if type(status) is str:
        return status.lower() in _ERROR_STATUS
    if d.get("success") is False:
        return True
    if result_key == "error" or d.get("error") not in (None, "", False):
        return True
    return None


def _id(value: Any) -> str | None:
    if type(value) is str:
        return value.strip() or None
    if type(value) is int:
        return str(value)
    return None


def _str(value: Any) -> str | None:
    if type(value) is str:
        s = value.strip()
        return s or None
    return None


def _time(d: dict[str, Any]) -> float | None:
    if not any(k in d for k in _TS_KEYS):
        return None
    try:
        return record_ts(d, "")
    except FormatError:
        return None


# ------------------------------------------------------------------------------------- explaining


def explain(record: Any, detail: str, idless: int, signatures: dict[str, frozenset[str]]) -> str:
    """The dead-letter detail of a record nothing could read: what was said already, what the
    walk saw, the nearest family by key overlap (`signatures`: format -> its sample's keys), or
    that a mapping is needed."""
    seen = keys_of(record)
    said = [detail.rstrip(".")]
    if idless:
        said.append(
            f"it holds {idless} call-like object(s) (a tool name and arguments) without an id: not "
            "paired by guess"
        )
    else:
        said.append(
            "no tool call or result was found inside it (a tool name with arguments and an id, or "
            "a result pointing at a call id)"
        )
    near = nearest(seen, signatures)
    if near is not None:
        fmt, shared = near
        said.append(
            f"nearest known format: {fmt} (shares keys {', '.join(sorted(shared)[:8])}; "
            "`stream-pairer formats` shows its sample)"
        )
    shown = ", ".join(sorted(seen)[:16]) + (", ..." if len(seen) > 16 else "")
    said.append(f"keys seen: [{shown}]; to read this shape, write a mapping (--map FILE, README 'Mappings')")
    return "; ".join(said)


_GENERIC: Final = frozenset(
    {"id", "type", "name", "role", "content", "ts", "timestamp", "text", "data", "value"}
)


def keys_of(value: Any, depth: int = 4, limit: int = 2000) -> set[str]:
    """Object keys at any level down to `depth` (bounded: `limit` values looked at)."""
    keys: set[str] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    n = 0
    while stack and n < limit:
        v, d = stack.pop()
        n += 1
        if type(v) is dict:
            keys.update(str(k) for k in v)
            if d < depth:
                stack.extend((c, d + 1) for c in v.values() if type(c) is dict or type(c) is list)
        elif type(v) is list and d < depth:
            stack.extend((c, d + 1) for c in v[:50] if type(c) is dict or type(c) is list)
    return keys


def nearest(seen: set[str], signatures: dict[str, frozenset[str]]) -> tuple[str, set[str]] | None:
    """The family whose sample shares the most telling keys with `seen` (Jaccard over keys that
    are not generic); None when no family shares at least two."""
    mine = seen - _GENERIC
    best: tuple[float, str, set[str]] | None = None
    for fmt, keys in signatures.items():
        theirs = keys - _GENERIC
        shared = mine & theirs
        if len(shared) < 2:
            continue
        score = len(shared) / len(mine | theirs)
        if best is None or score > best[0]:
            best = (score, fmt, shared)
    return None if best is None else (best[1], best[2])
