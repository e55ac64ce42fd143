"""The compiled pairing core (`stream_pairer._native`, Rust, built from native/) under a Pipeline API.

Why a second engine: the Python pipeline costs ~20 us of CPU per record, ~7x an orjson round trip
of the same bytes (issue 15). The compiled core reads canonical records straight from their bytes
(only the fields pairing needs; `arguments`/`content` and the record itself are spliced into the
output), pairs them with a port of engine.py, and writes the output records itself.

Contract: for the same input, `NativePipeline.feed` returns exactly the bytes that `Pipeline.feed`
followed by `orjson.dumps` gives (tests/test_native_differential.py); the Python engine stays the
executable specification. A record the fast path does not read (any format but a top-level
canonical event, a value orjson would re-encode differently, a timestamp spelling it does not
parse, anything that becomes a dead letter) goes through the Python format layer
(`parse_record`) and its events into the same compiled state; `fallthrough` counts those records
by reason.

Limits of this version:
* no `info`/`reject` for the file reader's session ids and oversize lines: the `pair` command
  keeps the Python pipeline (wiring it in is the next step);
* failure tagging is not ported: `NativePipeline` is for runs without a tagger;
* the time model is engine.py's (issue 11: a clock per conversation, processing time through
  `advance`, id-less results held for the grace); checkpoint replay (`restore_clock`, replay mode)
  is not ported, as the sidecar does not use this pipeline.

Where the extension is not built (no Rust toolchain at install time), `available()` is False
and callers use the Python `Pipeline`; nothing else changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from stream_pairer.core import engine
from stream_pairer.core.dedup import HistoryDedup
from stream_pairer.core.engine import EngineConfig
from stream_pairer.core.formats import DEFAULT_CONFIG, RESENT_FORMATS, FormatConfig, RecordInfo, parse_record
from stream_pairer.core.model import FormatError, Source, dead_letter
from stream_pairer.core.pipeline import PipelineObserver, Summary
from stream_pairer.errors import NativeUnavailable

__all__ = ["NativePipeline", "NativeUnavailable", "available", "supports"]

try:  # the compiled core is optional: a source install without Rust has only the Python engine
    from stream_pairer import _native  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - exercised by the fallback test through `_native = None`
    _native = None


def available() -> bool:
    """Whether the compiled core was built and imports on this interpreter."""
    return _native is not None


def supports(tagger: Any) -> bool:
    """Whether the compiled core can run with this failure tagger (None: no tagging) and give
    the Python engine's output byte for byte. Callers choose the engine with it."""
    return available() and tagger is None


class NativePipeline:
    """Parse -> pair -> encode in the compiled core. `feed(raw, source, *, key=None,
    arrival_ms=None)` takes what `Pipeline.feed` takes and returns the encoded records (bytes),
    in the order `Pipeline.feed` returns them."""

    def __init__(
        self,
        config: EngineConfig | None = None,
        format_config: FormatConfig = DEFAULT_CONFIG,
        *,
        tagger: Any = None,
        observer: PipelineObserver | None = None,
    ):
        if _native is None:
            raise NativeUnavailable("stream_pairer._native is not built (see README, Compiled core)")
        if not supports(tagger):
            raise NativeUnavailable("the compiled core does not run this failure tagger yet")
        self.tagger = tagger
        self.observer = observer
        cfg = config or EngineConfig()
        self.config = cfg
        self.format_config = format_config
        self.core: Any = _native.Core(
            call_timeout_ms=cfg.call_timeout_ms,
            result_grace_ms=cfg.result_grace_ms,
            conversation_ttl_ms=cfg.conversation_ttl_ms,
            max_conversations=cfg.max_conversations,
            max_calls_per_conversation=cfg.max_calls_per_conversation,
            max_held_bytes=cfg.max_held_bytes,
            max_closed_ids_per_conversation=cfg.max_closed_ids_per_conversation,
            max_closed_ids=cfg.max_closed_ids,
            conversation_fields=list(format_config.conversation_fields),
            max_record_bytes=format_config.max_record_bytes,
            max_id_bytes=format_config.max_id_bytes,
            # engine.held_cost's constants: both engines charge the same bytes, evict at the same event
            held_cost=(engine.HELD_BYTES_PER_INPUT_BYTE, engine.HELD_BYTES_PER_EVENT),
            # --raw: decided by vocab.RawMode here, so the core knows no mode names of its own
            raw_sides=(cfg.raw.keeps(True), cfg.raw.keeps(False)),
        )
        self._raw_sides = (cfg.raw.keeps(True), cfg.raw.keeps(False))
        self.core.set_fallback(self._python_path)
        # The compiled `feed` itself, not a wrapper: on the fast path no Python frame runs at all.
        self.feed: Callable[..., list[bytes]] = self.core.feed
        self.dead_letters: Counter[str] = Counter()
        # What only the Python path counts (the fast path's shapes never skip or repeat a record).
        self._python_summary = Summary()
        self.dedup = HistoryDedup(format_config.max_history_ids, format_config.max_history_conversations)
        self._info = RecordInfo()

    def _python_path(
        self, raw: bytes, source: Source, key: str | None, arrival_ms: float | None, src: bytes
    ) -> list[bytes]:
        """A record the fast path did not read: the Python format layer reads it, and its events
        go into the same compiled state as pre-encoded JSON fragments."""
        info = self._info
        info.clear()
        try:
            events = parse_record(raw, source, key=key, config=self.format_config, info=info)
        except FormatError as err:
            self.dead_letters[err.reason] += 1
            return [orjson.dumps(dead_letter(raw, err.reason, err.detail, source))]
        summary = self._python_summary
        if not events:
            summary.skipped += 1
            if info.skipped_type is not None:
                summary.count_skipped_type(info.skipped_type)
            return []
        out: list[bytes] = []
        dumps = orjson.dumps
        process = self.core.process
        raw_call, raw_result = self._raw_sides
        for ev in events:
            if ev.format in RESENT_FORMATS and not self.dedup.admit(ev):
                summary.duplicate_copies += 1  # re-sent history: counted once, as Pipeline does
                continue
            out.extend(
                process(
                    ev.is_call,
                    ev.conversation_id,
                    ev.id,
                    ev.name,
                    ev.ts_ms,
                    ev.format,
                    ev.block,
                    ev.is_error,
                    ev.size,
                    dumps(ev.payload),
                    dumps(ev.raw) if (raw_call if ev.is_call else raw_result) else b"",
                    src,
                    arrival_ms,
                )
            )
        return out

    def advance(self, now_ms: float) -> list[bytes]:
        out: list[bytes] = self.core.advance(now_ms)
        return out

    def flush(self, reason: str = "shutdown", result_reason: str | None = None) -> list[bytes]:
        out: list[bytes] = self.core.flush(reason, result_reason)
        return out

    @property
    def fallthrough(self) -> dict[str, int]:
        """Records read by the Python format layer, by reason (the fast path's coverage)."""
        return dict(self.core.fallthrough)

    @property
    def summary(self) -> Summary:
        """The same Summary `Pipeline` keeps, assembled from the core's counters."""
        py = self._python_summary
        s = Summary(records=self.core.records, skipped=py.skipped, duplicate_copies=py.duplicate_copies)
        s.skipped_types.update(py.skipped_types)
        s.events.update(self.core.events)
        s.events_by_format.update(self.core.events_by_format)
        s.dead_letters.update(self.dead_letters)
        for label, n in self.core.outputs.items():
            kind, _, rest = label.partition(":")
            if kind == "pair":
                s.pairs[rest] += n
            else:
                s.orphans[(kind, rest)] += n
        return s
