"""The failure-point table: counts of tagged pairs and orphans, by point and by tool.

The article's promise is that after a week of tagging, one table tells what to fix. This module
builds that table from the pairs/orphans output (the JSONL the `pair` command or the Kafka sidecar
writes), streaming: memory grows with the number of distinct tools, never with the number of
records. Rendering (plain table, Markdown, CSV, JSON) is separate from counting so that every
format shows the same numbers.

What is counted as a call: a pair, an orphan call, and an orphan result whose call was never seen
(`no_call`). A `duplicate_result`, `fifo_conflict` or `late_result` orphan is a second result for a
call already counted (paired by id, paired by position, or orphaned by its timeout), so it is
reported apart and not counted again.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from stream_pairer.adapters.walk import probe
from stream_pairer.analysis.outputs import OutputLines
from stream_pairer.core.vocab import FailurePoint, OrphanReason, Outcome, RecordKind
from stream_pairer.errors import InputError

# Failure points in priority order (tagging.POINTS); read from the vocabulary so that a report needs
# neither the tagger nor jsonschema_rs.
POINTS: Final = tuple(p.value for p in FailurePoint)
OK, EMPTY, ERROR = Outcome.OK.value, Outcome.EMPTY.value, Outcome.ERROR.value
NONE: Final = "none"
ROWS: Final = (*POINTS, NONE)
NO_RESULT: Final = "no_result"
OUTCOMES: Final = (OK, EMPTY, ERROR, NO_RESULT)
SECOND_RESULTS: Final = frozenset(
    {OrphanReason.DUPLICATE_RESULT, OrphanReason.FIFO_CONFLICT, OrphanReason.LATE_RESULT}
)
OTHER_TOOLS: Final = "(other)"
UNKNOWN_TOOL: Final = "(unknown)"
FORMATS: Final = ("table", "markdown", "csv", "json")
_CALL_KINDS: Final = frozenset({RecordKind.PAIR, RecordKind.ORPHAN_CALL, RecordKind.ORPHAN_RESULT})
OUTPUT_KINDS: Final = frozenset({*_CALL_KINDS, RecordKind.DEAD_LETTER})


def parse_time(text: str) -> float:
    """An ISO 8601 / RFC 3339 time as epoch milliseconds; a time without offset is UTC."""
    dt = datetime.fromisoformat(text.strip())
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp() * 1000.0


@dataclass(slots=True)
class _PointRow:
    count: int = 0  # records whose primary `failure` is this point
    any: int = 0  # records where this point is among `failures`
    tools: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _ToolRow:
    calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    points: Counter[str] = field(default_factory=Counter)


class Report:
    """Accumulates records; `data()` is the finished table as plain data.

    `since` / `until` (epoch ms) keep records whose event time is in [since, until): the call's
    time, else (an orphan result) the result's. With a window, records with no time are left out
    and counted as such.
    """

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        *,
        top_tools: int = 3,
        examples: int = 3,
        max_tool_rows: int = 20,
    ) -> None:
        self.since_ms = since_ms
        self.until_ms = until_ms
        self.top_tools = top_tools
        self.examples = examples
        self.max_tool_rows = max_tool_rows
        self.points: dict[str, _PointRow] = {p: _PointRow() for p in ROWS}
        self.tools: dict[str, _ToolRow] = {}
        self.totals: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        # Records of stream-pairer's output kinds, in or out of the window: none at all means the
        # inputs were not an output of `pair` / `run` (e.g. the raw log was given by mistake).
        self.output_records = 0

    def add(self, rec: Any) -> None:
        if not isinstance(rec, dict):
            self.totals["malformed_lines"] += 1
            return
        kind = rec.get("kind")
        if not isinstance(kind, str) or not isinstance(rec.get("reason", ""), str):
            self.totals["malformed_lines"] += 1  # e.g. "kind": ["pair"]: not a record of ours
            return
        if kind in OUTPUT_KINDS:
            self.output_records += 1
        if kind not in _CALL_KINDS:
            self.totals["dead_letters" if kind == RecordKind.DEAD_LETTER else "other_records"] += 1
            return
        if not _well_typed(rec):
            self.totals["malformed_lines"] += 1  # e.g. "tool": 5 or "failures": "x": not ours either
            return
        if kind == RecordKind.ORPHAN_RESULT and rec.get("reason") in SECOND_RESULTS:
            if self._in_window(rec):
                self.totals["second_results"] += 1
            return
        if not self._in_window(rec):
            return
        self.totals["calls"] += 1
        self.totals[kind + "s"] += 1
        if "failure" not in rec:
            self.totals["untagged"] += 1
        tool = _tool(rec)
        outcome = rec.get("outcome")
        outcome = outcome if outcome in (OK, EMPTY, ERROR) else NO_RESULT
        failure = rec.get("failure")
        primary = failure if failure in POINTS else NONE
        failures = rec.get("failures")
        seen = {p for p in failures if p in POINTS} if isinstance(failures, list) else set()
        if primary != NONE:
            seen.add(primary)
        self.outcomes[outcome] += 1
        row = self.points[primary]
        row.count += 1
        row.tools[tool] += 1
        if len(row.examples) < self.examples:
            row.examples.append(_record_id(rec))
        for p in seen:
            self.points[p].any += 1
        if primary == NONE:
            row.any += 1
        trow = self.tools.get(tool)
        if trow is None:
            trow = self.tools[tool] = _ToolRow()
        trow.calls += 1
        trow.outcomes[outcome] += 1
        trow.points[primary] += 1

    def _in_window(self, rec: dict[str, Any]) -> bool:
        if self.since_ms is None and self.until_ms is None:
            return True
        t = _event_ms(rec)
        if t is None:
            self.totals["without_time"] += 1
            return False
        inside = (self.since_ms is None or t >= self.since_ms) and (
            self.until_ms is None or t < self.until_ms
        )
        if not inside:
            self.totals["outside_window"] += 1
        return inside

    def data(self) -> dict[str, Any]:
        calls = self.totals["calls"]
        points = [
            {
                "point": p,
                "count": r.count,
                "share": _share(r.count, calls),
                "any": r.any,
                "top_tools": [{"tool": t, "count": n} for t, n in _top(r.tools, self.top_tools)],
                "examples": list(r.examples),
            }
            for p, r in self.points.items()
        ]
        return {
            "window": {"since": _iso(self.since_ms), "until": _iso(self.until_ms)},
            "totals": {
                "calls": calls,
                "pairs": self.totals["pairs"],
                "orphan_calls": self.totals["orphan_calls"],
                "orphan_results": self.totals["orphan_results"],
                "second_results": self.totals["second_results"],
                "dead_letters": self.totals["dead_letters"],
                "other_records": self.totals["other_records"],
                "malformed_lines": self.totals["malformed_lines"],
                "untagged": self.totals["untagged"],
                "outside_window": self.totals["outside_window"],
                "without_time": self.totals["without_time"],
            },
            "outcomes": {
                o: {"count": self.outcomes[o], "share": _share(self.outcomes[o], calls)} for o in OUTCOMES
            },
            "points": points,
            "tools": self._tool_rows(),
        }

    def _tool_rows(self) -> list[dict[str, Any]]:
        def failed(r: _ToolRow) -> int:
            return r.calls - r.points[NONE]

        order = sorted(self.tools.items(), key=lambda kv: (-failed(kv[1]), -kv[1].calls, kv[0]))
        shown = order[: self.max_tool_rows]
        rest = order[self.max_tool_rows :]
        if rest:
            other = _ToolRow()
            for _, r in rest:
                other.calls += r.calls
                other.outcomes.update(r.outcomes)
                other.points.update(r.points)
            shown.append((f"{OTHER_TOOLS} {len(rest)} tools", other))
        return [
            {
                "tool": name,
                "calls": r.calls,
                **{o: r.outcomes[o] for o in OUTCOMES},
                "failed": failed(r),
                "failed_share": _share(failed(r), r.calls),
                **{p: r.points[p] for p in POINTS},
            }
            for name, r in shown
        ]


# -- reading -------------------------------------------------------------------------------


def input_files(paths: Iterable[str]) -> list[str]:
    """Files to read: each file as given; for a directory, its pairs*, orphans* and dead_letter*
    JSONL files (gzip or not), in that order (dead letters are only counted: they tell how much
    input is missing from the table). Raises InputError for a path that does not exist or a directory that
    holds no output file."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        path = Path(p)
        if path.is_dir():
            found = sorted(
                (f for f in path.iterdir() if f.is_file() and _is_output_name(f.name)),
                key=lambda f: (_ORDER.index(f.name[:5]), f.name),
            )
            if not found:
                raise InputError(f"{p}: no pairs*.jsonl or orphans*.jsonl file in this directory")
            out.extend(str(f) for f in found)
        elif path.exists():
            probe(p)  # a device or /proc file: one line now, not an endless read later
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or directory")
    return out


_ORDER: Final = ("pairs", "orpha", "dead_")


def _is_output_name(name: str) -> bool:
    return name.startswith(("pairs", "orphans", "dead_letter")) and (".jsonl" in name or ".ndjson" in name)


def read_records(
    files: Iterable[str], problems: list[str] | None = None, reader: OutputLines | None = None
) -> Iterator[Any]:
    """Decoded JSON lines; an undecodable line is yielded as None (counted as malformed) and its
    location noted in `problems` (the first few only). `reader` bounds the lines read and skips
    files given twice and duplicate records (its `warnings` say so)."""
    reader = reader or OutputLines()
    for name, lineno, line in reader.lines(files):
        if reader.is_duplicate(line):
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            if problems is not None and len(problems) < 5:
                problems.append(f"{name}:{lineno}: not valid JSON")
            yield None


def build(
    files: Iterable[str],
    report: Report,
    problems: list[str] | None = None,
    reader: OutputLines | None = None,
) -> Report:
    for rec in read_records(files, problems, reader):
        report.add(rec)
    return report


# -- rendering -----------------------------------------------------------------------------


def render(data: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "csv":
        return _csv(data)
    md = fmt == "markdown"
    out: list[str] = []
    out.append(("### " if md else "") + "Failure points")
    out.append("")
    summary = _summary(data)
    out.append("\n".join("- " + line for line in summary.splitlines()) if md else summary)
    out.append("")
    out.append(_grid(_point_header(), _point_cells(data), md))
    out.append("")
    out.append(("### " if md else "") + "By tool")
    out.append("")
    out.append(_grid(_tool_header(), _tool_cells(data), md))
    return "\n".join(out) + "\n"


def _summary(data: dict[str, Any]) -> str:
    t = data["totals"]
    o = data["outcomes"]
    parts = [
        f"{_n(t['calls'], 'call')} ({_n(t['pairs'], 'pair')}, {_n(t['orphan_calls'], 'orphan call')}, "
        f"{_n(t['orphan_results'], 'orphan result')} without a call)",
        "outcomes: "
        + ", ".join(f"{k.replace('_', ' ')} {v['count']} ({_pct(v['share'])})" for k, v in o.items()),
    ]
    w = data["window"]
    if w["since"] or w["until"]:
        parts.append(
            f"window: [{w['since'] or '-inf'}, {w['until'] or '+inf'}); "
            f"{t['outside_window']} outside, {t['without_time']} without a time"
        )
    skipped = [
        f"{t[k]} {label}"
        for k, label in (
            ("second_results", "duplicate/late results (not counted again)"),
            ("dead_letters", "dead letters"),
            ("malformed_lines", "malformed lines"),
            ("other_records", "other records"),
            ("untagged", "records without tags (written without the tagger)"),
        )
        if t[k]
    ]
    if skipped:
        parts.append("also read: " + ", ".join(skipped))
    return "\n".join(parts)


def _point_header() -> list[str]:
    return ["point", "count", "share", "any", "top tools", "examples"]


def _point_cells(data: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["point"],
            str(r["count"]),
            _pct(r["share"]),
            str(r["any"]),
            ", ".join(f"{t['tool']} ({t['count']})" for t in r["top_tools"]),
            ", ".join(r["examples"]),
        ]
        for r in data["points"]
    ]


def _tool_header() -> list[str]:
    return ["tool", "calls", *OUTCOMES, "failed", "failed share", *POINTS]


def _tool_cells(data: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["tool"],
            str(r["calls"]),
            *(str(r[o]) for o in OUTCOMES),
            str(r["failed"]),
            _pct(r["failed_share"]),
            *(str(r[p]) for p in POINTS),
        ]
        for r in data["tools"]
    ]


_NUMERIC: Final = frozenset({"count", "share", "any", "calls", "failed", "failed share", *OUTCOMES, *POINTS})


def _grid(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        esc = [[c.replace("|", "\\|") for c in r] for r in [header, *rows]]
        lines = ["| " + " | ".join(esc[0]) + " |"]
        lines.append("|" + "|".join("---:" if h in _NUMERIC else "---" for h in header) + "|")
        lines.extend("| " + " | ".join(r) + " |" for r in esc[1:])
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        cells = [
            c.rjust(w) if h in _NUMERIC else c.ljust(w) for c, w, h in zip(r, widths, header, strict=True)
        ]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def _csv(data: dict[str, Any]) -> str:
    """One CSV table for both sections (a `section` column), so a spreadsheet import is one step.
    `count` and `share` (of all calls) mean the same in both; point rows fill `any`, `top` (top
    tools) and `examples`; tool rows fill the outcome and per-point columns, `top` (top point)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "section",
            "name",
            "count",
            "share",
            "any",
            *OUTCOMES,
            "failed",
            "failed_share",
            *POINTS,
            "top",
            "examples",
        ]
    )
    calls = data["totals"]["calls"]
    blank = [""] * (len(OUTCOMES) + 2 + len(POINTS))
    for r in data["points"]:
        top = "; ".join(f"{t['tool']}={t['count']}" for t in r["top_tools"])
        w.writerow(
            ["point", r["point"], r["count"], r["share"], r["any"], *blank, top, " ".join(r["examples"])]
        )
    for r in data["tools"]:
        top = min(POINTS, key=lambda p: (-r[p], POINTS.index(p))) if r["failed"] else ""
        w.writerow(
            [
                "tool",
                r["tool"],
                r["calls"],
                _share(r["calls"], calls),
                "",
                *(r[o] for o in OUTCOMES),
                r["failed"],
                r["failed_share"],
                *(r[p] for p in POINTS),
                top,
                "",
            ]
        )
    return buf.getvalue()


# -- helpers -------------------------------------------------------------------------------


def _tool(rec: dict[str, Any]) -> str:
    name = rec.get("tool")
    if not isinstance(name, str):
        side = rec.get("call") or rec.get("event") or rec.get("result")
        name = side.get("name") if isinstance(side, dict) else None
    return name if isinstance(name, str) and name else UNKNOWN_TOOL


def _side_ts(rec: dict[str, Any], key: str) -> Any:
    side = rec.get(key)
    return side.get("ts") if isinstance(side, dict) else None


def _event_ms(rec: dict[str, Any]) -> float | None:
    candidates: tuple[Any, ...]
    if rec.get("kind") == RecordKind.PAIR:
        candidates = (
            rec.get("call_ts"),
            _side_ts(rec, "call"),
            rec.get("result_ts"),
            _side_ts(rec, "result"),
        )
    else:
        candidates = (rec.get("ts"), _side_ts(rec, "event"))
    for c in candidates:
        if isinstance(c, str):
            try:
                return parse_time(c)
            except ValueError:
                continue
    return None


def _record_id(rec: dict[str, Any]) -> str:
    pid = rec.get("pair_id")
    if isinstance(pid, str):
        return pid
    kind = rec.get("kind")
    event = rec.get("event")
    eid = event.get("id") if isinstance(event, dict) else None
    if isinstance(eid, str):
        return f"{kind}:{eid}"
    src = rec.get("source")
    if isinstance(src, dict):
        if "offset" in src:
            return f"{kind}@{src.get('topic')}/{src.get('partition')}/{src.get('offset')}"
        return f"{kind}@{src.get('file')}:{src.get('line')}"
    return str(kind)


def _top(c: Counter[str], n: int) -> list[tuple[str, int]]:
    return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def _share(n: int, total: int) -> float:
    return round(n / total, 4) if total else 0.0


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def _iso(ms: float | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC).isoformat().replace("+00:00", "Z")


# The types the output schemas give the fields a report reads (stream_pairer/schemas/): a pair or
# orphan whose field has another type was not written by stream-pairer, and counting it would
# put a wrong row in the table.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "tool": (str, type(None)),
    "outcome": (str, type(None)),
    "failure": (str, type(None)),
    "failure_detail": (str, type(None)),
    "failures": (list,),
    "call": (dict,),
    "result": (dict,),
    "event": (dict,),
}


def _well_typed(rec: dict[str, Any]) -> bool:
    return all(k not in rec or isinstance(rec[k], types) for k, types in _FIELD_TYPES.items())
