"""Property tests of the core invariant: every input event is accounted for exactly once.

Random conversations are generated with a ground truth (which result belongs to which call), then
shuffled, thinned (dropped events), duplicated, and run through an engine with random, often tiny,
limits and timers. Whatever happens, each input event must appear in exactly one output record, and
an id match must always join a call and a result of the same id and conversation.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_pairer.core.model import ToolEvent
from tests.core.engine_helpers import call, key, members, result
from tests.reference.engine import Engine, EngineConfig, held_cost

NAMES = ["search", "fetch", "weather", None]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[ToolEvent], EngineConfig, list[int]]:
    n_convs = draw(st.integers(1, 4))
    events: list[ToolEvent] = []
    for c in range(n_convs):
        conv = f"conv{c}"
        for i in range(draw(st.integers(0, 8))):
            has_id = draw(st.booleans())
            cid = f"toolu_{c}_{i}" if has_id else None
            name = draw(st.sampled_from(NAMES))
            ts = float(draw(st.integers(0, 100_000)))
            events.append(call(conv, cid, name=name, ts=ts, size=draw(st.integers(0, 300))))
            if draw(st.integers(0, 9)) > 1:  # most calls get a result
                rid = (
                    cid
                    if has_id and draw(st.integers(0, 9)) > 0
                    else (f"unknown_{c}_{i}" if has_id else None)
                )
                rname = name if draw(st.booleans()) else None
                rts = ts + draw(st.integers(0, 50_000))
                events.append(result(conv, rid, name=rname, ts=float(rts), size=draw(st.integers(0, 300))))
        for j in range(draw(st.integers(0, 2))):  # stray results with no call
            events.append(result(conv, draw(st.sampled_from([None, f"stray{j}"])), ts=float(j)))
    perm = draw(st.permutations(range(len(events))))
    events = [events[i] for i in perm]
    # drop some events, duplicate some (the same object twice = an at-least-once redelivery)
    kept = [ev for ev in events if draw(st.integers(0, 9)) > 0]
    dups = [ev for ev in kept if draw(st.integers(0, 14)) == 0]
    stream = kept + dups
    perm2 = draw(st.permutations(range(len(stream))))
    stream = [stream[i] for i in perm2]
    config = EngineConfig(
        call_timeout_ms=float(draw(st.sampled_from([1, 1_000, 30_000, 10**9]))),
        result_grace_ms=float(draw(st.sampled_from([0, 1_000, 10**9]))),
        conversation_ttl_ms=float(draw(st.sampled_from([1, 10**9]))),
        max_conversations=draw(st.integers(1, 5)),
        max_calls_per_conversation=draw(st.integers(1, 6)),
        # From below one event's cost (everything evicted at once) to a few events' worth.
        max_held_bytes=draw(st.integers(1, 6 * held_cost(300))),
        max_closed_ids_per_conversation=draw(st.integers(1, 4)),
        max_closed_ids=draw(st.integers(0, 12)),
    )
    ticks = draw(st.lists(st.integers(0, 200_000), max_size=5))
    return stream, config, ticks


def _run(stream: list[ToolEvent], config: EngineConfig, ticks: list[int]) -> list[dict[str, Any]]:
    engine = Engine(config)
    out: list[dict[str, Any]] = []
    for i, ev in enumerate(stream):
        out += engine.process(ev)
        if ticks and i % 3 == 0:
            out += engine.advance(float(ticks[i % len(ticks)]))
    out += engine.flush()
    assert engine.open_calls == engine.pending_results == engine.held_bytes == 0
    return out


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_every_event_accounted_for_exactly_once(
    case: tuple[list[ToolEvent], EngineConfig, list[int]],
) -> None:
    stream, config, ticks = case
    out = _run(stream, config, ticks)
    expected: dict[Any, int] = {}
    for ev in stream:
        expected[key(ev)] = expected.get(key(ev), 0) + 1
    assert dict(members(out)) == expected


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_id_pairs_are_always_correct_and_fifo_only_for_idless_results(
    case: tuple[list[ToolEvent], EngineConfig, list[int]],
) -> None:
    stream, config, ticks = case
    for rec in _run(stream, config, ticks):
        if rec["kind"] != "pair":
            continue
        c, r = rec["call"], rec["result"]
        if rec["match"] == "id":
            assert c["id"] is not None and c["id"] == r["id"]
            assert rec["fifo_by"] is None
        else:
            assert rec["match"] == "fifo"
            assert r["id"] is None  # a result carrying an id is never FIFO-paired
            if r["name"] is not None:
                assert c["name"] in (r["name"], None)
        assert c["source"]["line"] != r["source"]["line"]


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_held_bytes_never_exceed_limit(case: tuple[list[ToolEvent], EngineConfig, list[int]]) -> None:
    stream, config, _ = case
    engine = Engine(config)
    for ev in stream:
        engine.process(ev)
        assert engine.held_bytes <= config.max_held_bytes
        assert engine.open_conversations <= config.max_conversations
        assert engine.held_bytes == sum(held_cost(h.event.size) for h in engine.held())
        assert engine.closed_ids <= config.max_closed_ids


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_deterministic(case: tuple[list[ToolEvent], EngineConfig, list[int]]) -> None:
    stream, config, ticks = case
    assert _run(stream, config, ticks) == _run(stream, config, ticks)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_eviction_counter_equals_evicted_orphans(
    case: tuple[list[ToolEvent], EngineConfig, list[int]],
) -> None:
    stream, config, _ = case
    engine = Engine(config)
    out: list[dict[str, Any]] = []
    for ev in stream:
        out += engine.process(ev)
    assert sum(engine.evictions.values()) == sum(1 for r in out if r.get("reason") == "evicted")
