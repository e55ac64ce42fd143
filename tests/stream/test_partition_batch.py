"""A partition's fetch crosses into the compiled core in one call (`NativePipeline.feed_messages`)
and gives exactly what feeding it record by record gives: the same outputs (topic, key, bytes,
meta) in the same order, the same offsets and counts, with stale messages after a seek, tombstones,
keys that are not UTF-8 (the conversation of key-only records), dead letters keyed by their input.
"""

from __future__ import annotations

from typing import Any

import orjson

from stream_pairer.core.native import NativePipeline
from stream_pairer.stream.partition import OutputTopics, PartitionState
from tests.engine_helpers import Msg, OneByOne


def _fetches() -> list[list[Msg]]:
    t = 1_750_000_000_000

    def rec(**f: Any) -> bytes:
        return orjson.dumps(f)

    first = [
        Msg(0, b"c1", rec(conversation_id="c1", type="tool_call", id="a", name="t", ts=t), t),
        Msg(1, b"\xff\xfekey", rec(type="tool_call", id="b", name="t", ts=t), t + 1),  # key: conversation
        Msg(2, b"c1", None, t + 2),  # a tombstone
        Msg(3, b"bad", b"{not json", t + 3),  # a dead letter, keyed by its input's key
        Msg(4, None, rec(conversation_id="c1", type="tool_result", id="a", content="ok", ts=t + 4), t + 4),
    ]
    second = [
        Msg(3, b"bad", b"{not json", t + 3),  # stale: before the next offset (a seek), skipped
        Msg(5, b"\xff\xfekey", rec(type="tool_result", id="b", content="ok", ts=t + 5), t + 5),
        Msg(6, b"c2", rec(conversation_id="c2", type="tool_result", id="zz", content="?", ts=t + 6), t + 6),
    ]
    return [first, second]


def _run(batched: bool) -> tuple[list[Any], tuple[Any, ...]]:
    pipeline: Any = NativePipeline(routed=True)
    if not batched:
        pipeline = OneByOne(pipeline)
    st = PartitionState("in", 0, pipeline, OutputTopics.for_input("in"), start_offset=0)
    out: list[Any] = []
    for fetch in _fetches():
        out += st.feed(fetch, 0.0)
    out += st.flush("shutdown")
    return out, (st.next_offset, st.last_processed, st.records_fed, pipeline.summary.as_dict())


def test_a_fetch_in_one_call_gives_what_records_one_by_one_give() -> None:
    got, got_state = _run(batched=True)
    want, want_state = _run(batched=False)
    assert got == want
    assert got_state == want_state
    records = [orjson.loads(e.record) for e in got]
    kinds = [(r["kind"], r.get("reason") or r.get("match")) for r in records]
    assert ("pair", "id") in kinds and ("dead_letter", "invalid_json") in kinds
    assert ("orphan_result", "shutdown") in kinds
    dead = [e for e, r in zip(got, records, strict=True) if r["kind"] == "dead_letter"]
    assert [e.key for e in dead] == [b"c1", b"bad"]  # the tombstone, the broken record; stale copy skipped
    pair_b = [r for r in records if r["kind"] == "pair" and r["call"]["id"] == "b"]
    assert pair_b and pair_b[0]["conversation_id"] == b"\xff\xfekey".decode("utf-8", "replace")
    assert got_state[0] == 7 and got_state[2] == 7  # offsets 0-6, the stale one not counted twice
