"""`stream-pairer report`: the failure-point table, checked against generated output with known counts.

Records are generated from explicit parameters (a seeded random mix of tools, kinds, outcomes and
failure points); the expected numbers are counted in the generator itself, independently of the
report code, and compared with what the command prints as JSON. Rendering tests parse the other
formats back rather than comparing against a stored string.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_pairer.cli.commands import report as report_cmd
from stream_pairer.core.model import format_ts
from tests.reference.tagging import POINTS

T0 = 1_735_689_600_000.0  # 2025-01-01T00:00:00Z
DAY = 86_400_000.0
TOOLS = ["lookup_order", "search_products", "refund_order", "get_weather", "read_file"]


def run_report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="stream-pairer report")
    report_cmd.add_arguments(parser)
    code = report_cmd.run(parser.parse_args(argv))
    out, err = capsys.readouterr()
    return code, out, err


def side(idx: int, tool: str | None, ts_ms: float, *, result: bool) -> dict[str, Any]:
    s: dict[str, Any] = {
        "id": f"call_{idx}",
        "name": tool,
        "format": "canonical",
        "ts": format_ts(ts_ms),
        "source": {"file": "in.jsonl", "line": idx},
        "block": 0,
        "raw": {},
    }
    if result:
        s.update(content="x", is_error=False)
    else:
        s["arguments"] = {"i": idx}
    return s


def record(
    idx: int,
    kind: str,
    tool: str | None,
    ts_ms: float,
    *,
    outcome: str | None,
    failures: list[str],
    reason: str | None,
) -> dict[str, Any]:
    tags = {
        "outcome": outcome,
        "failure": failures[0] if failures else None,
        "failure_detail": f"detail {idx}" if failures else None,
        "failures": failures,
    }
    if kind == "pair":
        return {
            "kind": "pair",
            "pair_id": f"{idx:024x}",
            "match": "id",
            "fifo_by": None,
            "conversation_id": f"conv{idx % 7}",
            "tool": tool,
            "call": side(idx, tool, ts_ms, result=False),
            "result": side(idx, None, ts_ms + 500, result=True),
            "call_ts": format_ts(ts_ms),
            "result_ts": format_ts(ts_ms + 500),
            "latency_ms": 500.0,
            **tags,
        }
    return {
        "kind": kind,
        "reason": reason,
        "conversation_id": f"conv{idx % 7}",
        "tool": tool,
        "ts": format_ts(ts_ms),
        "event": side(idx, tool, ts_ms, result=kind == "orphan_result"),
        "source": {"file": "in.jsonl", "line": idx},
        **tags,
    }


@dataclass
class Expected:
    """What the report must say, counted while generating."""

    calls: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    primary: Counter[str] = field(default_factory=Counter)
    any: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[str] = field(default_factory=Counter)
    tool_points: Counter[tuple[str, str]] = field(default_factory=Counter)
    second_results: int = 0
    outside: int = 0
    # Example ids in the order the report reads them: pairs.jsonl first, then orphans.jsonl.
    pair_examples: dict[str, list[str]] = field(default_factory=dict)
    orphan_examples: dict[str, list[str]] = field(default_factory=dict)

    def examples(self, point: str) -> list[str]:
        return (self.pair_examples.get(point, []) + self.orphan_examples.get(point, []))[:3]


def generate(
    seed: int, n: int, since_ms: float | None = None, until_ms: float | None = None
) -> tuple[list[dict[str, Any]], Expected]:
    rng = random.Random(seed)
    recs: list[dict[str, Any]] = []
    exp = Expected()
    for idx in range(n):
        kind = rng.choices(["pair", "orphan_call", "orphan_result"], weights=[8, 2, 1])[0]
        reason = None
        if kind == "orphan_call":
            reason = rng.choice(["timeout", "shutdown", "evicted", "superseded"])
        elif kind == "orphan_result":
            reason = rng.choice(["no_call", "no_call", "duplicate_result", "fifo_conflict", "late_result"])
        tool = rng.choice([*TOOLS, None]) if kind == "orphan_result" else rng.choice(TOOLS)
        outcome = None if kind == "orphan_call" else rng.choice(["ok", "ok", "ok", "empty", "error"])
        failures = [p for p in POINTS if rng.random() < 0.15]
        ts = T0 + rng.random() * 7 * DAY
        recs.append(record(idx, kind, tool, ts, outcome=outcome, failures=failures, reason=reason))
        inside = (since_ms is None or ts >= since_ms) and (until_ms is None or ts < until_ms)
        if not inside:
            exp.outside += 1
            continue
        if reason in ("duplicate_result", "fifo_conflict", "late_result"):
            exp.second_results += 1
            continue
        exp.calls += 1
        exp.kinds[kind] += 1
        primary = failures[0] if failures else "none"
        exp.primary[primary] += 1
        for p in failures or ["none"]:
            exp.any[p] += 1
        exp.outcomes[outcome or "no_result"] += 1
        name = tool or "(unknown)"
        exp.tool_calls[name] += 1
        exp.tool_points[(name, primary)] += 1
        ex = (exp.pair_examples if kind == "pair" else exp.orphan_examples).setdefault(primary, [])
        if len(ex) < 3:
            ex.append(f"{idx:024x}" if kind == "pair" else f"{kind}:call_{idx}")
    return recs, exp


def write_jsonl(path: Path, recs: list[dict[str, Any]], *, gz: bool = False) -> None:
    body = b"".join(orjson.dumps(r) + b"\n" for r in recs)
    path.write_bytes(gzip.compress(body) if gz else body)


def write_output_dir(d: Path, recs: list[dict[str, Any]], *, gz_orphans: bool = False) -> None:
    """The `pair` command's layout: pairs.jsonl, orphans.jsonl, dead_letter.jsonl."""
    d.mkdir(parents=True, exist_ok=True)
    write_jsonl(d / "pairs.jsonl", [r for r in recs if r["kind"] == "pair"])
    orphans = [r for r in recs if r["kind"] != "pair"]
    write_jsonl(d / ("orphans.jsonl.gz" if gz_orphans else "orphans.jsonl"), orphans, gz=gz_orphans)
    (d / "dead_letter.jsonl").write_text('{"kind": "dead_letter", "reason": "bad_json"}\n')


def check(data: dict[str, Any], exp: Expected) -> None:
    t = data["totals"]
    assert t["calls"] == exp.calls
    assert (t["pairs"], t["orphan_calls"], t["orphan_results"]) == (
        exp.kinds["pair"],
        exp.kinds["orphan_call"],
        exp.kinds["orphan_result"],
    )
    assert t["second_results"] == exp.second_results
    rows = {r["point"]: r for r in data["points"]}
    assert list(rows) == [*POINTS, "none"]
    for p, r in rows.items():
        assert r["count"] == exp.primary[p], p
        assert r["any"] == exp.any[p], p
        assert r["share"] == round(exp.primary[p] / exp.calls, 4)
        assert r["examples"] == exp.examples(p)
        tops = sorted(
            ((tool, n) for (tool, q), n in exp.tool_points.items() if q == p), key=lambda x: (-x[1], x[0])
        )
        assert [(x["tool"], x["count"]) for x in r["top_tools"]] == tops[:3]
    assert sum(r["count"] for r in rows.values()) == exp.calls
    for o in ("ok", "empty", "error", "no_result"):
        assert data["outcomes"][o]["count"] == exp.outcomes[o]
    tools = {r["tool"]: r for r in data["tools"]}
    assert set(tools) == set(exp.tool_calls)
    for name, r in tools.items():
        assert r["calls"] == exp.tool_calls[name]
        for p in POINTS:
            assert r[p] == exp.tool_points[(name, p)]
        assert r["failed"] == exp.tool_calls[name] - exp.tool_points[(name, "none")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counts_match_generated_data(tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int) -> None:
    recs, exp = generate(seed, 600)
    write_output_dir(tmp_path / "out", recs, gz_orphans=seed == 2)
    code, out, err = run_report([str(tmp_path / "out"), "--format", "json"], capsys)
    assert code == 0, err
    data = orjson.loads(out)
    check(data, exp)
    assert data["totals"]["dead_letters"] == 1


def test_files_instead_of_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs, exp = generate(7, 200)
    a, b = tmp_path / "week1.jsonl.gz", tmp_path / "week1-orphans.jsonl"
    write_jsonl(a, [r for r in recs if r["kind"] == "pair"], gz=True)
    write_jsonl(b, [r for r in recs if r["kind"] != "pair"])
    code, out, _ = run_report([str(a), str(b), "-f", "json"], capsys)
    assert code == 0
    data = orjson.loads(out)
    # Order of files changes examples, not counts: check counts only.
    assert data["totals"]["calls"] == exp.calls
    assert {r["point"]: r["count"] for r in data["points"]} == {p: exp.primary[p] for p in [*POINTS, "none"]}


def test_time_window_is_half_open_on_event_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    since, until = T0 + 2 * DAY, T0 + 5 * DAY
    recs, exp = generate(11, 800, since, until)
    # Boundary records: a call exactly at `since` is in, one exactly at `until` is out; a pair is
    # placed by its call time even when its result comes after `until`.
    recs.append(record(10_001, "pair", "lookup_order", since, outcome="ok", failures=[], reason=None))
    recs.append(record(10_002, "pair", "lookup_order", until, outcome="ok", failures=[], reason=None))
    recs.append(
        record(10_003, "pair", "lookup_order", until - 100, outcome="ok", failures=[], reason=None)
    )  # result at until+400
    write_output_dir(tmp_path, recs)
    code, out, _ = run_report(
        [
            str(tmp_path),
            "-f",
            "json",
            "--since",
            "2025-01-03T00:00:00Z",
            "--until",
            "2025-01-06T00:00:00+00:00",
        ],
        capsys,
    )
    assert code == 0
    data = orjson.loads(out)
    assert data["totals"]["calls"] == exp.calls + 2
    assert data["totals"]["outside_window"] == exp.outside + 1
    none_row = next(r for r in data["points"] if r["point"] == "none")
    assert none_row["count"] == exp.primary["none"] + 2
    assert data["window"] == {"since": "2025-01-03T00:00:00Z", "until": "2025-01-06T00:00:00Z"}


def test_naive_times_are_utc_and_records_without_time_are_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r1 = record(1, "pair", "a", T0, outcome="ok", failures=[], reason=None)
    r2 = record(2, "pair", "a", T0, outcome="ok", failures=[], reason=None)
    for k in ("call_ts", "result_ts"):
        r2[k] = None
    r2["call"]["ts"] = r2["result"]["ts"] = None
    f = tmp_path / "pairs.jsonl"
    write_jsonl(f, [r1, r2])
    _, out, _ = run_report([str(f), "-f", "json", "--since", "2025-01-01"], capsys)
    t = orjson.loads(out)["totals"]
    assert (t["calls"], t["without_time"]) == (1, 1)
    _, out, _ = run_report([str(f), "-f", "json"], capsys)  # no window: both count
    assert orjson.loads(out)["totals"]["calls"] == 2


def test_rendered_formats_show_the_same_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs, exp = generate(5, 300)
    write_output_dir(tmp_path, recs)
    _, text, _ = run_report([str(tmp_path)], capsys)
    _, md, _ = run_report([str(tmp_path), "--format", "markdown"], capsys)
    _, csv_text, _ = run_report([str(tmp_path), "--format", "csv"], capsys)

    # plain table: one line per point, count in the second column
    lines = text.splitlines()
    assert lines[0] == "Failure points"
    for p in [*POINTS, "none"]:
        row = next(line for line in lines if line.startswith(p + " "))
        assert int(row.split()[1]) == exp.primary[p]
    assert f"{exp.calls} calls" in text and "By tool" in text

    # markdown: two pipe tables
    md_rows = [line for line in md.splitlines() if line.startswith("| ")]
    point_rows = {r.split("|")[1].strip(): r for r in md_rows}
    for p in [*POINTS, "none"]:
        assert int(point_rows[p].split("|")[2]) == exp.primary[p]
    assert "### Failure points" in md and "### By tool" in md and "|---" in md

    # csv: one table with a section column
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    points = {r["name"]: r for r in rows if r["section"] == "point"}
    tools = {r["name"]: r for r in rows if r["section"] == "tool"}
    assert {p: int(r["count"]) for p, r in points.items()} == {p: exp.primary[p] for p in [*POINTS, "none"]}
    assert {t: int(r["count"]) for t, r in tools.items()} == dict(exp.tool_calls)
    for t, r in tools.items():
        assert int(r["failed"]) == exp.tool_calls[t] - exp.tool_points[(t, "none")]


def test_tool_rows_fold_into_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs, exp = generate(9, 400)
    write_output_dir(tmp_path, recs)
    _, out, _ = run_report([str(tmp_path), "-f", "json", "--max-tool-rows", "2"], capsys)
    tools = orjson.loads(out)["tools"]
    assert len(tools) == 3
    assert tools[-1]["tool"] == f"(other) {len(exp.tool_calls) - 2} tools"
    assert sum(r["calls"] for r in tools) == exp.calls
    # Shown rows are the ones with the most failed calls.
    failed = {t: exp.tool_calls[t] - exp.tool_points[(t, "none")] for t in exp.tool_calls}
    assert [r["failed"] for r in tools[:2]] == sorted(failed.values(), reverse=True)[:2]


def test_malformed_lines_and_other_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "pairs.jsonl"
    good = record(1, "pair", "a", T0, outcome="empty", failures=["result_interpretation"], reason=None)
    f.write_bytes(orjson.dumps(good) + b"\n{broken\n[1, 2]\n" + b'{"kind": "something_else"}\n')
    code, out, err = run_report([str(f), "-f", "json"], capsys)
    assert code == 0
    t = orjson.loads(out)["totals"]
    assert (t["calls"], t["malformed_lines"], t["other_records"]) == (1, 2, 1)
    assert f"{f}:2: not valid JSON" in err


def test_untagged_records_are_counted_as_none_and_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = record(1, "pair", "a", T0, outcome="ok", failures=[], reason=None)
    for k in ("outcome", "failure", "failure_detail", "failures"):
        del r[k]
    f = tmp_path / "pairs.jsonl"
    write_jsonl(f, [r])
    _, out, _ = run_report([str(f), "-f", "json"], capsys)
    data = orjson.loads(out)
    assert data["totals"]["untagged"] == 1
    assert data["outcomes"]["no_result"]["count"] == 1
    _, text, _ = run_report([str(f)], capsys)
    assert "1 records without tags" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{tmp}/missing"], "no such file or directory"),
        (["{tmp}"], "no pairs*.jsonl or orphans*.jsonl file"),
        (["{tmp}", "--since", "2025-01-02", "--until", "2025-01-01"], "--until must be later than --since"),
    ],
)
def test_unusable_arguments_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_report([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_bad_time_is_an_argument_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    report_cmd.add_arguments(parser)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["x", "--since", "last tuesday"])
    assert info.value.code == 2
    assert "not an ISO 8601 time" in capsys.readouterr().err


def test_command_module_contract() -> None:
    assert report_cmd.NAME == "report"
    assert isinstance(report_cmd.HELP, str) and report_cmd.HELP


# ---------------------------------------------------------------------------------------------
# end to end: `stream-pairer pair --tool-schemas` writes tagged output, `report` counts it


def test_pair_then_report_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stream_pairer.cli.app import main  # noqa: PLC0415 - the lead's CLI, discovered subcommands

    def canon(conv: str, typ: str, cid: str, ts: str, **kw: Any) -> dict[str, Any]:
        return {"conversation_id": conv, "type": typ, "id": cid, "ts": ts, **kw}

    lines = [
        # one of each point, and one clean call, in four formats
        canon(
            "k1",
            "tool_call",
            "c1",
            "2026-11-30T10:00:00Z",
            name="lookup_order",
            arguments={"order_id": "ORD-00000001"},
        ),
        canon("k1", "tool_result", "c1", "2026-11-30T10:00:01Z", content={"status": "ok", "data": {"n": 1}}),
        canon(
            "k1",
            "tool_call",
            "c2",
            "2026-11-30T10:00:02Z",
            name="lookup_order",
            arguments={"order_id": "Kim"},
        ),
        canon("k1", "tool_result", "c2", "2026-11-30T10:00:03Z", content="checked"),
        canon(
            "k1",
            "tool_call",
            "c3",
            "2026-11-30T10:00:04Z",
            name="lookup_order",
            arguments={"order_id": "ORD-00000001"},
        ),
        canon("k1", "tool_result", "c3", "2026-11-30T10:00:05Z", content={"status": "ok", "data": {"n": 1}}),
        canon("k1", "tool_call", "c4", "2026-11-30T10:00:06Z", name="teleport", arguments={}),
        canon("k1", "tool_result", "c4", "2026-11-30T10:00:07Z", content="done"),
        {
            "conversation_id": "oa",
            "ts": 1764496800,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Seoul"}'},
                    }
                ],
            },
        },
        {
            "conversation_id": "oa",
            "ts": 1764496801,
            "message": {"role": "tool", "tool_call_id": "call_1", "content": "[]"},
        },
        {
            "conversation_id": "br",
            "ts": "2026-11-30T10:00:10Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": "tu_1", "name": "check_stock", "input": {"sku": "A-100"}}}
                ],
            },
        },
        {
            "conversation_id": "br",
            "ts": "2026-11-30T10:00:11Z",
            "message": {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "tu_1",
                            "content": [{"text": "HTTP 503"}],
                            "status": "error",
                        }
                    }
                ],
            },
        },
    ]
    src = tmp_path / "in.jsonl"
    write_jsonl(src, lines)
    schemas = Path(__file__).parents[1] / "samples" / "tool_schemas" / "mixed_example.json"
    assert main(["pair", str(src), "--out", str(tmp_path / "out"), "-q", "--tool-schemas", str(schemas)]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out"), "--format", "json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["totals"]["calls"] == 6
    counts = {r["point"]: r["count"] for r in data["points"]}
    assert counts == {p: 1 for p in [*POINTS, "none"]}
    tops = {r["point"]: r["top_tools"][0]["tool"] for r in data["points"]}
    assert tops == {
        "tool_selection": "teleport",
        "argument_construction": "lookup_order",
        "execution": "check_stock",
        "result_interpretation": "get_weather",
        "termination": "lookup_order",
        "none": "lookup_order",
    }
