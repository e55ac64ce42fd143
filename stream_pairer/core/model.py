"""The shapes that cross module boundaries: normalized events, their lineage, output records.

Everything here is plain data so that the pairing core stays pure: adapters build `ToolEvent`s
from whatever they read, the engine only moves them around, and output records are plain dicts
ready for orjson (no custom encoder on the hot path).

Output record contract (JSON Schemas in `stream_pairer/schemas/`):

* pair:        kind="pair", pair_id, match ("id" | "fifo"), fifo_by (null | "name" | "order"),
               conversation_id, tool, call {...side}, result {...side}, call_ts, result_ts,
               latency_ms, outcome, failure, failure_detail
* orphan:      kind="orphan_call" | "orphan_result", reason, conversation_id, tool,
               event {...side}, source, outcome, failure, failure_detail
* dead letter: kind="dead_letter", reason, detail, raw | raw_base64, raw_bytes, source

A *side* is `ToolEvent.to_side()`: id, name, format, ts, source, block, plus `arguments` (call) or
`content` + `is_error` (result), and `raw`, the original block as it was read (on the sides that
`EngineConfig.raw`, a `vocab.RawMode`, keeps it on: by default all of them).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple, TypeAlias

from stream_pairer.core.vocab import EventType as _EventType
from stream_pairer.core.vocab import EventTypeName, RecordKind
from stream_pairer.errors import FormatError

__all__ = ["FormatError"]  # re-exported: the readers raise it from here

CALL: Final = _EventType.TOOL_CALL.value
RESULT: Final = _EventType.TOOL_RESULT.value
EventType: TypeAlias = EventTypeName  # the vocabulary's EventType as a Literal type

# Lineage of one input record. File: {"file": path, "line": n}. Kafka: {"topic", "partition", "offset"}.
# Kept as a dict (not a class) because it is copied verbatim into every output record.
Source = dict[str, Any]


@dataclass(slots=True)
class ToolEvent:
    """One tool call or tool result, normalized from any supported log format.

    `id` is the call id for a call and the referenced call id for a result, already trimmed; it
    is None when the record carries no usable id (only such results may be FIFO-paired).
    `block` is the index of this event inside its input record: one record (an assistant message
    with parallel tool_use blocks) may hold several events, and `(source, block)` identifies an
    event uniquely, which is what the conservation audit counts.
    """

    type: EventType
    conversation_id: str
    id: str | None
    name: str | None
    payload: Any  # arguments (call) or content (result), decoded where the format encodes JSON
    ts_ms: float | None  # event time from the record itself; None when the record has none
    format: str
    source: Source
    block: int = 0
    is_error: bool | None = None
    raw: Any = None  # the original block, for the output's "original payload"
    size: int = 0  # approximate bytes held by this event (for the held-bytes limit)
    # Set by the tagging layer when the call arrives (repeat/loop/schema checks need call order).
    failure: str | None = None
    failure_detail: str | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def is_call(self) -> bool:
        return self.type == CALL

    def to_side(self, with_raw: bool = True) -> dict[str, Any]:
        """The event as an output side; `with_raw` False leaves `raw` out (see vocab.RawMode)."""
        side: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "format": self.format,
            "ts": format_ts(self.ts_ms),
            "source": self.source,
            "block": self.block,
        }
        if self.type == CALL:
            side["arguments"] = self.payload
        else:
            side["content"] = self.payload
            side["is_error"] = self.is_error
        if with_raw:
            side["raw"] = self.raw
        return side


_SECOND_PREFIX: dict[int, str] = {}
_TEXT: dict[float, str] = {}
_TEXT_MAX: Final = 8192


def format_ts(ts_ms: float | None) -> str | None:
    """RFC 3339 UTC with milliseconds: what warehouses parse without a format string.

    Called four times per pair (each side's `ts`, then `call_ts` and `result_ts` with the same two
    values), so the whole string is remembered per timestamp: the last two calls of a pair are
    dict hits. On a miss the "YYYY-MM-DDTHH:MM:SS." prefix is cached per second (events cluster in
    time). Both caches are cleared when they grow, which keeps them bounded."""
    if ts_ms is None:
        return None
    text = _TEXT.get(ts_ms)
    if text is not None:
        return text
    ms = int(ts_ms)
    sec, milli = divmod(ms, 1000)
    prefix = _SECOND_PREFIX.get(sec)
    if prefix is None:
        if len(_SECOND_PREFIX) >= 4096:
            _SECOND_PREFIX.clear()
        try:
            prefix = datetime.fromtimestamp(sec, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        except (OverflowError, OSError, ValueError):
            return None  # outside what datetime can represent: no timestamp rather than a crash
        _SECOND_PREFIX[sec] = prefix
    text = f"{prefix}{milli:03d}Z"
    if len(_TEXT) >= _TEXT_MAX:
        _TEXT.clear()
    _TEXT[ts_ms] = text
    return text


MAX_DEAD_LETTER_RAW_BYTES: Final = 512 * 1024
_DEAD_LETTER: Final = RecordKind.DEAD_LETTER.value


def dead_letter(raw: bytes, reason: str, detail: str, source: Source) -> dict[str, Any]:
    """A dead-letter record. The raw input is kept as text when it is UTF-8, else base64; a raw
    record larger than MAX_DEAD_LETTER_RAW_BYTES is cut (flagged `raw_truncated`) so that the
    dead-letter message itself stays producible; `source` still points at the full original."""
    rec: dict[str, Any] = {
        "kind": _DEAD_LETTER,
        "reason": reason,
        "detail": detail,
        "raw_bytes": len(raw),
        "source": source,
    }
    body = raw[:MAX_DEAD_LETTER_RAW_BYTES]
    rec["raw_truncated"] = len(raw) > MAX_DEAD_LETTER_RAW_BYTES
    try:
        rec["raw"] = body.decode("utf-8")
    except UnicodeDecodeError:
        rec["raw_base64"] = base64.b64encode(body).decode("ascii")
    return rec


class OutputMeta(NamedTuple):
    """What the metrics count of one output record, without the record itself.

    Why: the compiled core hands over output records already encoded (bytes); decoding them again
    only to count them would cost what the core saves. It hands this tuple beside each one, and
    `output_meta` derives the same tuple from a record dict (a dead letter an adapter makes, the
    reference model in tests), so everything is counted by one code path
    (`Metrics.observe_outputs`). `label` is the pair's `match` or the orphan's / dead letter's
    `reason`."""

    kind: str
    label: str | None
    fifo_by: str | None
    tool: str | None
    outcome: str | None
    failure: str | None
    latency_ms: float | None


def output_meta(rec: dict[str, Any]) -> OutputMeta:
    """The OutputMeta of an output record dict (pair, orphan or dead letter)."""
    kind = rec["kind"]
    return OutputMeta(
        kind,
        rec.get("match") if kind == RecordKind.PAIR.value else rec.get("reason"),
        rec.get("fifo_by"),
        rec.get("tool"),
        rec.get("outcome"),
        rec.get("failure"),
        rec.get("latency_ms"),
    )
