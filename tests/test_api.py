"""The public API (`from stream_pairer import Pairer`) is the face `stream-pairer pair` uses: the same
records for the same input, whether fed a file, an iterable of lines or one record at a time, and
its clock and flush keep the conservation invariant.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

import stream_pairer
from stream_pairer import EngineConfig, Pairer, TaggingConfig
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
