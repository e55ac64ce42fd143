"""The record vocabulary: every closed set of strings the outputs, metrics and reports share.

Defined once here and nowhere else, as `StrEnum`s: a member *is* its string (`RecordKind.PAIR ==
"pair"`, same hash), so members are dict keys, label values and JSON values as they are, and a
reader of this file sees every kind, reason, outcome and limit in one place. The JSON Schemas in
`stream_pairer/schemas/` publish the same sets; a test keeps the two equal.

Hot paths (engine, pipeline, tagging, metrics) bind the members they use to module constants once:
in Python 3.11 reading `Enum.MEMBER` costs an attribute lookup through the enum machinery, a global
costs a dict hit. Output records carry the members' `.value` (plain `str`), so orjson writes them
byte for byte as before and summaries keyed by them stay JSON-serializable.

The output records' shapes are TypedDicts at the end of this module (the contract the schemas state).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict


class RecordKind(StrEnum):
    """`kind` of an output record."""

    PAIR = "pair"
    ORPHAN_CALL = "orphan_call"
    ORPHAN_RESULT = "orphan_result"
    DEAD_LETTER = "dead_letter"


ORPHAN_KINDS = (RecordKind.ORPHAN_CALL, RecordKind.ORPHAN_RESULT)


class EventType(StrEnum):
    """`ToolEvent.type`, and `type` of a canonical input event."""

    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


class Match(StrEnum):
    """How a pair was made: by id, or FIFO for a result that carries no id."""

    ID = "id"
    FIFO = "fifo"


class FifoBy(StrEnum):
    """Which open call a FIFO result took: the oldest of its tool name, or the oldest of all."""

    NAME = "name"
    ORDER = "order"


class OrphanReason(StrEnum):
    """Why an event left without a partner (orphan `reason`). Listed in the schema's order."""

    NO_CALL = "no_call"  # a result whose call never came (grace over, or FIFO found no open call)
    DUPLICATE_RESULT = "duplicate_result"  # a second result for an id already paired by id
    # A result with an id whose call was paired by position (FIFO) with an id-less result earlier:
    # the first result carrying that id, so that FIFO pair (same conversation, call.id) is probably
    # wrong. Counts FIFO mis-pairs directly.
    FIFO_CONFLICT = "fifo_conflict"
    LATE_RESULT = "late_result"  # a result for a call already emitted as an orphan
    SUPERSEDED = "superseded"  # a second call with a still-open id replaced this one
    TIMEOUT = "timeout"  # a call unanswered for call_timeout_ms of event time
    EVICTED = "evicted"  # pushed out by a state limit (see EvictionLimit)
    SHUTDOWN = "shutdown"  # held at a shutdown with --flush-on-shutdown
    END_OF_INPUT = "end_of_input"  # a call still open when a file run ended


class DeadLetterReason(StrEnum):
    """Why an input record could not be read (`FormatError.reason`, dead letter `reason`)."""

    TOO_LARGE = "too_large"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    UNKNOWN_SHAPE = "unknown_shape"
    MISSING_CONVERSATION_ID = "missing_conversation_id"
    WRONG_TYPE = "wrong_type"
    MISSING_FIELD = "missing_field"
    MAPPING_ERROR = "mapping_error"  # the --map program rejected the record (core/mapping.py)


class Outcome(StrEnum):
    """What a tool result says (failure-point tagging)."""

    OK = "ok"
    EMPTY = "empty"
    ERROR = "error"


class FailurePoint(StrEnum):
    """Where a tool interaction went wrong (failure-point tagging). Listed in the schema's order."""

    TOOL_SELECTION = "tool_selection"
    ARGUMENT_CONSTRUCTION = "argument_construction"
    EXECUTION = "execution"
    RESULT_INTERPRETATION = "result_interpretation"
    TERMINATION = "termination"


class EvictionLimit(StrEnum):
    """The state limit an `evicted` orphan hit (metric label `limit`)."""

    CONVERSATIONS = "conversations"
    CALLS_PER_CONVERSATION = "calls_per_conversation"
    HELD_BYTES = "held_bytes"


class RawMode(StrEnum):
    """Which sides of the output records carry `raw`, the original block (`--raw`).

    Why: `raw` repeats the payload (`arguments` / `content` are read out of it) plus its envelope,
    so it is about half of a pair's bytes; a warehouse that keeps only the normalized fields pays
    for it twice. Every side keeps its `source` lineage, which points at the input record itself.

    * `all`  (the default): every side of pairs and orphans has `raw`: the records as they always were;
    * `call`: only call sides have it (a pair's `call`, an `orphan_call`'s `event`): the arguments'
      original spelling is kept, while results, the large side, carry their content once;
    * `omit`: no side has it.

    A side without `raw` means "omitted by configuration" and nothing else: under `all` every side
    has the key (the sidecar's size fitting sets it to null and flags `payload_truncated`), so no
    extra marker field is written. Dead letters always keep their `raw` in every mode: it is their
    only copy of the input."""

    ALL = "all"
    CALL = "call"
    OMIT = "omit"

    def keeps(self, is_call: bool) -> bool:
        """Whether a side of this type carries `raw` in this mode."""
        return self is RawMode.ALL or (is_call and self is RawMode.CALL)


DEFAULT_RAW_MODE = RawMode.ALL


# ------------------------------------------------------------------------------------- output records
# The shapes of the three output records (pair.schema.json, orphan.schema.json, dead_letter.schema.json).
# Values are plain strings of the enums above; `Side` is `ToolEvent.to_side()`.

# What the engine and pipeline pass around: one of the three records below, as a plain dict (the
# TypedDicts state the contract; the hot path builds and reads plain dicts).
Record = dict[str, Any]
Side = dict[str, Any]
Source = dict[str, Any]


class _Tagged(TypedDict, total=False):
    """Added by failure-point tagging (absent without a tagger)."""

    outcome: str | None
    failure: str | None
    failure_detail: str | None
    failures: list[str]


class PairRecord(_Tagged):
    kind: str
    pair_id: str
    match: str
    fifo_by: str | None
    conversation_id: str
    tool: str | None
    call: Side
    result: Side
    call_ts: str | None
    result_ts: str | None
    latency_ms: float | None


class OrphanRecord(_Tagged):
    kind: str
    reason: str
    conversation_id: str
    tool: str | None
    ts: str | None
    event: Side
    source: Source


class _DeadLetterRequired(TypedDict):
    kind: str
    reason: str
    detail: str
    raw_bytes: int
    raw_truncated: bool
    source: Source


class DeadLetterRecord(_DeadLetterRequired, total=False):
    raw: str
    raw_base64: str
