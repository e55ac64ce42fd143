"""Hostile inputs for `report` and `audit` (issue 27), and the per-conversation case that was
quadratic: each ends in records or one line, within a memory bound, counts stated."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.hostile.child import assert_conserved, call_line, cli, records


def test_report_on_a_record_with_a_list_for_kind_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "pairs.jsonl"
    bad.write_text(json.dumps({"kind": ["pair"], "reason": ["x"]}) + "\n")
    run = cli("report", str(bad))
    assert run.rc == 1
    assert "holds no stream-pairer output record" in run.one_line()


def _outputs(tmp_path: Path, n: int = 3) -> Path:
    logs = tmp_path / "in.jsonl"
    logs.write_text("".join(call_line(i) for i in range(n)))
    out = tmp_path / "out"
    assert cli("pair", str(logs), "--out", str(out), "-q").rc == 0
    return out


def test_report_counts_a_malformed_record_and_goes_on(tmp_path: Path) -> None:
    out = _outputs(tmp_path)
    with open(out / "orphans.jsonl", "a") as f:
        f.write(json.dumps({"kind": ["pair"]}) + "\n")
    run = cli("report", str(out), "--format", "json")
    assert run.rc == 0 and "Traceback" not in run.err, run.err
    totals = json.loads(run.out)["totals"]
    assert totals["calls"] == 3 and totals["malformed_lines"] == 1


def test_report_skips_an_oversize_line_without_holding_it(tmp_path: Path) -> None:
    out = _outputs(tmp_path)
    with open(out / "orphans.jsonl", "a") as f:
        f.write('{"kind":"orphan_call","x":"' + "y" * 60_000_000 + '"}\n')
    run = cli("report", str(out), "--format", "json", "--max-line-bytes", "1000000")
    assert run.rc == 0, run.err
    assert run.peak_mb < 80, run.peak_mb  # the line alone is 60 MB
    assert "a line of 60000029 bytes, more than 1000000" in run.one_line()
    assert json.loads(run.out)["totals"]["calls"] == 3
    audit = cli(
        "audit", "--input", str(tmp_path / "in.jsonl"), "--outputs", str(out), "--max-line-bytes", "1000000"
    )
    assert audit.rc == 2 and "is a line of 60000029 bytes" in audit.one_line()
    assert audit.peak_mb < 80, audit.peak_mb


def test_report_warns_of_duplicated_records_and_counts_them_once(tmp_path: Path) -> None:
    out = _outputs(tmp_path)
    both = tmp_path / "both.jsonl"
    both.write_bytes((out / "orphans.jsonl").read_bytes() * 2)  # two runs concatenated
    run = cli("report", str(both), str(out / "orphans.jsonl"), "--format", "json")
    assert run.rc == 0
    assert json.loads(run.out)["totals"]["calls"] == 3
    assert "6 records are exact duplicates" in run.err  # 3 in the file, 3 again
    again = cli("report", str(out), str(out / "orphans.jsonl"), "--format", "json")
    assert "orphans.jsonl was given twice: read once" in again.err
    assert json.loads(again.out)["totals"]["calls"] == 3


def test_unknown_result_ids_in_one_conversation(tmp_path: Path) -> None:
    """20,000 results whose calls never come, in one conversation: each an orphan `no_call`.
    (Their cost was quadratic in the compiled core: the held-result map was shifted on every
    release and its lists summed on every hold. The time is measured apart, not asserted here.)"""
    logs = tmp_path / "results.jsonl"
    with open(logs, "w") as f:
        for i in range(20_000):
            f.write(json.dumps({"type": "tool_result", "call_id": f"u{i}", "content": "x"}) + "\n")
    out = tmp_path / "out"
    run = cli("pair", str(logs), "--out", str(out), "-q")
    assert run.rc == 0, run.err
    orphans = records(out, "orphans.jsonl")
    assert len(orphans) == 20_000 and {o["reason"] for o in orphans} == {"no_call"}
    assert_conserved([str(logs)], out)


def test_report_and_audit_refuse_devices_and_unreadable_files_in_one_line(tmp_path: Path) -> None:
    """/dev/zero never ends (report read it for ever); /proc/self/mem opens but fails to read."""
    out = _outputs(tmp_path)
    logs = str(tmp_path / "in.jsonl")
    for run, expected in [
        (cli("report", "/dev/zero"), "cannot read /dev/zero: it is a device"),
        (cli("report", "/proc/self/mem"), "cannot read /proc/self/mem: Input/output error"),
        (cli("audit", "--input", "/dev/zero", "--outputs", str(out)), "cannot read /dev/zero"),
        (cli("audit", "--input", logs, "--outputs", "/proc/self/mem"), "cannot read /proc/self/mem"),
    ]:
        assert run.rc == 2 and expected in run.one_line(), run.err


def test_report_on_corrupt_gzip_is_one_line(tmp_path: Path) -> None:
    out = _outputs(tmp_path)
    data = bytearray(gzip.compress((out / "orphans.jsonl").read_bytes() * 200))
    data[30:38] = b"\xff" * 8
    bad = tmp_path / "orphans.jsonl.gz"
    bad.write_bytes(bytes(data))
    run = cli("report", str(bad))
    assert run.rc == 2 and run.one_line().startswith(f"stream-pairer report: cannot read {bad}")


def test_id_less_results_and_calls_of_other_names_in_one_conversation(tmp_path: Path) -> None:
    """10,000 id-less results named `a`, then 10,000 id-less calls named `b`: none pairs, each
    is an orphan. (Each call used to scan every held result for its name: quadratic, 37 s at
    20,000; the compiled core now indexes held events by name, native/src/byname.rs.)"""
    logs = tmp_path / "fifo.jsonl"
    with open(logs, "w") as f:
        for _ in range(10_000):
            f.write(json.dumps({"type": "tool_result", "name": "a", "content": "x"}) + "\n")
        for _ in range(10_000):
            f.write(json.dumps({"type": "tool_call", "name": "b", "arguments": {}}) + "\n")
    out = tmp_path / "out"
    run = cli("pair", str(logs), "--out", str(out), "-q")
    assert run.rc == 0, run.err
    orphans = records(out, "orphans.jsonl")
    assert len(orphans) == 20_000 and records(out, "pairs.jsonl") == []
    assert_conserved([str(logs)], out)


def test_report_counts_a_wrongly_typed_pair_as_a_malformed_line(tmp_path: Path) -> None:
    """A pair whose fields have types the schemas do not give (not written by stream-pairer) is a
    malformed line, not a pair of tool `(unknown)`."""
    out = _outputs(tmp_path)
    with open(out / "pairs.jsonl", "a") as f:
        bad = {"kind": "pair", "tool": 5, "outcome": ["x"], "failures": "s", "call": "z"}
        f.write(json.dumps(bad) + "\n")
    run = cli("report", str(out), "--format", "json")
    assert run.rc == 0 and "Traceback" not in run.err, run.err
    totals = json.loads(run.out)["totals"]
    assert totals["calls"] == 3 and totals["malformed_lines"] == 1
