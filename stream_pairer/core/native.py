"""The compiled pairing core (`stream_pairer._native`, Rust, built from native/) under a Pipeline API.

Why compiled: a Python pipeline cost ~20 us of CPU per record, ~7x an orjson round trip of the
same bytes (issue 15). The core reads canonical records straight from their bytes (only the
fields pairing needs; `arguments`/`content` and the record itself are spliced into the output),
pairs them, tags them, counts them and writes the output records itself. It is the one
implementation of the rules (issue 23); tests/reference holds a Python model of them that the
differential tests use as the oracle.

The fast path reads canonical events, Anthropic / Claude Code, OpenAI Chat / legacy / Responses
items, Bedrock Converse, Gemini and MCP records (README, "Compiled core"). A record it does not
read (another format, a record without tool events, a value orjson would re-encode differently, a
timestamp spelling it does not parse, anything that becomes a dead letter) goes through the
Python format layer (`parse_record`) and its events into the same compiled state;
`fallthrough` counts those records by reason. Which language reads which shape: canonical
events, MCP messages, Bedrock blocks, Gemini contents / responses, Anthropic (and Claude Code)
tool blocks, OpenAI Chat, legacy and Responses messages and items, every shape the fast path
reads, have one reader, in Rust (the Python layer hands it the objects it meets:
formats/compiled.py, dead letters worded there); every other format is read by Python alone.

It satisfies what the adapters need: `info` and `reject` for the file reader, the
PipelineObserver, the replay mode of a checkpointed rebuild, and `StreamPipeline`
(core/pipeline.py) for a Kafka partition. Built with `routed=True` (the sidecar), every output
comes as `(bytes, kind, conversation id, OutputMeta)` so the partition routes and the metrics
count it without decoding it; otherwise as its bytes.

Failure tagging runs in the core (native/src/tagging.rs, verdict.rs, pytag.rs) with a
`TaggingConfig`; two rare steps call back into plain functions of core/toolcheck.py, whose wording
is a library's own: arguments given as a JSON string that is not an object, and the
`--tool-schemas` check. The time model: a clock per conversation, processing time through
`advance`, id-less results held for the grace (README, Time).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple, cast

import orjson

from stream_pairer.core import toolcheck
from stream_pairer.core.config import EngineConfig, TaggingConfig
from stream_pairer.core.dedup import HistoryDedup
from stream_pairer.core.formats import DEFAULT_CONFIG, RESENT_FORMATS, FormatConfig, RecordInfo, parse_record
from stream_pairer.core.model import (
    FormatError,
    OutputMeta,
    Source,
    ToolEvent,
    dead_letter,
    output_meta,
)
from stream_pairer.core.pipeline import (
    HeldChanges,
    PipelineObserver,
    RoutedOutput,
    StateGauges,
    Summary,
    count_skipped,
    observe_read,
    start_requests,
)
from stream_pairer.core.vocab import (
    HELD_BYTES_PER_EVENT,
    HELD_BYTES_PER_INPUT_BYTE,
    DeadLetterReason,
    OrphanReason,
    Record,
    RecordKind,
)
from stream_pairer.errors import NativeUnavailable

__all__ = ["NativePipeline", "NativeUnavailable"]

try:  # the compiled core is required: it is the one implementation of pairing and tagging
    import stream_pairer._native as _native  # noqa: PLR0402 - a submodule (typed by _native.pyi)
except ImportError as err:  # pragma: no cover - exercised by a subprocess test with the module hidden
    raise NativeUnavailable(
        "stream_pairer._native, the compiled core, is not built in this install. Install a wheel "
        "(pip install stream-pairer), or install a Rust toolchain (https://rustup.rs) and run "
        "`pip install .` again; in a source checkout, `bash scripts/dev_native.sh` builds it in place"
    ) from err


class BlockOut(NamedTuple):
    """What `NativePipeline.feed_block` gives for one block of lines."""

    pairs: bytes  # to append to pairs.jsonl (records, each followed by a newline)
    orphans: bytes  # to orphans.jsonl
    dead_letters: bytes  # to dead_letter.jsonl
    sizes: tuple[int, int, int, int]  # record bytes: pair, orphan_call, orphan_result, dead_letter
    consumed: int  # bytes of the block read
    lineno: int  # number of the last line read
    input_bytes: int  # bytes of the records fed (lines without their line breaks)
    fed: int  # records fed
    status: int  # BLOCK_DONE, BLOCK_OVERSIZE (stopped before a line over the limit) or BLOCK_SESSION


BLOCK_DONE: Final = 0
BLOCK_OVERSIZE: Final = 1  # stopped before a line over the record size limit: the reader's Oversize
BLOCK_SESSION: Final = 2  # stopped after a record that announced a session id (Codex session_meta)


class NativePipeline:
    """Parse -> pair -> encode in the compiled core. `feed(raw, source, *, key=None,
    arrival_ms=None)` reads one raw record and returns its encoded output records (bytes, or
    routed tuples), in the order the reference model (tests/reference/pipeline.py) gives them."""

    def __init__(
        self,
        config: EngineConfig | None = None,
        format_config: FormatConfig = DEFAULT_CONFIG,
        *,
        tagger: TaggingConfig | None = None,
        observer: PipelineObserver | None = None,
        routed: bool = False,
    ):
        self.tagger = tagger
        self.observer = observer
        cfg = config or EngineConfig()
        self.config = cfg
        self.format_config = format_config
        self.core = _native.Core(
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
            # config.held_cost's constants: the reference model charges the same bytes
            held_cost=(HELD_BYTES_PER_INPUT_BYTE, HELD_BYTES_PER_EVENT),
            # --raw: decided by vocab.RawMode here, so the core knows no mode names of its own
            raw_sides=(cfg.raw.keeps(True), cfg.raw.keeps(False)),
        )
        self._raw_sides = (cfg.raw.keeps(True), cfg.raw.keeps(False))
        self._tagged = tagger is not None
        self.core.set_fallback(self._python_path)
        self.routed = routed
        if routed:
            self.core.set_routing(OutputMeta)
        if observer is not None:
            self.core.set_observer(observer)
        if tagger is not None:
            self._set_tagging(tagger)
        # The compiled `feed` itself, not a wrapper: on the fast path no Python frame runs at all.
        # Its outputs: bytes, or (bytes, kind, conversation id, OutputMeta) when routed.
        self.feed: Callable[..., list[Any]] = self.core.feed
        # --map reads every record in Python: no fast-path reader may claim one, so no record goes
        # through the compiled `feed`, nor through `feed_block` (file mode then feeds records).
        self.reads_blocks = format_config.mapping is None
        if not self.reads_blocks:
            self.feed = self._mapped_feed
        self.dead_letters: Counter[str] = Counter()
        # What only the Python path counts (the fast path's shapes never skip or repeat a record).
        self._python_summary = Summary()
        self._extra_records = 0  # rejected by the reader, dead-lettered by the adapter
        self.dedup = HistoryDedup(format_config.max_history_ids, format_config.max_history_conversations)
        # What the last record said besides its events (read by the file reader). Only the Python path
        # fills it: a record the fast path reads has events, and no marker comes with events (a
        # request start, an unknown type, a session id are records without any), so the core only
        # clears it, and only after the Python path left something in it (`info_dirty`).
        self.info = RecordInfo()
        self.core.set_info(self.info)

    def _set_tagging(self, tagger: TaggingConfig) -> None:
        """The tagger's settings into the core, with the two plain functions it calls back."""
        schemas = tagger.schemas
        self.core.set_tagging(
            max_calls=tagger.max_calls,
            max_ms=tagger.max_ms,
            max_hashes=tagger.max_hashes,
            max_total=tagger.max_total,
            decode_arguments=toolcheck.decode_arguments_encoded,
            schema_check=toolcheck.schema_check(schemas) if schemas is not None else None,
        )

    def _out(self, rec: Record) -> Any:
        """A record made in Python (a dead letter), in the shape the core returns."""
        data = orjson.dumps(rec)
        if self.routed:
            return (data, rec["kind"], rec.get("conversation_id"), output_meta(rec))
        return data

    def reject(
        self,
        head: bytes,
        size: int,
        source: Source,
        reason: str = DeadLetterReason.TOO_LARGE.value,
        detail: str | None = None,
    ) -> list[Any]:
        """A record the reader refused without reading it whole."""
        self._extra_records += 1
        self.dead_letters[reason] += 1
        if detail is None:
            detail = (
                f"the record is {size} bytes, more than the {self.format_config.max_record_bytes} "
                "byte limit (not read into memory; raw holds its first bytes)"
            )
        rec = dead_letter(head, reason, detail, source)
        if size > len(head):
            rec["raw_bytes"] = size
            rec["raw_truncated"] = True
        return [self._out(rec)]

    def _mapped_feed(self, raw: bytes, source: Source, **kw: Any) -> list[Any]:
        """`feed` under `--map` (same keywords): every record to the Python format layer, which
        applies the mapping; its events go into the compiled state as any fallback record's."""
        replay_blocks = kw.get("replay_blocks")
        if replay_blocks is None:
            self._extra_records += 1
        key, arrival_ms, clocks = kw.get("key"), kw.get("arrival_ms"), kw.get("replay_clocks")
        return self._python_path(raw, source, key, arrival_ms, orjson.dumps(source), replay_blocks, clocks)

    def _python_path(  # noqa: PLR0917 - called positionally by the compiled core
        self,
        raw: bytes,
        source: Source,
        key: str | None,
        arrival_ms: float | None,
        src: bytes,
        replay_blocks: frozenset[int] | None = None,
        replay_clocks: Mapping[int, float] | None = None,
    ) -> list[Any]:
        """A record the fast path did not read: the Python format layer reads it, and its events
        go into the same compiled state as pre-encoded JSON fragments. Counts and observer calls
        follow the reference model's pipeline step by step (the differential tests compare them)."""
        info = self.info
        info.clear()
        try:
            events = parse_record(raw, source, key=key, config=self.format_config, info=info)
        except FormatError as err:
            self.dead_letters[err.reason] += 1
            return [self._out(dead_letter(raw, err.reason, err.detail, source))]
        finally:
            if info.requests or info.skipped_type is not None or info.session_id is not None:
                self.core.info_dirty = True
        if replay_blocks is not None:
            return self._replay(events, replay_blocks, replay_clocks, arrival_ms, src)
        summary = self._python_summary
        observer = self.observer
        requests = info.requests
        mark_request = self.core.mark_request
        if not events:
            count_skipped(summary, observer, info, mark_request)
            return []
        out: list[Any] = []
        copies = 0
        admitted: list[ToolEvent] = []
        for i, ev in enumerate(events):
            if requests:
                start_requests(requests, i, mark_request)
            if ev.format in RESENT_FORMATS and not self.dedup.admit(ev):
                copies += 1  # re-sent history: counted once
                continue
            admitted.append(ev)
            out.extend(self._process(ev, arrival_ms, src, count=True))
        for _, conv, ts in requests:  # a request start after the record's last event (stays in info)
            mark_request(conv, ts)
        if copies:
            summary.duplicate_copies += copies
        if observer is not None:
            self._report_evictions(observer)
            observe_read(observer, admitted, copies, self.core.events_by_format)
        return out

    def _process(self, ev: ToolEvent, arrival_ms: float | None, src: bytes, *, count: bool) -> list[Any]:
        dumps = orjson.dumps
        out: list[Any] = self.core.process(
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
            # --raw: a side that does not keep its raw block gets none (the core ignores it)
            # (with tagging on a call's raw always comes: the tagger reads a custom tool's type)
            dumps(ev.raw) if self._keeps_raw(ev.is_call) else b"",
            src,
            arrival_ms,
            count,
        )
        return out

    def feed_block(  # noqa: PLR0917 - the compiled entry point's own positional order
        self, block: bytes, label: str, lineno: int, key: str, limit: int, watch_session: bool
    ) -> BlockOut:
        """Whole JSONL lines (adapters/files.py `Block`) through the core in one call: the
        encoded outputs per output file and the counts (native/src/batch.rs). Unrouted only."""
        return BlockOut(*_native.feed_block(self.core, block, label, lineno, key, limit, watch_session))

    def feed_messages(
        self, msgs: list[Any], topic: str, partition: int
    ) -> list[tuple[RoutedOutput, bytes | None]]:
        """A partition fetch's messages through the core in one call (routed pipelines only):
        each output with its message's key (native/src/batch.rs `feed_messages`)."""
        out: list[tuple[RoutedOutput, bytes | None]] = _native.feed_messages(
            self.core, msgs, topic, partition
        )
        return out

    def _keeps_raw(self, is_call: bool) -> bool:
        return self._raw_sides[0 if is_call else 1] or (is_call and self._tagged)

    def _replay(
        self,
        events: list[ToolEvent],
        blocks: frozenset[int],
        clocks: Mapping[int, float] | None,
        arrival_ms: float | None,
        src: bytes,
    ) -> list[Any]:
        """The replay of a checkpointed rebuild: only the held blocks again, each after its conversation's
        checkpointed clock; nothing about the input counted twice."""
        out: list[Any] = []
        for ev in events:
            if ev.block in blocks:
                if clocks is not None and ev.block in clocks:
                    self.core.restore_clock(ev.conversation_id, clocks[ev.block])
                out.extend(self._process(ev, arrival_ms, src, count=False))
        if self.observer is not None:
            self._report_evictions(self.observer)
        return out

    def _report_evictions(self, observer: PipelineObserver) -> None:
        for n, limit in self.core.take_evictions():
            observer.observe_eviction(n, limit)

    def advance(self, now_ms: float) -> list[Any]:
        out: list[Any] = self.core.advance(now_ms)
        return out

    def flush(self, reason: str = OrphanReason.SHUTDOWN.value, result_reason: str | None = None) -> list[Any]:
        out: list[Any] = self.core.flush(reason, result_reason)
        return out

    # ------------------------------------------------------------------ StreamPipeline

    @property
    def processing_ms(self) -> float:
        value: float = self.core.processing_ms
        return value

    def count_dead_letter(self, rec: Record) -> list[Any]:
        """A record the adapter dead-lettered without feeding it: counted as read and as the dead
        letter it became, and returned in the shape of every other output."""
        self._extra_records += 1
        self.dead_letters[rec["reason"]] += 1
        return [self._out(rec)]

    def oldest_held_offset(self) -> int | None:
        offset: int | None = self.core.oldest_held_offset()
        return offset

    def held_positions(self) -> list[tuple[int, int]]:
        """(consumed offset, block) of every held event, oldest first (routed pipelines only:
        the core keeps offsets when it routes)."""
        # The core's offsets are None only where nothing routes (file mode): never read there.
        return cast("list[tuple[int, int]]", self.core.held_positions())

    def held_clock_positions(self) -> list[tuple[int, int, float]]:
        return cast("list[tuple[int, int, float]]", self.core.held_clocks())

    def mark_clock_positions(self) -> list[tuple[int, int, float]]:
        """`held_clock_positions`, and the base `held_changes` counts from (a snapshot's)."""
        return cast("list[tuple[int, int, float]]", self.core.mark_clocks())

    def held_changes(self) -> HeldChanges:
        """The core's changes since the last mark: O(changes)."""
        held, released, clocks, unclocked = self.core.held_changes()
        return HeldChanges(
            cast("list[tuple[int, int]]", held),
            cast("list[tuple[int, int]]", released),
            cast("list[tuple[int, int, float]]", clocks),
            cast("list[tuple[int, int]]", unclocked),
        )

    def end_restore(self) -> None:
        self.core.end_restore()

    def discard(self) -> int:
        n: int = self.core.discard()
        return n

    def gauges(self) -> StateGauges:
        c = self.core
        return StateGauges(c.open_calls, c.open_conversations, c.held_bytes, c.pending_results)

    @property
    def fallthrough(self) -> dict[str, int]:
        """Records read by the Python format layer, by reason (the fast path's coverage)."""
        return dict(self.core.fallthrough)

    @property
    def summary(self) -> Summary:
        """The run's Summary, assembled from the core's counters (read it at the end of a run or a
        scrape, not per record: it builds Counters)."""
        py = self._python_summary
        s = Summary(
            records=self.core.records + self._extra_records,
            skipped=py.skipped,
            duplicate_copies=py.duplicate_copies,
        )
        s.skipped_types.update(py.skipped_types)
        s.events.update(self.core.events)
        s.events_by_format.update(self.core.events_by_format)
        s.dead_letters.update(self.dead_letters)
        s.outcomes.update(self.core.outcomes)
        s.failures.update(self.core.failures)
        for label, n in self.core.outputs.items():
            kind, _, rest = label.partition(":")
            if kind == RecordKind.PAIR:
                s.pairs[rest] += n
            else:
                s.orphans[(kind, rest)] += n
        return s

    @property
    def crossings(self) -> Counter[str]:
        """Loop-cap crossings by cap ("calls", "time")."""
        return Counter(self.core.crossings)

    @property
    def remembered_calls(self) -> int:
        """Call hashes the core's tagger remembers for the repeat check (0 without tagging)."""
        n: int = self.core.remembered_calls
        return n
