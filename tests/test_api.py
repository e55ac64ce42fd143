"""The public API (`from stream_pairer import Pairer`) is the face `stream-pairer pair` uses: the same
records for the same input, whether fed a file, an iterable of lines or one record at a time, and
its clock and flush keep the conservation invariant.
"""

from __future__ import annotations

import decimal
import gzip
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import stream_pairer
from stream_pairer import EngineConfig, FormatConfig, Pairer, TaggingConfig
from stream_pairer.api import PartialInput
from stream_pairer.cli.app import main

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "mixed.jsonl"
OUTPUTS = ("pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl")


def _by_file(records: list[bytes]) -> dict[str, bytes]:
    files = {"pair": "pairs.jsonl", "orphan_call": "orphans.jsonl", "orphan_result": "orphans.jsonl"}
    out = dict.fromkeys(OUTPUTS, b"")
    for rec in records:
        name = files.get(orjson.loads(rec)["kind"], "dead_letter.jsonl")
        out[name] += rec + b"\n"
    return out


def test_feed_file_gives_what_the_pair_command_writes(tmp_path: Path) -> None:
    assert main(["pair", str(EXAMPLE), "--out", str(tmp_path), "-q"]) == 0
    p = Pairer()
    got = _by_file(p.feed_file(EXAMPLE) + p.flush())
    for name in OUTPUTS:
        assert got[name] == (tmp_path / name).read_bytes(), name
    stats = p.stats
    assert stats.records == len([x for x in EXAMPLE.read_bytes().splitlines() if x.strip()])
    acc = stats.accounted()
    assert acc["events_in"] == acc["events_out"] > 0  # every event in exactly one output


def test_records_one_at_a_time_or_as_an_iterable_give_the_same_outputs() -> None:
    lines = EXAMPLE.read_bytes().splitlines()
    a, b = Pairer(), Pairer()
    one = [out for n, line in enumerate(lines, 1) if line.strip() for out in a.feed(line, source={"line": n})]
    many = b.feed_many(lines)
    assert one == many
    assert a.flush() == b.flush()
    assert a.stats.as_dict() == b.stats.as_dict()


def test_decoded_objects_a_clock_and_a_flush() -> None:
    """A dict record, a call left open until processing time passes its timeout, a result whose
    call never comes: everything leaves, as a pair or an orphan, with its reason."""
    p = Pairer(EngineConfig(call_timeout_ms=1_000, result_grace_ms=500), tagging=None)
    assert p.advance(0.0) == []  # processing time starts (a stream's first tick)
    call = {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "t", "ts": 1_000}
    assert p.feed(call, arrival_ms=0.0) == []  # held: waiting for its result
    done = Pairer.decode(p.feed({**call, "type": "tool_result", "content": "ok"}, arrival_ms=10.0))
    assert [(r["kind"], r["match"]) for r in done] == [("pair", "id")]
    assert "outcome" not in done[0] or done[0]["outcome"] is None  # tagging off
    p.feed({**call, "id": "b"}, arrival_ms=20.0)
    timed_out = Pairer.decode(p.advance(5_000.0))
    assert [(r["kind"], r["reason"]) for r in timed_out] == [("orphan_call", "timeout")]
    p.feed('{"conversation_id":"c","type":"tool_result","id":"zz","content":"?"}')
    left = Pairer.decode(p.flush())
    assert [(r["kind"], r["reason"]) for r in left] == [("orphan_result", "no_call")]
    assert p.stats.as_dict()["pairs"] == {"id": 1}


def test_tagging_is_on_by_default_and_configurable() -> None:
    rec = {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "t", "ts": 1}
    res = {**rec, "type": "tool_result", "content": "boom", "is_error": True, "ts": 2}
    for tagging, tagged in ((TaggingConfig(), True), (None, False)):
        p = Pairer(tagging=tagging)
        p.feed(rec)
        (pair,) = Pairer.decode(p.feed(res))
        assert (pair.get("outcome") == "error") is tagged, pair


def test_importing_the_package_does_not_load_the_core() -> None:
    """`stream-pairer --help` and the commands that do not pair must work without the extension."""
    code = "import sys, stream_pairer; assert 'stream_pairer.core.native' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    assert stream_pairer.Pairer is Pairer


def _canonical(kind: str, i: str, **extra: Any) -> dict[str, Any]:
    if kind == "call":
        return {"conversation_id": "c", "type": "tool_call", "id": i, "name": "n", "arguments": {}, **extra}
    return {"conversation_id": "c", "type": "tool_result", "call_id": i, "content": "ok", **extra}


def test_an_object_that_is_not_json_is_a_dead_letter_and_nothing_before_it_is_lost() -> None:
    """A row of a table holding a Decimal, a set or a non-string key used to raise out of
    feed_many after the core had taken the records before it: their outputs were lost."""
    p = Pairer()
    out = p.feed_many(
        [
            _canonical("call", "1"),
            _canonical("result", "1"),
            _canonical("call", "2", arguments={"p": decimal.Decimal("9.99")}),
            {"conversation_id": "c", 1: "a key that is no string"},
            '{"conversation_id": "c", "type": "tool_call", "id": "3", "name": "\ud800"}',
        ]
    )
    out += p.flush()
    records = Pairer.decode(out)
    assert [r["kind"] for r in records if r["kind"] != "dead_letter"] == ["pair"]
    dead = [r for r in records if r["kind"] == "dead_letter"]
    assert [(d["reason"], d["source"]["line"]) for d in dead] == [
        ("invalid_json", 3),
        ("invalid_json", 4),
        ("invalid_utf8", 5),
    ]
    assert "Decimal" in dead[0]["detail"] and "Decimal('9.99')" in dead[0]["raw"]
    acc = p.stats.accounted()
    assert acc["events_in"] == acc["events_out"] == 2
    assert p.stats.records == 5 and sum(p.stats.dead_letters.values()) == 3


def test_lines_of_an_open_file_are_read_as_pair_reads_them(tmp_path: Path) -> None:
    """`feed_many(open(path, "rb"))` (the README's example): the line break is not part of the
    record, so a line of exactly --max-record-bytes is read, as `feed_file` reads it."""
    call = orjson.dumps(_canonical("call", "1", pad=""))
    limit = 1000
    call = orjson.dumps(_canonical("call", "1", pad="x" * (limit - len(call))))
    assert len(call) == limit
    path = tmp_path / "log.jsonl"
    path.write_bytes(call + b"\r\n" + orjson.dumps(_canonical("result", "1")) + b"\n")
    formats = FormatConfig(max_record_bytes=limit)
    a, b = Pairer(formats=formats), Pairer(formats=formats)
    with open(path, "rb") as f:
        many = Pairer.decode(a.feed_many(f) + a.flush())
    whole = Pairer.decode(b.feed_file(path) + b.flush())
    assert [r["kind"] for r in many] == [r["kind"] for r in whole] == ["pair"]


def test_a_clock_reading_that_is_not_a_number_is_refused() -> None:
    p = Pairer(EngineConfig(call_timeout_ms=60_000))
    p.advance(1_000.0)
    assert p.feed(_canonical("call", "1"), arrival_ms=1_000.0) == []
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):
            p.advance(bad)
        with pytest.raises(ValueError, match="finite"):
            p.feed(_canonical("call", "2"), arrival_ms=bad)
    assert p.advance(2_000.0) == []  # the held call did not expire on the refused readings
    (orphan,) = Pairer.decode(p.advance(62_000.0))
    assert (orphan["kind"], orphan["reason"]) == ("orphan_call", "timeout")


def test_a_file_that_breaks_off_keeps_the_outputs_made_before(tmp_path: Path) -> None:
    """A truncated gzip file: feed_file raises, and the records it made before are on the error."""
    lines = b"".join(
        orjson.dumps(_canonical(kind, str(i))) + b"\n" for i in range(2000) for kind in ("call", "result")
    )
    data = gzip.compress(lines)
    path = tmp_path / "log.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    p = Pairer()
    with pytest.raises(PartialInput) as err:
        p.feed_file(path)
    got = Pairer.decode(err.value.outputs + p.flush())
    assert sum(r["kind"] == "pair" for r in got) > 100
    acc = p.stats.accounted()
    assert acc["events_in"] == acc["events_out"] == sum(2 if r["kind"] == "pair" else 1 for r in got)


def test_a_session_header_names_the_conversation_in_feed_many_as_in_a_file() -> None:
    """Codex rollout lines carry no conversation id: the `session_meta` line before them names it,
    in `feed_many` as in `feed_file` (before, feed_many dead-lettered them for a missing id)."""
    codex = Path(__file__).parent / "samples" / "codex.jsonl"
    lines = codex.read_bytes().splitlines()
    a, b = Pairer(), Pairer()
    from_file = Pairer.decode(a.feed_file(codex) + a.flush())
    from_lines = Pairer.decode(b.feed_many(lines) + b.flush())
    convs = {r["conversation_id"] for r in from_lines if "conversation_id" in r}
    assert convs == {r["conversation_id"] for r in from_file if "conversation_id" in r}
    assert convs == {orjson.loads(lines[0])["payload"]["id"]}
    assert [r["kind"] for r in from_lines] == [r["kind"] for r in from_file]
    assert b.stats.dead_letters == a.stats.dead_letters == {}
    given = Pairer.decode(Pairer().feed_many(lines, conversation_id="mine"))
    assert {r["conversation_id"] for r in given if "conversation_id" in r} == {"mine"}
