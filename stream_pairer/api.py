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

from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import Any

import orjson

from stream_pairer.adapters.filefeed import OutputSink, feed_file
from stream_pairer.adapters.files import FileRecords
from stream_pairer.adapters.naming import input_name
from stream_pairer.core.config import EngineConfig, TaggingConfig
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.core.native import NativePipeline
from stream_pairer.core.pipeline import Summary
from stream_pairer.core.vocab import OrphanReason, Record

__all__ = ["EngineConfig", "FormatConfig", "Pairer", "TaggingConfig"]


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
        for group in (pairs, orphans, dead_letters):
            self.records.extend(group.splitlines())


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
        `conversation_id` the conversation of a record that names none; `arrival_ms` its
        processing time (a stream's arrival clock; file mode has none)."""
        raw = record if isinstance(record, bytes) else _encode(record)
        self._fed += 1
        if source is None:
            source = {"line": self._fed}
        return self.pipeline.feed(raw, dict(source), key=conversation_id, arrival_ms=arrival_ms)

    def feed_many(
        self, records: Iterable[bytes | str | Mapping[str, Any]], *, conversation_id: str | None = None
    ) -> list[bytes]:
        """Records from any iterable (lines of a file, rows of a table); blank lines skipped."""
        out: list[bytes] = []
        for n, rec in enumerate(records, 1):
            if isinstance(rec, (bytes, str)) and not rec.strip():
                continue
            out += self.feed(rec, source={"line": n}, conversation_id=conversation_id)
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
        self.input_bytes += feed_file(self.pipeline, records, own, tick)
        return own.records

    def records_of(self, path: str | PathLike[str], conversation_id: str | None = None) -> FileRecords:
        """The reader `feed_file` uses for one file, with this pairer's size limit and fields, named
        as `pair` names a file given by its path (adapters/naming.py: its pair_ids are `pair`'s)."""
        name = str(path)
        return FileRecords(
            name,
            label=input_name(name, name),
            max_bytes=self.formats.max_record_bytes,
            conversation_id=conversation_id,
            conversation_fields=self.formats.conversation_fields,
        )

    def advance(self, now_ms: float) -> list[bytes]:
        """Processing time is now `now_ms`: held events past their processing deadlines leave as
        orphans (a stream's wall-clock tick; unused in file mode)."""
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
    def decode(outputs: Iterable[bytes]) -> list[Record]:
        """Output records as dicts (the JSON Schemas in stream_pairer/schemas describe them)."""
        return [orjson.loads(o) for o in outputs]


def _encode(record: str | Mapping[str, Any]) -> bytes:
    if isinstance(record, str):
        return record.encode()
    return orjson.dumps(record)
