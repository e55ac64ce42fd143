"""The public Python face: `from stream_pairer import Pairer`.

Why: a data engineer with logs in a notebook or a batch job should not have to shell out to the
CLI or assemble the pipeline's parts. `Pairer` is the face the `pair` command itself uses: built
from a config, it takes records (one, many, or a whole file), advances processing time, flushes,
and reports its counts, all on the compiled core. Outputs are the core's one output type, the
encoded records (JSON bytes, one output record each, exactly the lines `pair` writes);
`Pairer.decode` turns them into dicts when that is wanted.

    from stream_pairer import Pairer
    p = Pairer()
    out = p.feed_file("session.jsonl") + p.flush()
    p.stats.as_dict()["pairs"]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import Any, TypeAlias, cast

import orjson

from stream_pairer.adapters.filefeed import OutputSink, feed_file
from stream_pairer.adapters.files import FileRecords
from stream_pairer.adapters.naming import input_name
from stream_pairer.adapters.sinks import file_records
from stream_pairer.core.config import EngineConfig, TaggingConfig
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.core.native import NativePipeline
from stream_pairer.core.pipeline import Summary
from stream_pairer.core.vocab import (
    DeadLetterReason,
    DeadLetterRecord,
    OrphanReason,
    OrphanRecord,
    PairRecord,
)
from stream_pairer.errors import InputError, PartialInput

__all__ = ["EngineConfig", "FormatConfig", "OutputRecord", "Pairer", "PartialInput", "TaggingConfig"]

# What `Pairer.decode` gives: one of the three output records, told apart by `kind`.
OutputRecord: TypeAlias = PairRecord | OrphanRecord | DeadLetterRecord


class Sink:
    """Where `feed_file` puts outputs: the two calls `adapters.outputs.OutputWriter` answers too
    (the `pair` command passes its writer). This one keeps them in a list, in order per file."""

    def __init__(self) -> None:
        self.records: list[bytes] = []

    def write(self, records: Sequence[bytes]) -> None:
        self.records.extend(records)

    def write_files(
        self, pairs: bytes, orphans: bytes, dead_letters: bytes, sizes: tuple[int, int, int, int]
    ) -> None:
        del sizes
        self.records += file_records(pairs, orphans, dead_letters)


class Pairer:
    """Pairs tool calls with their results: records in, pairs, orphans and dead letters out.

    `config` sets the timers and state limits (`EngineConfig`), `formats` how records are read
    (`FormatConfig`), `tagging` the failure tagger (`TaggingConfig`; None: no tagging). Every
    method returns the output records it produced, encoded (bytes); nothing is ever dropped: at
    the end of an input, `flush()` emits what is still held as orphans.
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        formats: FormatConfig = DEFAULT_CONFIG,
        tagging: TaggingConfig | None = TaggingConfig(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        self.config = config or EngineConfig()
        self.formats = formats
        self.pipeline = NativePipeline(self.config, formats, tagger=tagging)
        self.input_bytes = 0  # record bytes read by feed_file (what `pair` reports as input bytes)
        self._fed = 0  # records fed by feed/feed_many: their default source line

    def feed(
        self,
        record: bytes | str | Mapping[str, Any],
        *,
        source: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
        arrival_ms: float | None = None,
    ) -> list[bytes]:
        """One raw record (JSON bytes or text, or an already decoded object). `source` is its
        lineage, copied into the outputs (default `{"line": n}`, n counting fed records);
        `conversation_id` the conversation of a record that names none; `arrival_ms` when it
        arrived (a Kafka message's timestamp), the event time of a record that carries none
        (README, Time; processing time moves only through `advance`). An object that is not JSON
        (a `Decimal`, a `set`, a key that is not a string) becomes a dead letter, never an error."""
        if arrival_ms is not None:
            _finite("arrival_ms", arrival_ms)
        self._fed += 1
        src = {"line": self._fed} if source is None else dict(source)
        if isinstance(record, bytes):
            raw = record
        elif isinstance(record, str):
            # A lone surrogate cannot be UTF-8: its bytes go in as they are and the core dead-letters
            # them (invalid_utf8), as `pair` does with such a line.
            raw = record.encode("utf-8", "surrogatepass")
        else:
            try:
                raw = orjson.dumps(record)
            except TypeError as err:  # orjson.JSONEncodeError is a TypeError
                head = repr(record).encode("utf-8", "backslashreplace")
                detail = f"the object is not JSON: {err} (raw holds its repr)"
                return self.pipeline.reject(
                    head[:4096], len(head), src, DeadLetterReason.INVALID_JSON.value, detail
                )
        return self.pipeline.feed(raw, src, key=conversation_id, arrival_ms=arrival_ms)

    def feed_many(
        self, records: Iterable[bytes | str | Mapping[str, Any]], *, conversation_id: str | None = None
    ) -> list[bytes]:
        """Records from any iterable (lines of a file, rows of a table); blank lines skipped, a
        line's own line break (LF or CRLF) not part of the record, as `pair` reads a line. A
        session header (Codex `session_meta`) names the conversation of the records after it
        that carry none, as in a file, unless `conversation_id` is given."""
        out: list[bytes] = []
        info = self.pipeline.info
        key = conversation_id
        for n, item in enumerate(records, 1):
            rec = _without_line_break(item)
            if isinstance(rec, (bytes, str)) and not rec.strip():
                continue
            out += self.feed(rec, source={"line": n}, conversation_id=key)
            if conversation_id is None and info.session_id is not None:
                key = info.session_id
        return out

    def feed_file(
        self,
        path: str | PathLike[str],
        *,
        conversation_id: str | None = None,
        sink: OutputSink | None = None,
        tick: Callable[[int], None] | None = None,
    ) -> list[bytes]:
        """A whole log file, as `stream-pairer pair` reads it (JSONL or a JSON document, gzip
        recognised; `-` is stdin): its outputs, or, with `sink` (an OutputWriter), written there
        and [] returned. `conversation_id` is the conversation of records that carry none (default:
        the file's own, its path). `tick(n)`: n more records read."""
        return self.feed_records(self.records_of(path, conversation_id), sink=sink, tick=tick)

    def feed_records(
        self,
        records: FileRecords,
        *,
        sink: OutputSink | None = None,
        tick: Callable[[int], None] | None = None,
    ) -> list[bytes]:
        """`feed_file` of a reader already built (the `pair` command names each file by its path
        below its argument: adapters/naming.py)."""
        if sink is not None:
            self.input_bytes += feed_file(self.pipeline, records, sink, tick)
            return []
        own = Sink()
        try:
            self.input_bytes += feed_file(self.pipeline, records, own, tick)
        except InputError as err:  # what was produced before the failure is the caller's
            raise PartialInput(str(err), own.records) from err
        return own.records

    def records_of(
        self,
        path: str | PathLike[str],
        conversation_id: str | None = None,
        *,
        label: str | None = None,
        reader: Callable[..., FileRecords] = FileRecords,
    ) -> FileRecords:
        """The reader `feed_file` uses for one file, with this pairer's size limit and fields, named
        `label`, by default as `pair` names a file given by its path (adapters/naming.py: its
        pair_ids are `pair`'s). `reader`: another FileRecords (`--state` spools what it reads)."""
        name = str(path)
        return reader(
            name,
            label=input_name(name, name) if label is None else label,
            max_bytes=self.formats.max_record_bytes,
            conversation_id=conversation_id,
            conversation_fields=self.formats.conversation_fields,
        )

    def advance(self, now_ms: float) -> list[bytes]:
        """Processing time is now `now_ms`: held events past their processing deadlines leave as
        orphans (a stream's wall-clock tick; unused in file mode)."""
        _finite("now_ms", now_ms)
        return self.pipeline.advance(now_ms)

    def flush(
        self,
        reason: str = OrphanReason.END_OF_INPUT.value,
        result_reason: str | None = OrphanReason.NO_CALL.value,
    ) -> list[bytes]:
        """The end of the input: every open call (`reason`) and held result (`result_reason`)
        leaves as an orphan."""
        return self.pipeline.flush(reason, result_reason)

    @property
    def stats(self) -> Summary:
        """Counts so far: records, events by type and format, pairs by match, orphans by kind and
        reason, dead letters by reason, outcomes, failure points (`.as_dict()`, `.accounted()`)."""
        return self.pipeline.summary

    @property
    def crossings(self) -> dict[str, int]:
        """Loop-cap crossings of the tagger, by cap ("calls", "time")."""
        return dict(self.pipeline.crossings)

    @staticmethod
    def decode(outputs: Iterable[bytes]) -> list[OutputRecord]:
        """Output records as dicts, typed by their kind's TypedDict (`PairRecord`, `OrphanRecord`,
        `DeadLetterRecord`; the JSON Schemas in stream_pairer/schemas describe them)."""
        return [cast("OutputRecord", orjson.loads(o)) for o in outputs]


def _without_line_break(rec: bytes | str | Mapping[str, Any]) -> bytes | str | Mapping[str, Any]:
    """A line as `pair` reads it: its LF, then a CR before it, are not part of the record."""
    if isinstance(rec, bytes):
        return rec.removesuffix(b"\n").removesuffix(b"\r")
    if isinstance(rec, str):
        return rec.removesuffix("\n").removesuffix("\r")
    return rec


def _finite(name: str, value: float) -> None:
    """A clock reading must be a number: NaN would expire everything held at once and then stop
    every later timeout (no comparison with it is true)."""
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of milliseconds, not {value!r}")
