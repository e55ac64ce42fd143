"""Hostile JSON documents (issue 27, rows 1-5): each is read within the record limits, ends in
dead letters with a reason for what cannot be a record, keeps its neighbours, and is conserved.

Memory bounds are the child's peak RSS (`ru_maxrss`): an interpreter with the compiled core is
~30 MB here; each bound leaves room for that and fails the way the issue's runs did (quadratic
memory in the depth, a string or an object held whole)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hostile.child import assert_conserved, cli, no_litter, records, tool_use

BASE_MB = 120  # an interpreter, the compiled core and the read buffers, with room to spare


def test_nested_1000_deep_is_one_dead_letter_naming_its_depth(tmp_path: Path) -> None:
    doc = tmp_path / "deep.json"
    doc.write_text("[" * 1000 + "]" * 1000)
    out = tmp_path / "out"
    run = cli("pair", str(doc), "--out", str(out), "-q")
    assert run.rc == 0 and "Traceback" not in run.err, run.err
    [dead] = records(out, "dead_letter.jsonl")
    assert dead["reason"] == "too_large"
    assert "nests 999 levels" in dead["detail"] and "more than the 200 allowed" in dead["detail"]
    assert_conserved([str(doc)], out)
    no_litter(out)


def test_nested_100000_deep_keeps_memory_flat(tmp_path: Path) -> None:
    """200 KB of brackets: memory used to grow with the square of the depth (24 GB, OOM-killed)."""
    doc = tmp_path / "deep.json"
    doc.write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "out"
    run = cli("pair", str(doc), "--out", str(out), "-q")
    assert run.rc == 0, run.err
    assert run.peak_mb < BASE_MB, run.peak_mb
    [dead] = records(out, "dead_letter.jsonl")
    assert "nests 99999 levels" in dead["detail"]
    audit = cli("audit", "--input", str(doc), "--outputs", str(out), "-q")
    assert audit.rc == 0 and audit.peak_mb < BASE_MB, (audit.err, audit.peak_mb)


def _compact(path: Path, messages: list[object]) -> None:
    path.write_text(json.dumps({"messages": messages}))  # one line, no newline


def test_compact_one_line_document_is_streamed_element_by_element(tmp_path: Path) -> None:
    """A one-line document longer than the record limit used to be one `too_large` dead letter;
    it is streamed like its pretty-printed twin, and one oversized message is one dead letter."""
    limit = 100_000
    messages: list[object] = [
        {"role": "assistant", "content": [tool_use(i, f"m{m}_") for i in range(600)]} for m in range(20)
    ]
    messages.insert(7, {"role": "assistant", "content": [tool_use(i, "big") for i in range(3000)]})
    doc = tmp_path / "compact.json"
    _compact(doc, messages)
    assert doc.stat().st_size > 10 * limit and b"\n" not in doc.read_bytes()
    out = tmp_path / "out"
    run = cli("pair", str(doc), "--out", str(out), "-q", "--max-record-bytes", str(limit))
    assert run.rc == 0, run.err
    orphans = records(out, "orphans.jsonl")
    assert len(orphans) == 20 * 600  # every call of the neighbours read
    [dead] = records(out, "dead_letter.jsonl")
    assert dead["reason"] == "too_large" and dead["source"]["item"] == "messages[7]"
    assert dead["raw_bytes"] > limit
    assert_conserved([str(doc)], out, "--max-record-bytes", str(limit))


def test_a_wide_object_is_one_dead_letter_not_held(tmp_path: Path) -> None:
    """A message of 150,000 keys is refused once it passes the limit, not built whole."""
    wide = {f"k{i}": i for i in range(150_000)}
    doc = tmp_path / "wide.json"
    doc.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "assistant", "content": [tool_use(1)]},
                    {"role": "assistant", "content": [tool_use(2)], "extra": wide},
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}],
                    },
                ]
            },
            indent=1,
        )
    )
    out = tmp_path / "out"
    run = cli("pair", str(doc), "--out", str(out), "-q", "--max-record-bytes", "65536")
    assert run.rc == 0, run.err
    assert run.peak_mb < BASE_MB, run.peak_mb
    [dead] = records(out, "dead_letter.jsonl")
    assert dead["source"]["item"] == "messages[1]" and "65536 byte limit" in dead["detail"]
    assert len(records(out, "pairs.jsonl")) == 1  # its neighbours still paired
    assert_conserved([str(doc)], out, "--max-record-bytes", "65536")


def test_a_long_string_is_never_held_whole(tmp_path: Path) -> None:
    """A 40 MB string in a pretty-printed document: the parser used to hold it whole (and more:
    a 100 MB string cost 332 MB); it is cut at the record limit before the parser."""
    size = 40_000_000
    messages = [
        {"role": "assistant", "content": [tool_use(1), tool_use(2)]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x" * size}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2", "content": "ok"}]},
    ]
    doc = tmp_path / "long.json"
    doc.write_text(json.dumps({"messages": messages}, indent=2))
    out = tmp_path / "out"
    run = cli("pair", str(doc), "--out", str(out), "-q")
    assert run.rc == 0, run.err
    assert run.peak_mb < 80, run.peak_mb  # the string alone is 40 MB
    [dead] = records(out, "dead_letter.jsonl")
    assert dead["reason"] == "too_large" and dead["raw_bytes"] >= size
    assert [p["call"]["id"] for p in records(out, "pairs.jsonl")] == ["c2"]
    assert_conserved([str(doc)], out)
    no_litter(out)


def test_a_large_field_beside_the_message_list_is_not_a_record(tmp_path: Path) -> None:
    """The fields around a streamed message list are never records: a large one is read to its
    end without being held, and neither kept nor dead-lettered; a large object without a message
    list is one dead letter."""
    beside = tmp_path / "beside.json"
    beside.write_text(
        json.dumps(
            {
                "meta": {f"k{i}": i for i in range(20_000)},
                "messages": [{"role": "assistant", "content": [tool_use(1)]}],
            },
            indent=1,
        )
    )
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps({"meta": {f"k{i}": i for i in range(20_000)}, "id": 1}, indent=1))
    out = tmp_path / "out"
    run = cli("pair", str(beside), str(alone), "--out", str(out), "-q", "--max-record-bytes", "65536")
    assert run.rc == 0, run.err
    assert [o["event"]["id"] for o in records(out, "orphans.jsonl")] == ["c1"]
    [dead] = records(out, "dead_letter.jsonl")
    assert dead["source"]["file"] == alone.name and dead["reason"] == "too_large"
    assert_conserved([str(beside), str(alone)], out, "--max-record-bytes", "65536")
