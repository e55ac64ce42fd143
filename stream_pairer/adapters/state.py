"""`pair --state DIR`: incremental file-mode runs. Day 2's results pair with day 1's calls.

Why: a run ends with `flush` (every open call an `end_of_input` orphan, every held result `no_call`),
so two daily files paired in two runs gave 11,841 `no_call` orphans where one run over both gave
pairs (issue 26). With `--state`, the end of the input is not the end of the stream: what is still
held is carried to the next run instead of being flushed, and is emitted only when its
conversation's clock passes its timeout (the normal event-time rule) or at a run given `--flush`.

What is carried, and how (the sidecar's replay idea, in a file instead of a Kafka log):

* **held events**: the input records still holding a call or a result, kept whole (raw bytes,
  `source`, the fallback conversation key) with the blocks still held. The next run feeds them
  first in the pipeline's replay mode (`replay_blocks`: only those events are processed again,
  nothing of the input is counted twice), in their original order, so they are held again exactly
  as they were, with the same `source` (and so the same `pair_id`s) as if one run had read them.
  Which events are held is read from the outputs a flush *would* give (each orphan names its
  event's `source` and `block`), so this needs nothing of the engine beyond its public entry points.
* **clocks**: each conversation's event-time clock (its newest timestamp), restored with its
  first held event (`replay_clocks`), so timeouts fall where one run would put them.
* **the engine's memory** (the compiled core's `export_memory`, native/src/engine/carry.rs):
  every conversation in LRU order with its clock, the closed-id memory (a result re-sent after
  its call was paired is a `duplicate_result`, as in one run, not a `no_call`), the failure
  tagger's per-request counters and remembered calls (the tool-call and time caps, repeated
  identical calls) with its hash seed, and the failure points each held call was given when it
  arrived (its replay does not tag it again), and the time each held event without a timestamp
  took when it arrived (its replay takes it again, not the clock at the cut). Put back before the
  replay, through the engine's own bounded operations, so the limits of the run apply to it.
* **the history dedup** of wire and OTel logs (`HistoryDedup.export`): a re-sent copy in the
  next run of a call read in this one is still a copy.
* **the options of the chain** (`stateopts.py`): a run whose reading or pairing options differ
  from the earlier runs' is refused (its chain would not equal one run).
* **the names of the inputs already read**: a later run reading an input of the same name is
  refused, since its records would share `source` (and `pair_id`s) with the earlier ones (name
  stdin per run with `--stdin-name`).

With that, N runs over consecutive parts of the input give exactly the records of one run over
all of them (tests/warehouse/test_incremental.py), tagging caps included.

Format (`VERSION`): a gzipped JSON-lines file; line 1 the head, line 2 the engine memory (the
core's own versioned JSON, verbatim, or `null`), line 3 the dedup, then one line per held record.
A version-1 state (held events and clocks only, before the memory was carried) still loads; its
next run is exact for the events it held and behaves like a first run for the rest.

The input records of a run are spooled to a temporary file in DIR while it runs, about the
input's size (so held ones can be written, stdin included); the state (`state.jsonl.gz`) is
replaced only after the outputs were completed, through a temporary file and a rename.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

import orjson

from stream_pairer.adapters.files import Block, FileRecords, Oversize, Source
from stream_pairer.adapters.stateopts import check_options
from stream_pairer.adapters.walk import STATE_FILE
from stream_pairer.core.pipeline import Summary
from stream_pairer.core.vocab import OrphanReason
from stream_pairer.errors import InputError, OutputRefused

VERSION: Final = 2
_READS: Final = (1, 2)  # the versions this release loads (1: held events and clocks only)
_KIND_AT: Final = len(b'{"kind":"')
_TS_FIELDS: Final = ("call_ts", "result_ts", "ts")


Where = tuple[tuple[str, Any], ...]


def _where(source: Mapping[str, Any]) -> Where:
    """A source as a small hashable key (a file source's values are strings and integers). Not
    orjson bytes: each of those keeps a ~4 KB buffer, 200 MB for the bench traffic's 52k records."""
    return tuple(sorted(source.items()))


def _ms(ts: Any) -> float | None:
    from datetime import datetime  # noqa: PLC0415 - only for clocks

    if type(ts) is not str:
        return None
    try:
        return datetime.fromisoformat(ts).timestamp() * 1000.0
    except ValueError:
        return None


def check_apart(out: Path, state: Path) -> None:
    """`--out` and `--state` must be two directories, neither inside the other: the same one was
    refused by its own lock as "being written by stream-pairer pid N" (the run itself), and a state
    inside `--out` would be a stray file there (or replaced by `--overwrite`)."""
    o, s = os.path.realpath(out), os.path.realpath(state)
    if o == s or s.startswith(o + os.sep) or o.startswith(s + os.sep):
        how = "the same directory" if o == s else "one inside the other"
        raise OutputRefused(f"--out {out} and --state {state} are {how}: give them two separate directories")


class RunState:
    """The state of one `--state DIR` run: what it restores, spools and saves."""

    def __init__(
        self, directory: Path, names: Sequence[str], options: Mapping[str, str] | None = None
    ) -> None:
        self.dir = directory
        self.options = dict(options or {})  # stateopts.chain_options: the chain's runs must agree
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, spool = tempfile.mkstemp(prefix=".spool.", suffix=".tmp", dir=directory)
        except OSError as err:
            raise OutputRefused(f"cannot use --state {directory}: {err.strerror or err}") from err
        self._spool_path = Path(spool)
        self._spool: IO[bytes] = os.fdopen(fd, "w+b")
        self._offsets: dict[Where, int] = {}  # where a record's line starts in the spool
        self.clocks: dict[str, float] = {}
        self.names: set[str] = set()
        self.held: list[dict[str, Any]] = []
        self.memory: bytes | None = None  # the compiled core's export_memory, as it wrote it
        self.dedup: dict[str, Any] | None = None
        self.carried_in = 0  # events restored from the previous run
        self.carried_out = 0  # events saved for the next run
        # Orphans the pipeline counted in its flush but that were carried, not written (`uncount`).
        self.uncounted: Counter[tuple[str, str]] = Counter()
        try:
            self._load()
            self.check_names(names)
        except InputError:
            self.close()
            raise

    # ------------------------------------------------------------------ the previous run

    def _load(self) -> None:
        path = self.dir / STATE_FILE
        if not path.exists():
            return
        try:
            with gzip.open(path, "rb") as f:
                lines = f.read().splitlines()
            head = orjson.loads(lines[0])
            version = head.get("version")
            if version not in _READS:
                raise InputError(
                    f"--state {self.dir}: state version {version} is not one this release reads "
                    f"({', '.join(map(str, _READS))}); finish that chain with the release that wrote "
                    "it (--flush), or start a new --state directory"
                )
            self.clocks = dict(head["clocks"])
            self.names = set(head["names"])
            check_options(self.dir, head.get("options", {}), self.options)
            body = lines[1:]
            if version >= 2:
                memory, dedup, body = lines[1], orjson.loads(lines[2]), lines[3:]
                self.memory = None if memory == b"null" else memory
                self.dedup = dedup
            self.held = [orjson.loads(x) for x in body]
        except (OSError, EOFError, IndexError, KeyError, TypeError, orjson.JSONDecodeError) as err:
            raise InputError(f"cannot read --state {path}: {err}") from err

    def check_names(self, names: Sequence[str]) -> None:
        """Refuse inputs named like one an earlier run read (their ids would collide)."""
        again = sorted(set(names) & self.names)
        if again:
            raise OutputRefused(
                f"--state {self.dir}: an earlier run already read an input named {again[0]}; "
                "inputs of incremental runs need new names (for stdin: --stdin-name)"
            )

    def restore(self, pipeline: Any) -> list[Any]:
        """Feed the carried records back in replay mode; returns what that emits (normally nothing)."""
        out: list[Any] = self._restore_memory(pipeline)
        first_of: set[str] = set()
        for entry in self.held:
            raw = base64.b64decode(entry["raw_base64"]) if "raw_base64" in entry else entry["raw"].encode()
            blocks = frozenset(entry["blocks"])
            clocks = {}
            for block, conv in zip(entry["blocks"], entry["conversations"], strict=True):
                if conv not in first_of and conv in self.clocks:
                    first_of.add(conv)
                    clocks[block] = self.clocks[conv]
            self._spool_record(entry["source"], raw, entry.get("key"))
            out += pipeline.feed(
                raw, entry["source"], key=entry.get("key"), replay_blocks=blocks, replay_clocks=clocks or None
            )
            self.carried_in += len(blocks)
        end = getattr(pipeline, "end_restore", None)
        if end is not None:
            end()
        self.held = []
        return out

    def _restore_memory(self, pipeline: Any) -> list[Any]:
        """The engine memory and the dedup, before the held events are replayed."""
        dedup, memory = self.dedup, self.memory
        self.dedup = self.memory = None  # consumed: what this run saves is its own (`carry`)
        if dedup is not None:
            try:
                pipeline.dedup.load(dedup)
            except (KeyError, TypeError, ValueError) as err:
                raise InputError(f"cannot read --state {self.dir / STATE_FILE}: its dedup: {err!r}") from err
        if memory is None:
            return []
        core = getattr(pipeline, "core", None)
        if core is None:  # the reference model of the tests (tests/reference) keeps no such memory
            raise InputError(
                f"--state {self.dir} carries the compiled core's memory: only the core continues it"
            )
        from stream_pairer._native import import_memory  # noqa: PLC0415 - only with the core

        try:
            return import_memory(core, memory)
        except ValueError as err:
            raise InputError(f"cannot read --state {self.dir / STATE_FILE}: {err}") from err

    # ------------------------------------------------------------------ this run

    def _spool_record(self, source: Source, raw: bytes, key: str | None) -> None:
        """One record in the spool: a header line `[key, size]`, then the raw bytes as read (the
        spool costs about the input's size; its source is the offsets' key)."""
        f = self._spool
        self._offsets[_where(source)] = f.tell()
        f.write(orjson.dumps([key, len(raw)]) + b"\n")
        f.write(raw)

    def records(self, name: str, **kwargs: Any) -> FileRecords:
        """A `FileRecords` whose records are also spooled, so the held ones can be saved."""
        return _Spooled(self, name, **kwargs)

    def observe(self, records: Sequence[bytes]) -> None:
        """Learn each conversation's clock from the records written (its newest timestamp)."""
        clocks = self.clocks
        for rec in records:
            d = orjson.loads(rec) if isinstance(rec, bytes) else rec
            conv = d.get("conversation_id")
            if conv is None:
                continue
            for f in _TS_FIELDS:
                ms = _ms(d.get(f))
                if ms is not None and ms > clocks.get(conv, float("-inf")):
                    clocks[conv] = ms

    def carry(self, pipeline: Any) -> None:
        """End of a run without `--flush`: what a flush would emit is kept for the next run, with
        the engine's memory and the dedup (read first: the flush forgets them)."""
        core = getattr(pipeline, "core", None)
        if core is not None:
            from stream_pairer._native import export_memory  # noqa: PLC0415 - only with the core

            self.memory = export_memory(core)
        self.dedup = pipeline.dedup.export()
        would = pipeline.flush(OrphanReason.END_OF_INPUT.value, result_reason=OrphanReason.NO_CALL.value)
        self.observe(would)
        held: dict[Where, dict[str, Any]] = {}
        for rec in would:
            d = orjson.loads(rec) if isinstance(rec, bytes) else rec
            self.uncounted[(d["kind"], d["reason"])] += 1
            ev = d["event"]
            where = _where(ev["source"])
            entry = held.setdefault(where, {"blocks": [], "conversations": []})
            entry["blocks"].append(ev["block"])
            entry["conversations"].append(d["conversation_id"])
        lost = [w for w in held if w not in self._offsets]
        if lost:  # never expected: every fed record is spooled; fail the run rather than drop events
            raise InputError(f"--state: a held event's record was not kept ({dict(lost[0])})")
        f = self._spool
        f.flush()
        for where, entry in sorted(held.items(), key=lambda kv: self._offsets[kv[0]]):
            f.seek(self._offsets[where])
            key, size = orjson.loads(f.readline())
            raw = f.read(size)
            try:
                text: dict[str, Any] = {"raw": raw.decode()}
            except UnicodeDecodeError:
                text = {"raw_base64": base64.b64encode(raw).decode()}
            self.held.append({"source": dict(where), "key": key, **entry, **text})
            self.carried_out += len(entry["blocks"])

    def uncount(self, summary: Summary) -> Summary:
        """The run's summary without the orphans `carry` took from the flush (they were not written)."""
        summary.orphans.subtract(self.uncounted)
        summary.orphans = +summary.orphans
        return summary

    def save(self, names: Sequence[str]) -> None:
        """Replace the state file (after the outputs were completed). Clocks are kept only for
        conversations that still hold events: the others are restored by nothing."""
        held_convs = {c for e in self.held for c in e["conversations"]}
        head = {
            "version": VERSION,
            "held_events": self.carried_out,
            "clocks": {c: t for c, t in sorted(self.clocks.items()) if c in held_convs},
            "names": sorted(self.names | set(names)),
            "options": self.options,
        }
        lines = [orjson.dumps(head), self.memory or b"null", orjson.dumps(self.dedup)]
        body = b"\n".join([*lines, *(orjson.dumps(e) for e in self.held)]) + b"\n"
        final = self.dir / STATE_FILE
        fd, temp = tempfile.mkstemp(prefix=f".{STATE_FILE}.", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o600)  # held records are payloads: private
                f.write(gzip.compress(body, mtime=0))
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, final)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise InputError(f"the outputs are complete, but --state {final} was not written: {err}") from err

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._spool.close()
        with contextlib.suppress(OSError):
            self._spool_path.unlink()


class _Spooled(FileRecords):
    """A reader whose records are also spooled, one by one (its blocks taken apart)."""

    def __init__(self, state: RunState, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._state = state

    def blocks(self) -> Iterator[tuple[Source, bytes | Oversize, str] | Block]:
        spool = self._state._spool_record
        for source, raw, key in self.apart(super().blocks()):
            if not isinstance(raw, Oversize):
                spool(source, raw, key)
            yield source, raw, key
