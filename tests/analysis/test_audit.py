"""The conservation audit on files: a clean run passes; each kind of damage to the outputs is caught
and reported at the input position it concerns."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_pairer.analysis.audit import (
    DOUBLED,
    MALFORMED,
    MISMATCHED,
    MISSING,
    SLOT_CALL,
    SLOT_DEAD,
    SLOT_RESULT,
    UNEXPECTED,
    Auditor,
    AuditReport,
    Stream,
    render,
)
from stream_pairer.cli.app import main
from stream_pairer.cli.commands.audit import audit_files, expand_topics

# One conversation per format the run must handle, plus the unreadable and the eventless.
INPUT: list[Any] = [
    {
        "conversation_id": "c1",
        "type": "tool_call",
        "id": "k1",
        "name": "search",
        "arguments": {"q": 1},
        "ts": 1_700_000_000,
    },
    {
        "conversation_id": "c1",
        "type": "tool_call",
        "id": "k2",
        "name": "fetch",
        "arguments": {},
        "ts": 1_700_000_001,
    },
    {"conversation_id": "c1", "type": "tool_result", "id": "k2", "content": "page", "ts": 1_700_000_002},
    {"conversation_id": "c1", "type": "tool_result", "id": "k1", "content": "hits", "ts": 1_700_000_003},
    # Claude Code session line with a text block and two parallel tool_use blocks: events 0 and 1.
    {
        "type": "assistant",
        "sessionId": "s1",
        "timestamp": "2025-01-01T00:00:00Z",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "running two tools"},
                {"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {"path": "/a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "ls"}},
            ],
        },
    },
    {
        "type": "user",
        "sessionId": "s1",
        "timestamp": "2025-01-01T00:00:01Z",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "x"},
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "y"},
            ],
        },
    },
    # Legacy OpenAI functions: no ids at all, FIFO by name.
    {"conversation_id": "c2", "role": "assistant", "function_call": {"name": "calc", "arguments": "{}"}},
    {"conversation_id": "c2", "role": "function", "name": "calc", "content": "42"},
    "{not json",
    {"type": "summary", "summary": "no events here"},
    {"conversation_id": "c3", "type": "tool_call", "id": "open", "name": "never_answered"},
    {"conversation_id": "c4", "type": "tool_result", "content": "no call for me"},
]


def write_input(tmp_path: Path, records: list[Any] = INPUT) -> Path:
    path = tmp_path / "in.jsonl"
    lines = [r if isinstance(r, str) else orjson.dumps(r).decode() for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


def pair_and_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)
    write_input(tmp_path)
    assert main(["pair", "in.jsonl", "--out", "out", "--quiet"]) == 0
    return Path("in.jsonl"), Path("out")


def audit(inp: Path | str, out: Path, exactly_once: bool = False) -> AuditReport:
    return audit_files(Auditor(exactly_once=exactly_once), [str(inp)], [out])


def read_out(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def write_out(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def problems(report: AuditReport, category: str) -> list[tuple[str, str]]:
    return [(p.what, p.where) for p in report.samples if p.category == category]


def test_clean_run_audits_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inp, out = pair_and_audit(tmp_path, monkeypatch)
    report = audit(inp, out, exactly_once=True)
    assert report.ok, render(report)
    assert sum(report.counts.values()) == 0
    assert report.inputs["calls"] == 6 and report.inputs["results"] == 6
    assert report.inputs["unreadable"] == 1 and report.inputs["without_events"] == 1
    assert report.outputs["pair"] == 5 and report.outputs["dead_letter"] == 1


def test_the_cli_names_the_missing_position_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = pair_and_audit(tmp_path, monkeypatch)
    pairs = read_out(out / "pairs.jsonl")
    # Drop the pair of toolu_a. Blocks count events, not content blocks: its call is event 0 of
    # line 5 (after a text block), its result event 1 of line 6.
    kept = [p for p in pairs if p["call"]["id"] != "toolu_a"]
    assert len(kept) == len(pairs) - 1
    write_out(out / "pairs.jsonl", kept)
    assert main(["audit", "--input", "in.jsonl", "--outputs", "out"]) == 1
    text = capsys.readouterr().out
    assert "in.jsonl:5 block 0" in text and "in.jsonl:6 block 1" in text
    assert "audit FAILED" in text


def test_removed_orphan_and_dead_letter_are_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inp, out = pair_and_audit(tmp_path, monkeypatch)
    write_out(out / "dead_letter.jsonl", [])
    orphans = read_out(out / "orphans.jsonl")
    write_out(out / "orphans.jsonl", [o for o in orphans if o["kind"] != "orphan_result"])
    report = audit(inp, out)
    assert not report.ok
    assert sorted(problems(report, MISSING)) == [
        ("dead letter", "in.jsonl:9"),
        ("result", "in.jsonl:12 block 0"),
    ]


def test_duplicate_is_reported_and_fails_only_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inp, out = pair_and_audit(tmp_path, monkeypatch)
    pairs = read_out(out / "pairs.jsonl")
    write_out(out / "pairs.jsonl", [*pairs, pairs[0]])
    at_least_once = audit(inp, out)
    assert at_least_once.ok and at_least_once.duplicated == 2  # both members of the pair
    first = pairs[0]["call"]["source"]["line"]
    assert ("call", f"in.jsonl:{first} block 0") in problems(at_least_once, DOUBLED)
    assert "duplicates: allowed at-least-once" in render(at_least_once)
    exactly_once = audit(inp, out, exactly_once=True)
    assert not exactly_once.ok and exactly_once.failures == 2
    assert main(["audit", "-i", "in.jsonl", "-o", "out", "--exactly-once", "-q"]) == 1
    assert main(["audit", "-i", "in.jsonl", "-o", "out", "-q"]) == 0


def test_exactly_once_can_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pair_and_audit(tmp_path, monkeypatch)
    pairs = read_out(tmp_path / "out" / "pairs.jsonl")
    write_out(tmp_path / "out" / "pairs.jsonl", [*pairs, pairs[-1]])
    monkeypatch.setenv("STREAM_PAIRER_EXACTLY_ONCE", "true")
    assert main(["audit", "-i", "in.jsonl", "-o", "out", "-q"]) == 1


def test_pair_ids_must_agree_with_each_other_and_with_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inp, out = pair_and_audit(tmp_path, monkeypatch)
    pairs = read_out(out / "pairs.jsonl")
    by_call = {p["call"]["id"]: p for p in pairs}
    by_call["k1"]["result"]["id"] = "k2"  # ids disagree inside the pair, and with the input
    by_call["k2"]["conversation_id"] = "c-other"  # both members are from another conversation
    write_out(out / "pairs.jsonl", pairs)
    report = audit(inp, out)
    found = problems(report, MISMATCHED)
    assert ("pair", "in.jsonl:4 block 0") in found  # k1's result: the pair's ids disagree
    assert ("pair result", "in.jsonl:4 block 0") in found  # ... and the result's id is not the input's
    assert ("pair call", "in.jsonl:2 block 0") in found and ("pair result", "in.jsonl:3 block 0") in found
    assert report.lost == 0 and not report.ok


def test_fifo_pair_is_only_for_results_without_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inp, out = pair_and_audit(tmp_path, monkeypatch)
    pairs = read_out(out / "pairs.jsonl")
    k1 = next(p for p in pairs if p["call"]["id"] == "k1")
    k1["match"] = "fifo"
    write_out(out / "pairs.jsonl", pairs)
    report = audit(inp, out)
    assert [p for p in report.samples if "FIFO pair for a result that has an id" in p.detail]
    assert not report.ok


def test_swapped_member_types_and_wrong_dead_letters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inp, out = pair_and_audit(tmp_path, monkeypatch)
    pairs = read_out(out / "pairs.jsonl")
    k1 = next(p for p in pairs if p["call"]["id"] == "k1")
    k1["call"], k1["result"] = k1["result"], k1["call"]
    dead = read_out(out / "dead_letter.jsonl")
    dead[0]["reason"] = "too_large"  # the parser says invalid_json
    readable = dict(dead[0], source={"file": "in.jsonl", "line": 1}, reason="invalid_json")
    write_out(out / "pairs.jsonl", pairs)
    write_out(out / "dead_letter.jsonl", [dead[0], readable])
    report = audit(inp, out)
    assert ("pair call", "in.jsonl:4 block 0") in problems(report, MISMATCHED)
    assert ("dead letter", "in.jsonl:9") in problems(report, MISMATCHED)
    assert ("dead letter", "in.jsonl:1") in problems(report, UNEXPECTED)
    assert ("call", "in.jsonl:1 block 0") in problems(report, DOUBLED)  # claimed by both


def test_outputs_that_name_no_input_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inp, out = pair_and_audit(tmp_path, monkeypatch)
    orphans = read_out(out / "orphans.jsonl")
    ghost_block = orjson.loads(orjson.dumps(orphans[0]))
    ghost_block["event"]["block"] = 7
    ghost_line = orjson.loads(orjson.dumps(orphans[0]))
    ghost_line["event"]["source"] = {"file": "in.jsonl", "line": 10}  # the eventless summary line
    ghost_file = orjson.loads(orjson.dumps(orphans[0]))
    ghost_file["event"]["source"] = {"file": "elsewhere.jsonl", "line": 1}
    write_out(out / "orphans.jsonl", [*orphans, ghost_block, ghost_line, ghost_file])
    with (out / "orphans.jsonl").open("ab") as f:
        f.write(b"{truncated\n")
        f.write(b'{"kind": "pair", "call": {}}\n')
    report = audit(inp, out)
    unexpected = problems(report, UNEXPECTED)
    line, kind = orphans[0]["event"]["source"]["line"], orphans[0]["kind"]
    assert (kind, f"in.jsonl:{line} block 7") in unexpected
    assert (kind, "in.jsonl:10 block 0") in unexpected
    assert (kind, "elsewhere.jsonl:1 block 0") in unexpected
    assert report.counts[MALFORMED] == 2 and not report.ok


def test_input_named_differently_from_the_run_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out = pair_and_audit(tmp_path, monkeypatch)
    assert audit(tmp_path / "in.jsonl", out).ok  # absolute path vs the run's relative one
    assert audit("./in.jsonl", out).ok


def test_usage_errors_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pair_and_audit(tmp_path, monkeypatch)
    assert main(["audit", "--input", "in.jsonl"]) == 2
    assert main(["audit", "--input", "in.jsonl", "--outputs", "nowhere"]) == 2
    assert main(["audit", "--input", "missing.jsonl", "--outputs", "out"]) == 2
    assert main(["audit", "--input", "-", "--outputs", "out"]) == 2


def test_json_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pair_and_audit(tmp_path, monkeypatch)
    write_out(tmp_path / "out" / "dead_letter.jsonl", [])
    assert main(["audit", "-i", "in.jsonl", "-o", "out", "--json", "r.json", "-q"]) == 1
    body = orjson.loads((tmp_path / "r.json").read_bytes())
    assert body["ok"] is False and body["problems"]["missing"] == 1
    assert body["samples"][0]["where"] == "in.jsonl:9"


# --------------------------------------------------------------------------- the compact store


def test_stream_positions_round_trip_across_gaps_and_blocks() -> None:
    s = Stream("t[0]", begin=100, end=120)
    s.add(100, [(SLOT_CALL, 1)])
    s.add(103, [])  # offsets 101..103 hold no events (markers, eventless records)
    s.add(105, [(SLOT_CALL, 2), (SLOT_RESULT, 3), (SLOT_CALL, 4)])
    s.add(106, [(SLOT_DEAD, 5)])
    assert [s.position_of(i) for i in range(s.slots)] == [(100, 0), (105, 0), (105, 1), (105, 2), (106, 0)]
    for i in range(s.slots):
        assert s.locate(*s.position_of(i)) == i
    assert s.locate(105, 3) == -1 and s.locate(104, 0) == -1 and s.locate(99, 0) == -1
    assert s.locate(107, 0) == -1 and s.locate(120, 0) == -2
    with pytest.raises(ValueError, match="out of order"):
        s.add(105, [])


def test_counts_saturate_instead_of_wrapping() -> None:
    auditor = Auditor()
    stream = auditor.add_stream(("file", "f"), "f", 1)
    auditor.add_input(stream, 1, b'{"conversation_id":"c","type":"tool_result","content":1}', {})
    side = {"id": None, "source": {"file": "f", "line": 1}, "block": 0}
    rec = {"kind": "orphan_result", "conversation_id": "c", "event": side}
    for _ in range(300):
        auditor.add_output(rec, "x")
    report = auditor.finish()
    assert report.duplicated == 1 and report.lost == 0
    assert "255 or more times" in report.samples[0].detail


def test_store_stays_compact_per_event() -> None:
    """Millions of events must fit: the per-event store is flat arrays, not Python objects."""
    s = Stream("big", 1)
    n = 200_000
    for pos in range(1, n + 1):
        s.add(pos, ((SLOT_CALL, pos & 0xFFFF),))
    held = sum(sys.getsizeof(a) for a in (s.starts, s.types, s.counts, s.prints))
    assert s.slots == n
    assert held / n < 20, f"{held / n:.1f} bytes per event"


def test_output_topic_templates_expand_per_input_topic_as_run_does() -> None:
    # The defaults of `run --pairs-topic ...` are templates; the audit must name the same topics.
    assert expand_topics(["{topic}.pairs", "{topic}.orphans"], ["a", "b"]) == [
        "a.pairs",
        "b.pairs",
        "a.orphans",
        "b.orphans",
    ]
    assert expand_topics(["all-pairs", "{topic}.dl", "all-pairs"], ["a"]) == ["all-pairs", "a.dl"]
