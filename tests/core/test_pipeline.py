"""core/pipeline.py: what it did goes to an observer as it happens; replay mode re-counts nothing."""

from __future__ import annotations

import orjson

from tests.engine_helpers import Recorder
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline

SRC = {"topic": "in", "partition": 0, "offset": 0}


def ev(kind: str, cid: str, ts: int = 1_000) -> bytes:
    return orjson.dumps({"conversation_id": "c", "type": kind, "id": cid, "name": "t", "ts": ts})


def test_observer_hears_records_skips_and_evictions_as_they_happen() -> None:
    obs = Recorder()
    pipe = Pipeline(Engine(EngineConfig(max_calls_per_conversation=1)), observer=obs)
    pipe.feed(ev("tool_call", "a"), SRC)
    pipe.feed(orjson.dumps({"conversation_id": "c", "role": "user", "content": "hi"}), SRC)
    pipe.feed(b"{not json", SRC)  # a dead letter: an output record, counted where it is delivered
    out = pipe.feed(ev("tool_call", "b"), SRC)  # evicts a
    assert [r["reason"] for r in out] == ["evicted"]
    assert obs.calls == [
        ("read", "canonical", 1, 0),
        ("read", None, 0, 0),
        ("skipped", None),
        ("evicted", 1, "calls_per_conversation"),
        ("read", "canonical", 1, 0),
    ]
    assert pipe.summary.records == 4 and pipe.summary.skipped == 1
    assert pipe.engine.evictions == {"calls_per_conversation": 1}


def test_replay_mode_processes_only_held_blocks_and_counts_no_input_again() -> None:
    obs = Recorder()
    pipe = Pipeline(Engine(), observer=obs)
    two_calls = orjson.dumps(
        {
            "conversation_id": "c",
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "x", "name": "t", "input": {}},
                {"type": "tool_use", "id": "y", "name": "t", "input": {}},
            ],
        }
    )
    assert pipe.feed(two_calls, SRC, replay_blocks=frozenset({1})) == []
    assert [h.event.id for h in pipe.engine.held()] == ["y"]  # block 0 was emitted before the commit
    assert pipe.summary.records == 0 and sum(pipe.summary.events.values()) == 0
    assert obs.calls == []
    # A record that no longer reads (format options changed between runs) still ends somewhere.
    (dead,) = pipe.feed(b"{not json", SRC, replay_blocks=frozenset({0}))
    assert dead["kind"] == "dead_letter" and pipe.summary.records == 0


def test_observer_hears_unknown_types_and_history_copies() -> None:
    obs = Recorder()
    pipe = Pipeline(Engine(), observer=obs)
    pipe.feed(orjson.dumps({"type": "custom-title", "sessionId": "s", "customTitle": "x"}), SRC)
    use = {"type": "tool_use", "id": "u1", "name": "t", "input": {}}
    exchange = {
        "request": {"body": {"messages": []}},
        "response": {"body": {"role": "assistant", "content": [use]}},
    }
    pipe.feed(orjson.dumps(exchange), SRC, key="c")
    pipe.feed(orjson.dumps(exchange), SRC, key="c")  # the same response recorded twice: a copy
    assert obs.calls == [
        ("read", None, 0, 0),
        ("skipped", "custom-title"),
        ("read", "wire", 1, 0),
        ("copies", 1),
        ("read", None, 0, 0),
    ]
    assert pipe.summary.skipped_types == {"custom-title": 1} and pipe.summary.duplicate_copies == 1
