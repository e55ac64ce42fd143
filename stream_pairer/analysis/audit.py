"""The conservation audit: prove from the inputs and the outputs alone that nothing was lost or doubled.

The audit re-reads the input with the same `parse_record` the pairing used, so it knows every event
each input record holds: `(source, block)`. It then reads every output record and counts, for each
input event, how many output records claim it (a pair holds two events, an orphan one, a dead letter
one unreadable record). Conservation holds when every count is exactly 1.

Why it is built this way:

* Memory. Audits run over millions of events, so nothing per event is a Python object. Each input
  stream (a file, or a topic-partition) keeps flat arrays: `starts` (8 bytes per record: where the
  record's events begin in the slot arrays), and per event slot one type byte, one count byte
  (saturating at 255) and a 4-byte fingerprint: 6 bytes per event plus 8 per record, whatever the
  payload.
* The fingerprint is a 32-bit hash of (conversation id, event id) for an event, or of the reason for
  an unreadable record. It lets the audit check what a pair or an orphan says about each member (the
  id, the conversation, the match rule) against what the input says, without keeping the strings.
  A collision can hide a wrong id (1 in 4 billion per check); it can never hide a loss.
* Loss is found by scanning the count arrays with `bytes.find` (C speed), so only the problems, not
  the millions of good events, are turned into Python objects.

The audit is a pure consumer of records: the command (`commands/audit.py`) feeds it from files or
from Kafka topics read with `read_committed`.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from stream_pairer.core.dedup import HistoryDedup
from stream_pairer.core.formats import DEFAULT_CONFIG, RESENT_FORMATS, FormatConfig, RecordInfo, parse_record
from stream_pairer.core.model import CALL, FormatError, Source
from stream_pairer.core.vocab import Match, RecordKind

SLOT_CALL: Final = 1
SLOT_RESULT: Final = 2
SLOT_DEAD: Final = 3
# A repeated copy of an already-read call or result (re-sent history): not an event, so no output
# may claim it. Its count starts at 1, so a claim shows as a double and silence as correct.
SLOT_COPY: Final = 4
SLOT_NAMES: Final = {
    SLOT_CALL: "call",
    SLOT_RESULT: "result",
    SLOT_DEAD: "dead letter",
    SLOT_COPY: "repeated copy",
}

# Problem categories. Loss, unexpected claims, mismatches and malformed outputs are always failures;
# doubles only when exactly-once was promised (at-least-once may replay after a crash).
MISSING: Final = "missing"
DOUBLED: Final = "doubled"
UNEXPECTED: Final = "unexpected"
MISMATCHED: Final = "mismatched"
MALFORMED: Final = "malformed"
BEYOND_END: Final = "beyond_end"  # output for an input offset past the audited end: not judged
CATEGORIES: Final = (MISSING, DOUBLED, UNEXPECTED, MISMATCHED, MALFORMED, BEYOND_END)

# Saturating count: 255 means "255 or more".
_DOUBLED_TABLE: Final = bytes([0, 0] + [1] * 254)
_MASK32: Final = 0xFFFFFFFF


def fingerprint(*parts: Any) -> int:
    """32-bit fingerprint of a few strings/None. Python's string hash is salted per process, which is
    fine: both sides of every comparison are computed in this process."""
    return hash(parts) & _MASK32


StreamKey = tuple[Any, ...]


class Stream:
    """One input stream's events, in compact arrays (see the module docstring).

    Positions are line numbers (files, from 1) or offsets (Kafka, from the partition's beginning
    offset). Records must be added in increasing position order; gaps (blank lines, transaction
    markers) are records with no events.
    """

    __slots__ = ("begin", "counts", "end", "label", "prints", "starts", "types")

    def __init__(self, label: str, begin: int, end: int | None = None) -> None:
        self.label = label
        self.begin = begin
        self.end = end  # Kafka: the end offset captured at start; outputs past it are not judged
        self.starts = array("q", [0])  # starts[i]..starts[i+1]: slots of the record at begin + i
        self.types = bytearray()
        self.counts = bytearray()
        self.prints = array("I")

    def add(self, position: int, slots: Iterable[tuple[int, int]]) -> None:
        i = position - self.begin
        starts = self.starts
        have = len(starts) - 1
        if i < have:
            raise ValueError(f"{self.label}: position {position} added out of order")
        last = starts[-1]
        if i > have:
            starts.extend([last] * (i - have))
        n = 0
        copies: list[int] = []
        for slot_type, fp in slots:
            if slot_type == SLOT_COPY:
                copies.append(len(self.types))
            self.types.append(slot_type)
            self.prints.append(fp)
            n += 1
        self.counts.extend(bytes(n))
        for slot in copies:
            self.counts[slot] = 1
        starts.append(last + n)

    def locate(self, position: int, block: int) -> int:
        """The slot of event `block` of the record at `position`; -1 if there is none, -2 if the
        position is past the audited end of a Kafka partition."""
        if self.end is not None and position >= self.end:
            return -2
        i = position - self.begin
        starts = self.starts
        if i < 0 or i >= len(starts) - 1:
            return -1
        s = starts[i]
        if block < 0 or s + block >= starts[i + 1]:
            return -1
        return s + block

    def position_of(self, slot: int) -> tuple[int, int]:
        """(position, block) of a slot: the inverse of locate, by binary search over `starts`."""
        # Records without events share their start with the next record; bisect_right skips them.
        i = bisect_right(self.starts, slot) - 1
        return self.begin + i, slot - self.starts[i]

    def where(self, position: int, block: int | None = None) -> str:
        sep = ":" if self.end is None else "@"
        tail = "" if block is None else f" block {block}"
        return f"{self.label}{sep}{position}{tail}"

    @property
    def slots(self) -> int:
        return len(self.types)


@dataclass(slots=True)
class Problem:
    category: str
    what: str  # "call", "result", "dead letter", "pair", "orphan_call", ...
    where: str  # the input position it is about (or the output position, for malformed outputs)
    detail: str = ""


@dataclass(slots=True)
class AuditReport:
    """The verdict and its figures. `ok` applies the exactly-once rule chosen at audit time."""

    exactly_once: bool
    inputs: Counter[str] = field(default_factory=Counter)  # records, calls, results, unreadable, ...
    outputs: Counter[str] = field(default_factory=Counter)  # by kind
    reasons: Counter[str] = field(default_factory=Counter)  # "orphan_call:timeout", "dead_letter:..."
    counts: Counter[str] = field(default_factory=Counter)  # by category
    by_slot: Counter[tuple[str, str]] = field(default_factory=Counter)  # (category, slot name)
    samples: list[Problem] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.counts[MISSING]

    @property
    def duplicated(self) -> int:
        return self.counts[DOUBLED]

    @property
    def failures(self) -> int:
        """Problems that fail the audit under its delivery mode."""
        n = sum(self.counts[c] for c in (MISSING, UNEXPECTED, MISMATCHED, MALFORMED))
        return n + (self.counts[DOUBLED] if self.exactly_once else 0)

    @property
    def ok(self) -> bool:
        return self.failures == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "exactly_once": self.exactly_once,
            "inputs": dict(self.inputs),
            "outputs": dict(self.outputs),
            "reasons": dict(self.reasons),
            "problems": {c: self.counts[c] for c in CATEGORIES},
            "problems_by_event": {f"{c}:{s}": n for (c, s), n in sorted(self.by_slot.items())},
            "samples": [
                {"category": p.category, "what": p.what, "where": p.where, "detail": p.detail}
                for p in self.samples
            ],
        }


class Auditor:
    """Feed it every input record (in order per stream), then every output record, then `finish()`."""

    def __init__(
        self,
        format_config: FormatConfig = DEFAULT_CONFIG,
        *,
        exactly_once: bool = False,
        max_samples: int = 1000,
    ) -> None:
        self.format_config = format_config
        self.max_samples = max_samples
        self.report = AuditReport(exactly_once)
        self.streams: dict[StreamKey, Stream] = {}
        self._file_alias: dict[str, Stream | None] = {}
        # name, real path and base name -> input file streams, built once after the inputs were
        # added: built per output file name, it made an audit of 20,000 files quadratic (issue 27).
        self._file_index: tuple[dict[str, Stream], dict[str, Stream], dict[str, list[Stream]]] | None = None
        self._sampled: Counter[str] = Counter()
        # The same parse and the same history dedup as the run (pipeline.py), so a repeated copy
        # is known not to be an event here too.
        self._info = RecordInfo()
        self.dedup = HistoryDedup(format_config.max_history_ids, format_config.max_history_conversations)

    # ------------------------------------------------------------------ inputs

    def add_stream(self, key: StreamKey, label: str, begin: int, end: int | None = None) -> Stream:
        stream = Stream(label, begin, end)
        self.streams[key] = stream
        if key[0] == "file":
            self._file_alias.clear()
            self._file_index = None
        return stream

    def add_input(
        self, stream: Stream, position: int, raw: bytes, source: Source, key: str | None = None
    ) -> None:
        """Parse one input record exactly as the pairing did and register its events."""
        inputs = self.report.inputs
        inputs["records"] += 1
        info = self._info
        info.clear()
        try:
            events = parse_record(raw, source, key=key, config=self.format_config, info=info)
        except FormatError as err:
            inputs["unreadable"] += 1
            stream.add(position, ((SLOT_DEAD, fingerprint(err.reason)),))
            return
        if not events:
            inputs["without_events"] += 1
            stream.add(position, ())
            return
        slots = []
        for ev in events:
            if ev.format in RESENT_FORMATS and not self.dedup.admit(ev):
                inputs["repeated_copies"] += 1
                slots.append((SLOT_COPY, 0))
            elif ev.type == CALL:
                inputs["calls"] += 1
                slots.append((SLOT_CALL, fingerprint(ev.conversation_id, ev.id)))
            else:
                inputs["results"] += 1
                slots.append((SLOT_RESULT, fingerprint(ev.conversation_id, ev.id)))
        stream.add(position, slots)

    def add_rejected(self, stream: Stream, position: int, reason: str) -> None:
        """An input record the reader refused without parsing it (a line past the size limit)."""
        self.report.inputs["records"] += 1
        self.report.inputs["unreadable"] += 1
        stream.add(position, ((SLOT_DEAD, fingerprint(reason)),))

    @property
    def session_id(self) -> str | None:
        """The session id the last input record announced (Codex `session_meta`)."""
        return self._info.session_id

    # ------------------------------------------------------------------ outputs

    def add_output_line(self, line: bytes, where: str) -> None:
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            self._problem(MALFORMED, "output", where, f"not JSON: {err}")
            return
        if type(rec) is not dict:
            self._problem(MALFORMED, "output", where, "not a JSON object")
            return
        self.add_output(rec, where)

    def add_output(self, rec: dict[str, Any], where: str) -> None:
        """Check one output record and count the input events it claims. `where` names the output
        position (file:line or topic[partition]@offset) for problems about the record itself."""
        kind = rec.get("kind")
        self.report.outputs[str(kind)] += 1
        if kind != RecordKind.PAIR:
            self.report.reasons[f"{kind}:{rec.get('reason')}"] += 1
        try:
            if kind == RecordKind.PAIR:
                self._pair(rec, where)
            elif kind == RecordKind.ORPHAN_CALL:
                self._side(rec["event"], SLOT_CALL, rec["conversation_id"], kind, where)
            elif kind == RecordKind.ORPHAN_RESULT:
                self._side(rec["event"], SLOT_RESULT, rec["conversation_id"], kind, where)
            elif kind == RecordKind.DEAD_LETTER:
                self._dead_letter(rec, where)
            else:
                self._problem(MALFORMED, "output", where, f"unknown kind {kind!r}")
        except (KeyError, TypeError, AttributeError) as err:
            self._problem(MALFORMED, str(kind), where, f"missing or ill-typed field: {err!r}")

    def _pair(self, rec: dict[str, Any], where: str) -> None:
        conv = rec["conversation_id"]
        call, result = rec["call"], rec["result"]
        self._side(call, SLOT_CALL, conv, "pair call", where)
        found = self._side(result, SLOT_RESULT, conv, "pair result", where)
        match = rec["match"]
        if match == Match.ID:
            if call["id"] is None or call["id"] != result["id"]:
                self._problem(
                    MISMATCHED,
                    RecordKind.PAIR,
                    _at(found, where),
                    f"id-matched pair with call id {call['id']!r} and result id {result['id']!r}",
                )
        elif match == Match.FIFO:
            if result["id"] is not None:
                self._problem(
                    MISMATCHED,
                    RecordKind.PAIR,
                    _at(found, where),
                    f"FIFO pair for a result that has an id ({result['id']!r}): ids must pair by id",
                )
        else:
            self._problem(MALFORMED, RecordKind.PAIR, where, f"unknown match {match!r}")

    def _side(
        self, side: dict[str, Any], want: int, conv: Any, what: str, where: str
    ) -> tuple[Stream, int] | None:
        """Count one event side and check it against the input event it names."""
        found = self._locate(side["source"], side["block"], what, where)
        if found is None:
            return None
        stream, slot = found
        self._count(stream, slot)
        have = stream.types[slot]
        if have != want:
            self._problem(
                MISMATCHED,
                what,
                _at(found, where),
                f"the output holds it as a {SLOT_NAMES[want]}, the input has a {SLOT_NAMES[have]} there",
            )
        elif stream.prints[slot] != fingerprint(conv, side["id"]):
            self._problem(
                MISMATCHED,
                what,
                _at(found, where),
                f"conversation {conv!r} / id {side['id']!r} differ from the input event ({where})",
            )
        return found

    def _dead_letter(self, rec: dict[str, Any], where: str) -> None:
        found = self._locate(rec["source"], 0, "dead letter", where)
        if found is None:
            return
        stream, slot = found
        self._count(stream, slot)
        pos = stream.where(*stream.position_of(slot)[:1])
        if stream.types[slot] != SLOT_DEAD:
            self._problem(UNEXPECTED, "dead letter", pos, f"the input record is readable ({where})")
        elif stream.prints[slot] != fingerprint(rec["reason"]):
            self._problem(
                MISMATCHED, "dead letter", pos, f"reason {rec['reason']!r} is not the parser's ({where})"
            )

    def _locate(self, source: Source, block: Any, what: str, where: str) -> tuple[Stream, int] | None:
        stream: Stream | None
        if "offset" in source:
            stream = self.streams.get(("kafka", source["topic"], source["partition"]))
            position = source["offset"]
        else:
            stream = self._file_stream(str(source["file"]))
            position = source["line"]
        if stream is None:
            self._problem(UNEXPECTED, what, _source_text(source, block), f"not an audited input ({where})")
            return None
        if type(position) is not int or type(block) is not int:
            self._problem(MALFORMED, what, where, f"source position {position!r} block {block!r}")
            return None
        slot = stream.locate(position, block)
        if slot == -2:
            self._problem(BEYOND_END, what, stream.where(position, block), f"past the audited end ({where})")
            return None
        if slot < 0:
            self._problem(UNEXPECTED, what, stream.where(position, block), f"no such input event ({where})")
            return None
        return stream, slot

    def _file_stream(self, name: str) -> Stream | None:
        """The input file an output's `source.file` names: the exact name first, else the same file
        under another spelling (relative vs absolute path), else a unique base name."""
        hit = self._file_alias.get(name, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        if self._file_index is None:
            files = {k[1]: s for k, s in self.streams.items() if k[0] == "file"}
            reals: dict[str, Stream] = {}
            bases: dict[str, list[Stream]] = {}
            for n, s in files.items():
                reals.setdefault(os.path.realpath(n), s)
                bases.setdefault(os.path.basename(n), []).append(s)
            self._file_index = files, reals, bases
        files, reals, bases = self._file_index
        stream = files.get(name)
        if stream is None:
            stream = reals.get(os.path.realpath(name))
        if stream is None:
            same = bases.get(os.path.basename(name), [])
            stream = same[0] if len(same) == 1 else None
        self._file_alias[name] = stream
        return stream

    @staticmethod
    def _count(stream: Stream, slot: int) -> None:
        c = stream.counts[slot]
        if c < 255:
            stream.counts[slot] = c + 1

    def _problem(self, category: str, what: str, where: str, detail: str = "") -> None:
        self.report.counts[category] += 1
        self.report.by_slot[(category, _column(what))] += 1
        if self._sampled[category] < self.max_samples:
            self._sampled[category] += 1
            self.report.samples.append(Problem(category, what, where, detail))

    # ------------------------------------------------------------------ verdict

    def finish(self) -> AuditReport:
        """Scan every stream for events claimed 0 times (lost) or more than once (doubled)."""
        for stream in self.streams.values():
            counts = bytes(stream.counts)
            i = counts.find(0)
            while i != -1:
                self._slot_problem(stream, i, MISSING, "in no output record")
                i = counts.find(0, i + 1)
            doubled = counts.translate(_DOUBLED_TABLE)
            i = doubled.find(1)
            while i != -1:
                n = counts[i]
                times = f"{n} times" if n < 255 else "255 or more times"
                self._slot_problem(stream, i, DOUBLED, f"claimed {times}")
                i = doubled.find(1, i + 1)
        return self.report

    def _slot_problem(self, stream: Stream, slot: int, category: str, detail: str) -> None:
        position, block = stream.position_of(slot)
        t = stream.types[slot]
        where = stream.where(position) if t == SLOT_DEAD else stream.where(position, block)
        self._problem(category, SLOT_NAMES[t], where, detail)


def _column(what: str) -> str:
    """The table column of a problem: "pair call" and "orphan_call" are calls, and so on."""
    if what.endswith("call"):
        return "call"
    if what.endswith("result"):
        return "result"
    return what


def _at(found: tuple[Stream, int] | None, fallback: str) -> str:
    if found is None:
        return fallback
    stream, slot = found
    return stream.where(*stream.position_of(slot))


def _source_text(source: Source, block: Any) -> str:
    if "offset" in source:
        return f"{source.get('topic')}[{source.get('partition')}]@{source.get('offset')} block {block}"
    return f"{source.get('file')}:{source.get('line')} block {block}"


def render(report: AuditReport, show: int = 20) -> str:
    """The human table: inputs, outputs, problems by category and event kind, then positions."""
    i, o = report.inputs, report.outputs
    lines = [
        f"inputs:  {i['records']:,} records ({i['unreadable']:,} unreadable, "
        f"{i['without_events']:,} without tool events); {i['calls']:,} calls, {i['results']:,} results",
        f"outputs: {o[RecordKind.PAIR]:,} pairs, {o[RecordKind.ORPHAN_CALL]:,} orphan calls, "
        f"{o[RecordKind.ORPHAN_RESULT]:,} orphan results, {o[RecordKind.DEAD_LETTER]:,} dead letters",
        "",
        f"{'problem':<12}{'calls':>10}{'results':>10}{'dead':>10}{'other':>10}{'total':>10}",
    ]
    for cat in CATEGORIES:
        calls = report.by_slot[(cat, "call")]
        results = report.by_slot[(cat, "result")]
        dead = report.by_slot[(cat, "dead letter")]
        total = report.counts[cat]
        other = total - calls - results - dead
        lines.append(f"{cat:<12}{calls:>10,}{results:>10,}{dead:>10,}{other:>10,}{total:>10,}")
    if report.samples and show > 0:
        lines.append("")
        lines += [f"{p.category:<11} {p.what:<13} {p.where}  {p.detail}" for p in report.samples[:show]]
        more = sum(report.counts.values()) - min(show, len(report.samples))
        if more > 0:
            lines.append(f"... ({more:,} more; --show N or --json FILE for the list)")
    lines.append("")
    if report.ok:
        note = ""
        if report.duplicated:
            note = f" ({report.duplicated:,} duplicates: allowed at-least-once; --exactly-once fails them)"
        lines.append(f"audit OK: nothing lost{note}")
    else:
        lines.append(f"audit FAILED: {report.failures:,} problems ({report.lost:,} lost)")
    return "\n".join(lines)
