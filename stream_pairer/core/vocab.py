"""The record vocabulary: every closed set of strings the outputs, metrics and reports share.

Defined once, as data, in `vocab.json` beside this file: the sets and the constants both languages
read. The part of this module between the `generated` markers is written from it by
scripts/gen_vocab.py, and the Rust core generates its `vocab` module from it at build time
(native/build.rs), so no value is copied by hand. Here they are `StrEnum`s: a member *is* its string
(`RecordKind.PAIR == "pair"`, same hash), so members are dict keys, label values and JSON values as
they are, and a reader of this file sees every kind, reason, outcome and limit in one place. The JSON
Schemas in `stream_pairer/schemas/` publish the same sets; tests keep the schemas, this module and the
compiled core equal to the definition.

Hot paths (engine, pipeline, tagging, metrics) bind the members they use to module constants once:
in Python 3.11 reading `Enum.MEMBER` costs an attribute lookup through the enum machinery, a global
costs a dict hit. Output records carry the members' `.value` (plain `str`), so orjson writes them
byte for byte as before and summaries keyed by them stay JSON-serializable.

The output records' shapes are TypedDicts at the end of this module (the contract the schemas state).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, Literal, TypeAlias, TypedDict

# ---- generated from vocab.json by scripts/gen_vocab.py (edit vocab.json, then run it) ----


class RecordKind(StrEnum):
    """`kind` of an output record."""

    PAIR = "pair"
    ORPHAN_CALL = "orphan_call"
    ORPHAN_RESULT = "orphan_result"
    DEAD_LETTER = "dead_letter"


class EventType(StrEnum):
    """`ToolEvent.type`, and `type` of a canonical input event."""

    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


EventTypeName: TypeAlias = Literal["tool_call", "tool_result"]


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

    # a result whose call never came (grace over, or FIFO found no open call)
    NO_CALL = "no_call"
    # a second result for an id already paired by id
    DUPLICATE_RESULT = "duplicate_result"
    # A result with an id whose call was paired by position (FIFO) with an id-less result earlier: the
    # first result carrying that id, so that FIFO pair (same conversation, call.id) is probably wrong.
    # Counts FIFO mis-pairs directly.
    FIFO_CONFLICT = "fifo_conflict"
    # a result for a call already emitted as an orphan
    LATE_RESULT = "late_result"
    # a second call with a still-open id replaced this one
    SUPERSEDED = "superseded"
    # a call unanswered for call_timeout_ms of event time
    TIMEOUT = "timeout"
    # pushed out by a state limit (see EvictionLimit)
    EVICTED = "evicted"
    # held at a shutdown with --flush-on-shutdown
    SHUTDOWN = "shutdown"
    # a call still open when a file run ended
    END_OF_INPUT = "end_of_input"


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
    # the --map program rejected the record (core/mapping.py)
    MAPPING_ERROR = "mapping_error"


class Outcome(StrEnum):
    """What a tool result says (failure-point tagging)."""

    OK = "ok"
    EMPTY = "empty"
    ERROR = "error"


class FailurePoint(StrEnum):
    """Where a tool interaction went wrong (failure-point tagging). Listed in the schema's order, which
    is the priority order of a record's `failure` (its first point)."""

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


class Format(StrEnum):
    """The input format an event was read from (`ToolEvent.format`, a side's `format`)."""

    CANONICAL = "canonical"
    ANTHROPIC = "anthropic"
    CLAUDE_CODE = "claude_code"
    OPENAI_CHAT = "openai_chat"
    OPENAI_LEGACY = "openai_legacy"
    OPENAI_RESPONSES = "openai_responses"
    BEDROCK = "bedrock"
    GEMINI = "gemini"
    MCP = "mcp"
    CODEX = "codex"
    GEMINI_CLI = "gemini_cli"
    WIRE = "wire"
    OTEL = "otel"
    OPENINFERENCE = "openinference"
    OPENHANDS = "openhands"
    LANGCHAIN = "langchain"
    AUTOGEN = "autogen"
    ADK = "adk"
    VERCEL_AI = "vercel_ai"
    COHERE = "cohere"
    ATIF = "atif"
    SMOLAGENTS = "smolagents"
    CREWAI = "crewai"
    # made by a --map jq program (core/mapping.py)
    MAPPED = "mapped"
    # found inside a record no reader claims (formats/discover.py): a labelled guess
    DISCOVERED = "discovered"


class LoopCap(StrEnum):
    """A failure tagger's loop cap (`crossings` keys): calls per request, or its wall time."""

    CALLS = "calls"
    TIME = "time"


# Deepest nesting accepted in a kept block (the `raw` of an event, which holds its payload), the block
# itself being level 1; deeper is a dead letter. orjson reads up to 1024 levels but writes at most 254,
# and every output record wraps the block a few levels deeper (pair -> call side -> raw): a deeper block
# would be accepted and then crash the output writer or the failure tagger. Real logs stay far below this.
MAX_DEPTH: Final = 200
# The record fields read as its timestamp, first present wins.
TS_FIELDS: Final = ("ts", "timestamp", "created_at", "created", "createTime")
# 10000-01-01T00:00:00Z in epoch ms: the first instant an ISO-8601 timestamp cannot render (what format_ts
# can still render is below it).
MAX_TS_MS: Final = 253402300800000.0
# Default of --max-id-bytes (FormatConfig.max_id_bytes). Conversation ids, call ids and tool names outlive
# their events (idle conversations, closed ids, tagging counters) outside the held-bytes estimate: 600
# conversations with 500 KB ids took 330 MB. Past this length a record is dead-lettered (too_large), so id
# memory is bounded by the id limits x this.
DEFAULT_MAX_ID_BYTES: Final = 1024
# The idle-conversation sweep runs when processing time moved at least this much since the last one:
# running it on every event cost ~3 % of the engine loop, and a TTL is minutes, not milliseconds.
IDLE_SWEEP_EVERY_MS: Final = 1000.0
# What one held event costs in memory, as a linear estimate of its input size (this many bytes per input
# byte, plus HELD_BYTES_PER_EVENT): the held-bytes limit is meant to bound memory, and an event's raw size
# is only about a fifth of what holding it costs. Calibration and its figures: BENCHMARKS.md, "Figures
# behind constants in the code"; re-run `python bench/memory_breakdown.py --conversations 20000` after
# changing what a held event keeps alive.
HELD_BYTES_PER_INPUT_BYTE: Final = 2.9
# The fixed part of a held event's memory estimate (see HELD_BYTES_PER_INPUT_BYTE).
HELD_BYTES_PER_EVENT: Final = 1860
# Longest `failure_detail`, in characters (longer ones end in `...`).
MAX_DETAIL: Final = 200
# Request starts remembered for conversations the engine does not hold yet (a prompt comes before the
# first call): the oldest is forgotten past it; its request's time then counts from its first call instead
# of its prompt.
MAX_PENDING_REQUESTS: Final = 10_000
# JSON text results longer than this are not decoded to look for the canonical shape: a payload that large
# is not empty, and decoding it on every result would dominate the tagging cost.
MAX_DECODE_CHARS: Final = 262_144
# Nesting of JSON-in-string / wrapper objects followed before giving up.
MAX_UNWRAP: Final = 4
# How many characters of a result's text the input-rejection heuristic reads.
REJECTION_CHARS: Final = 300
# The JSON-RPC error code of a tool refusing its arguments.
JSONRPC_INVALID_PARAMS: Final = -32_602
# Text-bearing content block types of Anthropic / MCP / OpenAI content lists.
TEXT_BLOCKS: Final = frozenset({"text", "input_text", "output_text"})
# The other content block types of those lists.
OTHER_BLOCKS: Final = frozenset(
    {
        "image",
        "document",
        "audio",
        "resource",
        "resource_link",
        "search_result",
        "input_image",
        "input_file",
        "file",
    }
)
# Bedrock content blocks (a single key naming the type).
BEDROCK_BLOCKS: Final = frozenset({"text", "json", "image", "document", "video"})
# OpenAI custom tools take free-form text, not JSON: their input is never "undecodable JSON".
FREEFORM_CALL_TYPES: Final = frozenset({"custom", "custom_tool_call"})
# An "Error:"-style prefix before a refusal (case-insensitive, Python `re` syntax: the Rust core reads
# `\s` as Python does).
REJECTION_PREFIX: Final = r"^\s*(?:<tool_use_error>\s*)?(?:(?:mcp\s+)?error(?:\s+-?\d+)?\s*[:\-]\s*)?"
# Text the model was shown saying its input was refused, matched at the start of the text after
# REJECTION_PREFIX (case-insensitive). Sources: MCP Python SDK ("Input validation error: ..."), MCP
# TypeScript SDK ("MCP error -32602: Invalid arguments for tool x"), JSON-RPC ("Invalid params"), Claude
# Code ("<tool_use_error>InputValidationError: ..."), the article's repair loop ("입력이 거부되었다: ...").
REJECTION: Final = (
    r"(?:input\s*validation\s*error|invalid\s+(?:arguments?|params|parameters?|input)\b|(?:the\s+)?(?:input|"
    r"arguments?|parameters?)\s+(?:(?:was|were|is|are)\s+)?(?:rejected|invalid|failed\s+(?:schema\s+)?valida"
    r"tion)\b|입력(?:이|값이)?\s*거부|(?:입력|인자|인수|매개변수)(?:이|가|값이)?\s*(?:잘못|유효하지\s*않)|잘못된\s*(?:입력|인자|인수|매개변수))"
)

# ---- end of the generated part ----


ORPHAN_KINDS = (RecordKind.ORPHAN_CALL, RecordKind.ORPHAN_RESULT)


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
