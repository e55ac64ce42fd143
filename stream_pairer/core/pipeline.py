"""Raw record in, output records out: format parsing, pairing and accounting in one synchronous step.

Every adapter (files, Kafka, the benchmarks, the audit) goes through this one path, so a record is
read, dead-lettered and counted the same way everywhere. Still pure: no I/O, no clock reads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from stream_pairer.core.engine import Engine, Record
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig, parse_record
from stream_pairer.core.model import FormatError, Source, dead_letter


@dataclass(slots=True)
class Summary:
    """What went in and what came out. `check()` is the conservation invariant in numbers."""

    records: int = 0
    skipped: int = 0  # readable records that carry no tool events
    events: Counter[str] = field(default_factory=Counter)  # by type
    events_by_format: Counter[str] = field(default_factory=Counter)
    pairs: Counter[str] = field(default_factory=Counter)  # by match (+ ":name"/":order" for fifo)
    orphans: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, reason)
    dead_letters: Counter[str] = field(default_factory=Counter)  # by reason
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)

    def count_output(self, rec: Record) -> None:
        kind = rec["kind"]
        if kind == "pair":
            m = rec["match"]
            self.pairs[m if rec["fifo_by"] is None else f"{m}:{rec['fifo_by']}"] += 1
        elif kind == "dead_letter":
            self.dead_letters[rec["reason"]] += 1
            return
        else:
            self.orphans[(kind, rec["reason"])] += 1
        outcome = rec.get("outcome")
        if outcome is not None:
            self.outcomes[outcome] += 1
        failure = rec.get("failure")
        if failure is not None:
            self.failures[failure] += 1

    def accounted(self) -> dict[str, int]:
        """Input events vs output members: each pair holds two events, each orphan one."""
        paired = 2 * sum(self.pairs.values())
        orphaned = sum(self.orphans.values())
        return {"events_in": sum(self.events.values()), "events_out": paired + orphaned}

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "skipped": self.skipped,
            "events": dict(self.events),
            "events_by_format": dict(self.events_by_format),
            "pairs": dict(self.pairs),
            "orphans": {f"{k}:{r}": n for (k, r), n in sorted(self.orphans.items())},
            "dead_letters": dict(self.dead_letters),
            "outcomes": dict(self.outcomes),
            "failures": dict(self.failures),
        }


class Pipeline:
    """Parse -> pair -> count. Returns output records; the caller writes them wherever they go."""

    def __init__(self, engine: Engine, format_config: FormatConfig = DEFAULT_CONFIG) -> None:
        self.engine = engine
        self.format_config = format_config
        self.summary = Summary()

    def feed(
        self, raw: bytes, source: Source, *, key: str | None = None, arrival_ms: float | None = None
    ) -> list[Record]:
        summary = self.summary
        summary.records += 1
        try:
            events = parse_record(raw, source, key=key, config=self.format_config)
        except FormatError as err:
            rec = dead_letter(raw, err.reason, err.detail, source)
            summary.dead_letters[err.reason] += 1
            return [rec]
        if not events:
            summary.skipped += 1
            return []
        out: list[Record] = []
        process = self.engine.process
        for ev in events:
            summary.events[ev.type] += 1
            summary.events_by_format[ev.format] += 1
            out.extend(process(ev, arrival_ms))
        for rec in out:
            summary.count_output(rec)
        return out

    def advance(self, now_ms: float) -> list[Record]:
        return self._counted(self.engine.advance(now_ms))

    def flush(self, reason: str = "shutdown", result_reason: str | None = None) -> list[Record]:
        return self._counted(self.engine.flush(reason, result_reason))

    def _counted(self, out: list[Record]) -> list[Record]:
        for rec in out:
            self.summary.count_output(rec)
        return out
