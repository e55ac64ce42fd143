"""The engine's memory bounds beyond held events: closed ids, the held-bytes estimate, idle sweeps.

Closed ids used to be bounded only per conversation, so with many conversations they grew to
max_conversations x 256 entries while every held-event gauge stayed flat (BENCHMARKS.md part 4).
These tests pin the engine-wide bound and what forgetting means: never a dropped event, only a
weaker diagnosis (an unknown id, `no_call`, instead of `duplicate_result` / `late_result`).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_pairer.core.model import ToolEvent
from tests.core.engine_helpers import call, key, members, result
from tests.reference.engine import (
    HELD_BYTES_PER_EVENT,
    IDLE_SWEEP_EVERY_MS,
    Engine,
    EngineConfig,
    held_cost,
)
from tests.reference.state import Conversation
from tests.reference.tagging import FailureTagger


def run(engine: Engine, events: list[ToolEvent]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ev in events:
        out += engine.process(ev)
    return out


def reasons(out: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(r["kind"], r.get("match") or r.get("reason")) for r in out]


def remembered(engine: Engine) -> int:
    """Closed ids as the conversations hold them (must equal the engine-wide count)."""
    return sum(len(c.closed) for c in engine._convs.values())


def paired(conv: str, cid: str, ts: float) -> list[ToolEvent]:
    return [call(conv, cid, ts=ts), result(conv, cid, ts=ts)]


def test_closed_ids_are_bounded_across_conversations_oldest_first() -> None:
    e = Engine(EngineConfig(max_closed_ids=3, result_grace_ms=100))
    e.advance(0.0)  # processing time starts
    run(e, [ev for i in range(5) for ev in paired(f"c{i}", "x", ts=i)])
    assert e.closed_ids == remembered(e) == 3
    assert [c.conversation_id for c in e._convs.values() if c.closed] == ["c2", "c3", "c4"]
    # Still remembered: a duplicate is diagnosed as such.
    assert reasons(run(e, [result("c4", "x", ts=10)])) == [("orphan_result", "duplicate_result")]
    # Forgotten: the duplicate is an unknown id; it waits its grace and is still emitted.
    assert run(e, [result("c0", "x", ts=11)]) == []
    assert reasons(e.advance(200)) == [("orphan_result", "no_call")]
    assert e.pending_results == 0


def test_per_conversation_limit_still_applies_and_stays_in_step() -> None:
    e = Engine(EngineConfig(max_closed_ids=100, max_closed_ids_per_conversation=2))
    run(e, [ev for i in range(5) for ev in paired("c", f"id{i}", ts=i)])
    assert list(e._convs["c"].closed) == ["id3", "id4"]
    assert e.closed_ids == remembered(e) == 2


def test_late_result_diagnosis_needs_the_id_remembered() -> None:
    e = Engine(EngineConfig(max_closed_ids=1, call_timeout_ms=10, result_grace_ms=0))
    e.advance(0.0)
    out = run(e, [call("a", "1", ts=0), call("b", "2", ts=0)])
    out += e.advance(20)  # both calls time out: two closed ids, the bound keeps the newer
    assert reasons(out) == [("orphan_call", "timeout"), ("orphan_call", "timeout")]
    assert e.closed_ids == 1
    assert reasons(run(e, [result("b", "2", ts=21)])) == [("orphan_result", "late_result")]
    out = run(e, [result("a", "1", ts=22)])
    out += e.advance(23)
    assert reasons(out) == [("orphan_result", "no_call")]


def test_a_reused_id_leaves_the_closed_set() -> None:
    e = Engine(EngineConfig(max_closed_ids=10))
    run(e, paired("c", "x", ts=0))
    assert e.closed_ids == 1
    run(e, [call("c", "x", ts=1)])  # the id is open again, no longer closed
    assert e.closed_ids == remembered(e) == 0
    assert reasons(run(e, [result("c", "x", ts=2)])) == [("pair", "id")]
    assert e.closed_ids == 1


@pytest.mark.parametrize("how", ["lru", "ttl", "flush", "discard"])
def test_departing_conversations_take_their_closed_ids(how: str) -> None:
    e = Engine(EngineConfig(max_conversations=2, conversation_ttl_ms=1_000))
    e.advance(0.0)
    run(e, paired("a", "1", ts=0) + paired("a", "2", ts=0) + paired("b", "3", ts=0))
    assert e.closed_ids == 3
    if how == "lru":
        run(e, [call("c", "4", ts=1)])  # "a" is the least recently used
        assert e.closed_ids == remembered(e) == 1
    elif how == "ttl":
        e.advance(5_000)
        assert e.open_conversations == 0 and e.closed_ids == 0
    elif how == "flush":
        e.flush()
        assert e.closed_ids == 0
    else:
        e.discard()
        assert e.closed_ids == 0
    # No reference to a departed conversation is left behind to keep it alive.
    assert all(conv in e._convs.values() for conv, _ in e._closed)


def test_zero_closed_ids_means_no_diagnosis_but_nothing_lost() -> None:
    e = Engine(EngineConfig(max_closed_ids=0, result_grace_ms=5))
    e.advance(0.0)
    out = run(e, [*paired("c", "x", ts=0), result("c", "x", ts=1)])
    out += e.advance(10)
    assert reasons(out) == [("pair", "id"), ("orphan_result", "no_call")]
    assert e.closed_ids == 0


def test_negative_closed_id_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        EngineConfig(max_closed_ids=-1)


def test_held_bytes_is_an_estimate_of_memory_not_the_raw_size() -> None:
    assert held_cost(0) == HELD_BYTES_PER_EVENT
    assert held_cost(1000) > 4 * 1000  # ~5x a ~1 KB record, as measured
    e = Engine()
    run(e, [call("a", "1", ts=0, size=1000), result("b", "9", ts=0, size=10)])
    assert e.held_bytes == held_cost(1000) + held_cost(10)
    run(e, [result("a", "1", ts=1, size=500)])
    assert e.held_bytes == held_cost(10)
    e.flush()
    assert e.held_bytes == 0


def test_held_bytes_limit_counts_the_per_event_cost() -> None:
    """Tiny events still cost memory: a limit of ten events' worth holds ten, not thousands (plus
    the 100 B the ids of these conversations are charged)."""
    e = Engine(EngineConfig(max_held_bytes=10 * held_cost(1) + 100))
    out = run(e, [call(f"c{i}", "x", ts=i, size=1) for i in range(15)])
    assert reasons(out) == [("orphan_call", "evicted")] * 5
    assert e.open_calls == 10


def test_idle_sweep_runs_once_processing_time_moved_a_second() -> None:
    e = Engine(EngineConfig(conversation_ttl_ms=100))
    e.advance(0.0)  # the sweep at P=0 finds nothing
    run(e, paired("a", "1", ts=0))
    e.advance(IDLE_SWEEP_EVERY_MS - 1)  # "a" expired (ttl 100) but no sweep is due yet
    assert e.open_conversations == 1
    e.advance(IDLE_SWEEP_EVERY_MS)
    assert e.open_conversations == 0


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[ToolEvent], EngineConfig]:
    events: list[ToolEvent] = []
    for i in range(draw(st.integers(1, 40))):
        conv = f"c{draw(st.integers(0, 5))}"
        cid = f"id{draw(st.integers(0, 8))}"
        ts = float(draw(st.integers(0, 5_000)))
        events.append((call if draw(st.booleans()) else result)(conv, cid, ts=ts, size=i))
    config = EngineConfig(
        call_timeout_ms=float(draw(st.sampled_from([10, 1_000, 10**9]))),
        result_grace_ms=float(draw(st.sampled_from([0, 500]))),
        conversation_ttl_ms=float(draw(st.sampled_from([1, 2_000, 10**9]))),
        max_conversations=draw(st.integers(1, 6)),
        max_closed_ids_per_conversation=draw(st.integers(0, 4)),
        max_closed_ids=draw(st.integers(0, 10)),
    )
    return events, config


@settings(max_examples=300, deadline=None)
@given(streams())
def test_closed_id_bookkeeping_stays_consistent(case: tuple[list[ToolEvent], EngineConfig]) -> None:
    events, config = case
    e = Engine(config)
    out: list[dict[str, Any]] = []
    for ev in events:
        out += e.process(ev)
        assert e.closed_ids == remembered(e) <= config.max_closed_ids
        assert all(e._convs.get(conv.conversation_id) is conv for conv, _ in e._closed)
    out += e.flush()
    assert dict(members(out)) == {key(ev): 1 for ev in events}


def test_conversation_and_closed_ids_are_charged_to_the_held_bytes_limit() -> None:
    """Ids outlive their events (idle conversations, closed ids): 600 conversations with 50 KB ids
    would keep 30 MB outside the estimate. Charged, they are bounded by --max-held-bytes: the least
    recently used idle conversations are forgotten, and the charge returns to 0 when they go."""
    limit = 1_000_000
    e = Engine(EngineConfig(max_held_bytes=limit))
    big = "i" * 50_000
    for n in range(600):
        conv = f"{n:04d}" + big
        run(e, [call(conv, f"k{n}", ts=n, size=10), result(conv, f"k{n}", ts=n, size=10)])
        assert e.held_bytes + e.id_bytes <= limit
    assert e.open_conversations < 600 and e.open_conversations >= 15
    assert e.id_bytes == sum(len(c) + len(f"k{int(c[:4])}") for c in e._convs)
    e.flush()
    assert e.id_bytes == 0


def container_bytes(conv: Conversation) -> int:
    """What a conversation's per-event containers cost themselves (their tables, not the entries)."""
    seen = conv.tags.seen if conv.tags is not None else {}
    return sum(sys.getsizeof(c) for c in (conv.calls_by_id, conv.open_calls, conv.pending_results, seen))


def test_an_idle_conversation_costs_the_same_whatever_it_held_before() -> None:
    """A dict keeps its table when its entries are deleted: unless the emptied containers are
    cleared, a conversation that once held 40 parallel calls, 40 results for unknown ids or 40
    remembered call hashes keeps tables sized for them for as long as it is remembered (the
    conversation TTL, an hour by default), and the process grows with every conversation that
    ever had a busy moment while every state gauge is flat (the soak's RSS creep, BENCHMARKS.md)."""
    e = Engine(
        EngineConfig(result_grace_ms=100, call_timeout_ms=1_000),
        tagger=FailureTagger(max_hashes_total=40),
    )
    e.advance(0.0)
    out = run(e, [*paired("quiet", "q0", ts=0), result("quiet", "unknown", ts=0)])
    busy = [call("busy", f"b{i}", ts=1, args={"i": i}) for i in range(40)]
    busy += [result("busy", f"b{i}", ts=2) for i in range(40)]
    busy += [result("busy", f"unknown{i}", ts=3) for i in range(40)]
    out += run(e, busy)
    # Forty newer calls elsewhere push every remembered hash of both conversations out.
    flood = [ev for i in range(40) for ev in paired("flood", f"f{i}", ts=4)]
    out += run(e, [ev for ev in flood if ev.is_call]) + run(e, [ev for ev in flood if not ev.is_call])
    out += e.advance(10_000.0)  # the held results' grace is over: orphans, nothing held any more
    assert e.open_calls == e.pending_results == e.held_bytes == 0
    assert reasons(out).count(("orphan_result", "no_call")) == 41
    convs = e._convs
    assert not convs["busy"].tags.seen and not convs["quiet"].tags.seen
    assert container_bytes(convs["busy"]) == container_bytes(convs["quiet"])
    assert container_bytes(convs["quiet"]) == container_bytes(Conversation("fresh", tags=convs["quiet"].tags))
