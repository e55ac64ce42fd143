"""The reference model of failure-point tagging (the compiled core runs it: native/src/tagging.rs;
tests compare the two).

Failure-point tagging: which of the five points a tool call went wrong at, and the outcome.

The second source article's first step is not to edit prompts but to tag every call with the point
where it failed and count: a week later one table says what to fix. The engine calls
`FailureTagger.on_call` for every call in arrival order (so repeats and loop caps can be counted)
and `FailureTagger.tag` for every pair or orphan just before it is emitted. Everything here is a
pure function of the events (time is the events' own `ts_ms`; no clock is read), and the state
kept per conversation is bounded.

The exact rules, with examples, are in docs/FAILURES.md; the constants below are the single place
where their vocabulary is defined.
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from stream_pairer.core.config import (
    MAX_CALLS_PER_CONVERSATION,
    MAX_CONVERSATION_MS,
    MAX_HASHES_PER_CONVERSATION,
    MAX_HASHES_TOTAL,
)
from stream_pairer.core.model import ToolEvent
from stream_pairer.core.toolcheck import cut as _cut
from stream_pairer.core.toolcheck import decode_arguments, schema_findings
from stream_pairer.core.vocab import (
    BEDROCK_BLOCKS,
    FREEFORM_CALL_TYPES,
    JSONRPC_INVALID_PARAMS,
    MAX_DECODE_CHARS,
    MAX_PENDING_REQUESTS,
    MAX_UNWRAP,
    OTHER_BLOCKS,
    REJECTION,
    REJECTION_CHARS,
    REJECTION_PREFIX,
    TEXT_BLOCKS,
    FailurePoint,
    LoopCap,
    OrphanReason,
    Outcome,
    RecordKind,
)
from tests.reference.repeats import call_key as _call_key

if TYPE_CHECKING:  # a registry is built (loading jsonschema_rs) only when --tool-schemas asks for one
    from stream_pairer.core.toolschemas import ToolSchemaRegistry

# The vocabulary (vocab.py) as plain `str` globals, read on every tagged record.
OK: Final = Outcome.OK.value
EMPTY: Final = Outcome.EMPTY.value
ERROR: Final = Outcome.ERROR.value

TOOL_SELECTION: Final = FailurePoint.TOOL_SELECTION.value
ARGUMENT_CONSTRUCTION: Final = FailurePoint.ARGUMENT_CONSTRUCTION.value
EXECUTION: Final = FailurePoint.EXECUTION.value
RESULT_INTERPRETATION: Final = FailurePoint.RESULT_INTERPRETATION.value
TERMINATION: Final = FailurePoint.TERMINATION.value
_ORPHAN_CALL: Final = RecordKind.ORPHAN_CALL.value
_TIMEOUT: Final = OrphanReason.TIMEOUT.value

# Priority of `failure` when several points apply: the order of the call's own life (which tool,
# which arguments, did it run, what came back, should it have run at all). The earliest point is
# the cause the others follow from: a call with invented arguments that then errors is fixed in the
# schema, not with retries; a repeat of an empty lookup is fixed by the result format. Termination
# is last because it is a property of the loop around the call, and it stays in `failures`.
POINTS: Final = (TOOL_SELECTION, ARGUMENT_CONSTRUCTION, EXECUTION, RESULT_INTERPRETATION, TERMINATION)
PRIORITY: Final = {p: i for i, p in enumerate(POINTS)}

STATUSES: Final = frozenset({OK, EMPTY, ERROR})
# The input-rejection heuristic: text the model was shown saying its input was refused. Anchored at
# the start of the text (after an "Error:"-style prefix) so that a result which merely mentions
# "invalid input" somewhere in its data is not taken for a rejection. Its patterns, and the limits
# and block types above the Verdict, are the vocabulary's (core/vocab.json, shared with the
# compiled core): defined there, with their sources.
_PREFIX = re.compile(REJECTION_PREFIX, re.I)
_REJECTION = re.compile(REJECTION, re.I)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a result payload says: the outcome, why (a short phrase for `failure_detail`), the
    text the model was shown (for the rejection heuristic) and a JSON-RPC error code if any."""

    outcome: str
    why: str
    text: str | None = None
    code: int | None = None


def classify_result(content: Any, is_error: bool | None) -> Verdict:
    """ok / empty / error for one result. The format's error flag wins; then the payload."""
    v = _payload(content, True, 0)
    if is_error is True and v.outcome != ERROR:
        return Verdict(ERROR, "error flag", v.text, v.code)
    return v


def _payload(value: Any, blocks: bool, depth: int) -> Verdict:
    if value is None:
        return Verdict(EMPTY, "null")
    if isinstance(value, str):
        return _text(value, depth)
    if isinstance(value, list):
        if not value:
            return Verdict(EMPTY, "empty list")
        if blocks:
            v = _content_blocks(value, depth)
            if v is not None:
                return v
        return Verdict(OK, "data")
    if isinstance(value, dict):
        return _object(value, depth)
    return Verdict(OK, "data")  # numbers and booleans are answers (0 and false included)


def _text(s: str, depth: int) -> Verdict:
    t = s.strip()
    if not t:
        return Verdict(EMPTY, "blank text")
    if t == "null":
        return Verdict(EMPTY, "null")
    first = t[0]
    if first in "[{" and not t[1:-1].strip() and t[-1] == ("]" if first == "[" else "}"):
        return Verdict(EMPTY, "empty list" if first == "[" else "empty object")
    if first in '{"' and depth < MAX_UNWRAP and len(t) <= MAX_DECODE_CHARS:
        try:
            decoded = orjson.loads(t)
        except orjson.JSONDecodeError:
            return Verdict(OK, "text", s)
        if isinstance(decoded, dict | str):
            v = _payload(decoded, False, depth + 1)
            return v if v.text is not None else Verdict(v.outcome, v.why, s, v.code)
    return Verdict(OK, "text", s)


def _content_blocks(items: list[Any], depth: int) -> Verdict | None:
    """An Anthropic / MCP / OpenAI content list (blocks with a `type`) or a Bedrock one (blocks
    keyed by kind). None when the list is data, not content blocks."""
    texts: list[str] = []
    others = 0
    json_values: list[Any] = []
    for b in items:
        if not isinstance(b, dict):
            return None
        bt = b.get("type")
        if isinstance(bt, str):
            if bt in TEXT_BLOCKS and isinstance(b.get("text"), str):
                texts.append(b["text"])
            elif bt in OTHER_BLOCKS:
                others += 1
            else:
                return None
        elif bt is None and len(b) == 1 and next(iter(b)) in BEDROCK_BLOCKS:
            if "text" in b and isinstance(b["text"], str):
                texts.append(b["text"])
            elif "json" in b:
                json_values.append(b["json"])
            else:
                others += 1
        else:
            return None
    if others:
        return Verdict(OK, "content", texts[0] if texts else None)
    if len(json_values) == 1 and not texts:
        return _payload(json_values[0], False, depth + 1)
    if json_values:
        return Verdict(OK, "content", texts[0] if texts else None)
    if all(not t.strip() for t in texts):
        return Verdict(EMPTY, "blank text")
    if len(texts) == 1:
        return _text(texts[0], depth + 1)
    return Verdict(OK, "content", next(t for t in texts if t.strip()))


def _object(d: dict[str, Any], depth: int) -> Verdict:
    if not d:
        return Verdict(EMPTY, "empty object")
    status = d.get("status")
    if isinstance(status, str) and status in STATUSES:  # the article's {"status", "data", "hint"}
        return _status_object(d, status)
    if depth < MAX_UNWRAP:
        inner = _unwrapped(d, depth)
        if inner is not None:
            return inner
    if (
        "code" in d
        and "message" in d
        and d.keys() <= {"code", "message", "data"}
        and isinstance(d["code"], int)
    ):
        return _error_object(d)  # a bare JSON-RPC error object (the MCP format's error payload)
    return Verdict(OK, "data")


def _status_object(d: dict[str, Any], status: str) -> Verdict:
    """The canonical result shape `{"status", "data", "hint"}`: the status says it."""
    hint = d.get("hint")
    text = hint if isinstance(hint, str) else d.get("data") if isinstance(d.get("data"), str) else None
    if status == ERROR:
        return Verdict(ERROR, "status error", text)
    if status == EMPTY:
        return Verdict(EMPTY, "status empty", text)
    if "data" in d and _is_empty(d["data"]):
        return Verdict(EMPTY, "status ok with empty data", text)
    return Verdict(OK, "status ok", text)


def _unwrapped(d: dict[str, Any], depth: int) -> Verdict | None:
    """The verdict of a result wrapped in a known envelope, or None when `d` is no envelope."""
    # An MCP CallToolResult passed whole.
    if isinstance(d.get("content"), list) and d.keys() <= {
        "content",
        "isError",
        "structuredContent",
        "_meta",
    }:
        return _mcp_result(d, depth)
    # A JSON-RPC response passed whole.
    if "jsonrpc" in d:
        if d.get("error") is not None:
            return _error_object(d["error"])
        if "result" in d:
            return _payload(d["result"], True, depth + 1)
    # Gemini's documented convention: {"output": ...} or {"error": ...}; {"result": ...} too.
    if len(d) == 1:
        (key, inner_value) = next(iter(d.items()))
        if key == "error" and inner_value is not None:
            return _error_object(inner_value)
        if key in ("output", "result"):
            return _payload(inner_value, False, depth + 1)
    return None


def _mcp_result(d: dict[str, Any], depth: int) -> Verdict:
    if d.get("isError") is True:
        inner = _payload(d["content"], True, depth + 1)
        return Verdict(ERROR, "MCP isError", inner.text)
    sc = d.get("structuredContent")
    if isinstance(sc, dict) and isinstance(sc.get("status"), str) and sc["status"] in STATUSES:
        return _object(sc, depth + 1)
    return _payload(d["content"], True, depth + 1)


def _error_object(err: Any) -> Verdict:
    if isinstance(err, dict):
        code = err.get("code") if isinstance(err.get("code"), int) else None
        msg = err.get("message")
        why = f"JSON-RPC error {code}" if code is not None else "error object"
        return Verdict(ERROR, why, msg if isinstance(msg, str) else None, code)
    return Verdict(ERROR, "error object", err if isinstance(err, str) else None)


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, list | dict):
        return not value
    return isinstance(value, str) and not value.strip()


def input_rejection(v: Verdict) -> str | None:
    """`failure_detail` when the result is the tool refusing the model's input, else None."""
    if v.code == JSONRPC_INVALID_PARAMS:
        said = f": {_first_line(v.text)}" if v.text else ""
        return _cut(f"input rejected (JSON-RPC {v.code}){said}")
    if v.text is None:
        return None
    head = v.text[:REJECTION_CHARS]
    m = _PREFIX.match(head)
    rest = head[m.end() :] if m else head
    if _REJECTION.match(rest):
        said = _first_line(rest)
        # The text may itself start with "Input rejected: ...": not "input rejected: input rejected".
        if said[:14].lower() == "input rejected":
            said = said[14:].lstrip(" :-")
        return _cut(f"input rejected: {said}" if said else "input rejected")
    return None


class _ConvState:
    """The tagger's per-conversation memory (kept in `Conversation.tags`, dropped with it).

    `calls` and `first_ts_ms` count from the start of the current request (reset by
    `FailureTagger.on_request`); `calls_crossed` / `time_crossed` say whether this request already
    crossed a cap (only the crossing call is tagged)."""

    __slots__ = ("calls", "calls_crossed", "first_ts_ms", "seen", "time_crossed")

    def __init__(self) -> None:
        self.calls = 0
        self.first_ts_ms: float | None = None
        self.calls_crossed = False
        self.time_crossed = False
        # _call_key(tool, arguments) -> (label of the first such call, its id, times seen, serial).
        # Insertion-ordered: past the cap the oldest entry goes, so memory stays bounded. The
        # serial (the tagger's count of stored entries) tells the tagger's process-wide queue
        # whether the entry it remembers is still the live one. Tuples of atoms, so that CPython's
        # cyclic GC untracks them (and then the dict): lists here made every collection walk
        # every remembered call, +1 s of GC per 300k records at 1k conversations (measured).
        self.seen: dict[int, tuple[str, str | None, int, int]] = {}


class FailureTagger:
    """Sets `outcome`, `failure`, `failure_detail` and `failures` on every output record.

    `max_calls_per_conversation` and `max_conversation_ms` are the article's loop brakes (0
    disables one), counted per request as the article says ("한 요청에서", in one request): from
    the start of each request (`on_request`: a user message that is not a tool result, or the
    format's own turn marker; a format without one makes the whole conversation one request) to
    the next. Only the call that crosses a cap is tagged `termination`; `crossings` counts them by
    cap ("calls", "time"). The names keep the "conversation" of the options they come from.
    `max_hashes_per_conversation` bounds the memory of the repeat check (the oldest remembered
    call is forgotten first, so a repeat further back than that is not seen).
    `max_hashes_total` bounds the same memory across all conversations of one engine: 256 entries x
    100k conversations would otherwise grow to 25M entries (~4 GiB) long after held bytes stopped
    growing (BENCHMARKS.md part 4). Past it the oldest remembered call of any conversation is
    forgotten first; forgetting only means that a later repeat of that call is not detected.
    The sidecar gives each partition's engine its own tagger (`fresh()`), so that this bound, like
    the engine's limits, depends on that partition's input alone and a replay on a new owner tags
    exactly as the first pass did.
    """

    __slots__ = (
        "_keys",
        "_pending",
        "_serial",
        "_serials",
        "_states",
        "crossings",
        "max_calls",
        "max_hashes",
        "max_ms",
        "max_total",
        "schemas",
    )

    def __init__(
        self,
        schemas: ToolSchemaRegistry | None = None,
        *,
        max_calls_per_conversation: int = MAX_CALLS_PER_CONVERSATION,
        max_conversation_ms: float = MAX_CONVERSATION_MS,
        max_hashes_per_conversation: int = MAX_HASHES_PER_CONVERSATION,
        max_hashes_total: int = MAX_HASHES_TOTAL,
    ) -> None:
        if (
            max_calls_per_conversation < 0
            or max_conversation_ms < 0
            or max_hashes_per_conversation < 1
            or max_hashes_total < 1
        ):
            raise ValueError("tagger limits must be >= 0 (hashes >= 1)")
        self.schemas = schemas
        self.max_calls = max_calls_per_conversation
        self.max_ms = max_conversation_ms
        self.max_hashes = max_hashes_per_conversation
        self.max_total = max_hashes_total
        # Every entry stored in any conversation's `seen`, oldest first, as three parallel queues
        # (its state, its key, its serial): three containers in all, not one per entry, so the
        # GC has no per-call object to walk. An entry already dropped (per-conversation cap, or
        # its conversation gone) stays here as a stale item until it reaches the front; the
        # queues' length therefore bounds the live entries, and how long a dropped conversation's
        # state is kept.
        self._states: deque[_ConvState] = deque()
        self._keys: deque[int] = deque()
        self._serials: deque[int] = deque()
        self._serial = 0
        self.crossings: Counter[str] = Counter()
        # conversation id -> start time of a request announced before the conversation had state
        self._pending: OrderedDict[str, float | None] = OrderedDict()

    def fresh(self) -> FailureTagger:
        """A tagger with the same settings and schema registry (compiled once, shared) and empty
        state: one per partition, see the class docstring."""
        return FailureTagger(
            self.schemas,
            max_calls_per_conversation=self.max_calls,
            max_conversation_ms=self.max_ms,
            max_hashes_per_conversation=self.max_hashes,
            max_hashes_total=self.max_total,
        )

    @property
    def remembered_calls(self) -> int:
        """Upper bound of the call hashes held across all conversations (the queue's length)."""
        return len(self._keys)

    # -- calls, in arrival order ------------------------------------------------------------

    def on_request(self, conv: Any, ts_ms: float | None) -> None:
        """A new request starts in `conv` at `ts_ms`: the loop caps count from here."""
        state = conv.tags
        if not isinstance(state, _ConvState):
            state = conv.tags = _ConvState()
        state.calls = 0
        state.first_ts_ms = ts_ms
        state.calls_crossed = state.time_crossed = False

    def on_pending_request(self, conversation_id: str, ts_ms: float | None) -> None:
        """A request starts in a conversation the engine holds no state for yet (its prompt comes
        before its first call): remembered, bounded, until that first call creates the state."""
        pending = self._pending
        pending[conversation_id] = ts_ms
        pending.move_to_end(conversation_id)
        if len(pending) > MAX_PENDING_REQUESTS:
            pending.popitem(last=False)

    def on_call(self, call: ToolEvent, conv: Any) -> None:
        state = conv.tags
        if not isinstance(state, _ConvState):
            state = conv.tags = _ConvState()
            pending = self._pending
            if pending and call.conversation_id in pending:
                state.first_ts_ms = pending.pop(call.conversation_id)  # its request's prompt
        found: dict[str, str] = {}
        args, bad_json = _arguments(call)
        if bad_json is not None:
            found[ARGUMENT_CONSTRUCTION] = bad_json
        if self.schemas is not None:
            found.update(schema_findings(self.schemas, call.name, args, bad_json is not None))
        term = self._termination(call, args, state)
        if term is not None and term != _REDELIVERY:
            found[TERMINATION] = term
        points = sorted(found, key=PRIORITY.__getitem__)
        call.failures = points
        call.failure = points[0] if points else None
        call.failure_detail = found[points[0]] if points else None

    def _termination(self, call: ToolEvent, args: Any, state: _ConvState) -> str | None:
        key = _call_key(call.name, args)
        prev = state.seen.get(key)
        if prev is not None and call.id is not None and prev[1] == call.id:
            # The same call delivered twice (same id, tool and arguments): not a new call by the
            # model, so it neither repeats nor counts towards the cap.
            return _REDELIVERY
        state.calls += 1
        n = state.calls
        ts = call.ts_ms
        if ts is not None and (state.first_ts_ms is None or ts < state.first_ts_ms):
            state.first_ts_ms = ts
        detail: str | None = None
        if prev is not None:
            times = prev[2] + 1
            state.seen[key] = (prev[0], prev[1], times, prev[3])
            detail = f"repeats call {prev[0]} (same tool and arguments; identical call #{times})"
        else:
            seen = state.seen
            if len(seen) >= self.max_hashes:
                del seen[next(iter(seen))]
            label = call.id if call.id is not None else f"#{n} (no id)"
            self._serial = serial = self._serial + 1
            seen[key] = (label, call.id, 1, serial)
            self._states.append(state)
            self._keys.append(key)
            self._serials.append(serial)
            if len(self._keys) > self.max_total:
                self._forget_oldest()
        if self.max_calls and n > self.max_calls and not state.calls_crossed:
            state.calls_crossed = True
            self.crossings[LoopCap.CALLS.value] += 1
            detail = detail or f"call {n} in this request, past the cap of {self.max_calls}"
        if self.max_ms and ts is not None and state.first_ts_ms is not None and not state.time_crossed:
            elapsed = ts - state.first_ts_ms
            if elapsed > self.max_ms:
                state.time_crossed = True
                self.crossings[LoopCap.TIME.value] += 1
                detail = detail or (
                    f"call at +{elapsed / 1000:.1f} s after the start of this request, "
                    f"past the {self.max_ms / 1000:g} s cap"
                )
        return None if detail is None else _cut(detail)

    def _forget_oldest(self) -> None:
        old_state, old_key, old_serial = self._states.popleft(), self._keys.popleft(), self._serials.popleft()
        seen = old_state.seen
        entry = seen.get(old_key)
        if entry is not None and entry[3] == old_serial:
            del seen[old_key]
            if not seen:
                seen.clear()  # frees the table a deletion keeps (see Engine._release)

    # -- records, just before they are emitted ---------------------------------------------

    def tag(self, record: dict[str, Any], call: ToolEvent | None, result: ToolEvent | None) -> None:
        found: dict[str, str | None] = {}
        if call is not None:
            for p in call.failures:
                found[p] = call.failure_detail if p == call.failure else None
        outcome: str | None = None
        if result is not None:
            v = classify_result(result.payload, result.is_error)
            outcome = v.outcome
            rejected = input_rejection(v)
            if rejected is not None:
                # A refusal of the input is the arguments' fault, not the infrastructure's.
                found.setdefault(ARGUMENT_CONSTRUCTION, rejected)
            elif outcome == ERROR:
                said = f": {_first_line(v.text)}" if v.text else ""
                found.setdefault(EXECUTION, _cut(f"error result ({v.why}){said}"))
            if outcome == EMPTY:
                found.setdefault(RESULT_INTERPRETATION, f"empty result ({v.why})")
        elif record.get("kind") == _ORPHAN_CALL and record.get("reason") == _TIMEOUT:
            found.setdefault(EXECUTION, "no result within the call timeout")
        points = sorted(found, key=PRIORITY.__getitem__)
        record["outcome"] = outcome
        record["failures"] = points
        record["failure"] = points[0] if points else None
        record["failure_detail"] = found[points[0]] if points else None


_REDELIVERY: Final = "\x00redelivery"


def _arguments(call: ToolEvent) -> tuple[Any, str | None]:
    """The call's arguments as a JSON value, and a detail when they are an undecodable JSON string.

    The formats layer already decodes JSON-string arguments that hold an object; a string left
    here is either JSON of another type (decoded now, so the schema sees it) or not JSON at all.
    Absent arguments are taken as `{}` (MCP makes them optional)."""
    args = call.payload
    if args is None:
        return {}, None
    if not isinstance(args, str):
        return args, None
    raw = call.raw
    if isinstance(raw, dict) and isinstance(raw.get("type"), str) and raw["type"] in FREEFORM_CALL_TYPES:
        return args, None
    return decode_arguments(args)


def _first_line(s: str) -> str:
    s = s.strip()
    i = s.find("\n")
    return s if i < 0 else s[:i]
