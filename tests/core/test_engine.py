"""Every pairing rule of the core, one behaviour per test."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.engine_helpers import call, key, members, result
from tests.reference.engine import Engine, EngineConfig, held_cost, pair_id


def run(engine: Engine, events: list[Any], flush: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ev in events:
        out += engine.process(ev)
    if flush:
        out += engine.flush()
    return out


def kinds(out: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(r["kind"], r.get("match") or r.get("reason")) for r in out]


def test_id_match_however_far_apart_and_out_of_order() -> None:
    e = Engine()
    a, b = call("c1", "toolu_A", ts=1000), call("c1", "toolu_B", ts=1001)
    noise = [call(f"other{i}", f"x{i}", ts=1002 + i) for i in range(50)]
    rb, ra = result("c1", "toolu_B", ts=2000), result("c1", "toolu_A", ts=2500)
    out = run(e, [a, b, *noise, rb, ra])
    pairs = [r for r in out if r["kind"] == "pair"]
    assert [(p["call"]["id"], p["result"]["id"], p["match"]) for p in pairs] == [
        ("toolu_B", "toolu_B", "id"),
        ("toolu_A", "toolu_A", "id"),
    ]
    assert pairs[1]["latency_ms"] == 1500
    assert pairs[1]["fifo_by"] is None
    assert e.open_calls == 50


def test_id_pairing_removes_call_from_fifo_queue() -> None:
    e = Engine()
    out = run(
        e, [call("c", "a", ts=1), call("c", None, ts=2), result("c", "a", ts=3), result("c", None, ts=4)]
    )
    pairs = [r for r in out if r["kind"] == "pair"]
    assert [(p["call"]["id"], p["match"]) for p in pairs] == [("a", "id"), (None, "fifo")]


def test_fifo_pairs_oldest_open_call_when_result_has_no_id() -> None:
    e = Engine()
    c1, c2 = call("c", None, name="f", ts=1), call("c", None, name="f", ts=2)
    out = run(e, [c1, c2, result("c", None, ts=3), result("c", None, ts=4)])
    assert [(p["call"]["source"]["line"], p["match"], p["fifo_by"]) for p in out] == [
        (c1.source["line"], "fifo", "order"),
        (c2.source["line"], "fifo", "order"),
    ]


def test_fifo_prefers_oldest_call_with_same_name() -> None:
    e = Engine()
    c1, c2 = call("c", None, name="weather", ts=1), call("c", None, name="search", ts=2)
    out = run(e, [c1, c2, result("c", None, name="search", ts=3)])
    assert out[0]["call"]["name"] == "search" and out[0]["fifo_by"] == "name"


def test_named_result_never_pairs_with_a_differently_named_call() -> None:
    e = Engine(EngineConfig(result_grace_ms=1_000))
    out = run(e, [call("c", None, name="weather", ts=1), result("c", None, name="search", ts=2)])
    assert out == []  # held for the grace: its own call may still come
    assert e.open_calls == 1 and e.pending_results == 1
    out = run(e, [call("c", "z", name="other", ts=1_002)])  # the conversation's clock passes the grace
    assert kinds(out) == [("orphan_result", "no_call")]
    assert e.open_calls == 2


def test_named_result_falls_back_to_oldest_unnamed_call() -> None:
    e = Engine()
    out = run(e, [call("c", None, name=None, ts=1), result("c", None, name="search", ts=2)])
    assert (out[0]["match"], out[0]["fifo_by"]) == ("fifo", "order")


def test_idless_result_with_no_open_call_is_an_orphan_not_dropped() -> None:
    e = Engine()
    assert run(e, [result("c", None, ts=1)]) == []  # waits the grace for a late call
    out = e.flush("end_of_input", result_reason="no_call")
    assert kinds(out) == [("orphan_result", "no_call")]
    assert out[0]["event"]["content"] == "ok"


def test_idless_result_before_its_call_is_held_then_fifo_paired() -> None:
    e = Engine(EngineConfig(result_grace_ms=5_000))
    r_search, r_any = result("c", None, name="search", ts=10), result("c", None, name=None, ts=11)
    assert run(e, [r_search, r_any]) == []
    assert e.pending_results == 2
    c_fetch, c_search = call("c", "f1", name="fetch", ts=12), call("c", None, name="search", ts=13)
    out = run(e, [c_fetch, c_search])
    # The named call takes the result of its name; the other takes the oldest unnamed one.
    assert [(p["call"]["source"], p["result"]["source"], p["match"], p["fifo_by"]) for p in out] == [
        (c_fetch.source, r_any.source, "fifo", "order"),
        (c_search.source, r_search.source, "fifo", "name"),
    ]
    assert out[1]["latency_ms"] == -3  # the events' own timestamps, whatever the arrival order
    assert e.pending_results == e.open_calls == e.held_bytes == 0


def test_idless_held_result_never_pairs_a_differently_named_call_nor_beats_an_id_match() -> None:
    e = Engine(EngineConfig(result_grace_ms=5_000))
    run(e, [result("c", None, name="search", ts=1), result("c", "a", ts=2)])
    out = run(e, [call("c", "a", name="search", ts=3), call("c", None, name="weather", ts=4)])
    assert kinds(out) == [("pair", "id")]  # the id-bearing held result wins for call "a"
    assert e.pending_results == 1 and e.open_calls == 1


def test_unanswered_idless_result_becomes_no_call_after_grace_on_its_conversation_clock() -> None:
    e = Engine(EngineConfig(result_grace_ms=5_000, call_timeout_ms=10**9))
    run(e, [result("c", None, name="search", ts=1_000)])
    assert run(e, [call("other", None, name="search", ts=10**12)]) == []  # another clock: no effect
    assert run(e, [call("c", "x", name="weather", ts=5_999)]) == []
    assert kinds(run(e, [call("c", "y", name="weather", ts=6_000)])) == [("orphan_result", "no_call")]


def test_unknown_id_is_never_fifo_paired_and_waits_for_late_call() -> None:
    e = Engine(EngineConfig(result_grace_ms=10_000))
    open_call = call("c", None, ts=1)
    out = run(e, [open_call, result("c", "late", ts=2)])
    assert out == []  # held, not stolen by the open id-less call
    out = run(e, [call("c", "late", ts=3)])
    assert kinds(out) == [("pair", "id")]
    assert e.open_calls == 1 and e.pending_results == 0


def test_unknown_id_becomes_orphan_after_grace() -> None:
    e = Engine(EngineConfig(result_grace_ms=5_000))
    assert run(e, [result("c", "ghost", ts=1_000)]) == []
    assert run(e, [call("c", "x", ts=5_999)]) == []
    out = run(e, [call("c", "y", ts=6_000)])  # its conversation's clock reaches ts + grace
    assert kinds(out) == [("orphan_result", "no_call")]
    assert e.pending_results == 0


def test_unknown_id_becomes_orphan_after_grace_in_processing_time() -> None:
    e = Engine(EngineConfig(result_grace_ms=5_000))
    e.advance(100_000.0)  # processing time: unrelated to the events' own times
    assert run(e, [result("c", "ghost", ts=1_000)]) == []
    assert e.advance(104_999) == []
    out = e.advance(105_000)
    assert kinds(out) == [("orphan_result", "no_call")]
    assert e.pending_results == 0 and e.held_bytes == 0


def test_duplicate_result_after_pair() -> None:
    out = run(Engine(), [call("c", "a", ts=1), result("c", "a", ts=2), result("c", "a", ts=3)])
    assert kinds(out) == [("pair", "id"), ("orphan_result", "duplicate_result")]


@pytest.mark.parametrize("result_first", [True, False], ids=["idless-result-first", "call-first"])
def test_result_for_an_id_taken_by_a_fifo_pair_is_a_fifo_conflict(result_first: bool) -> None:
    """The id's call was closed by position with an id-less result, so the first result carrying the
    id is not a second result (`duplicate_result`): it says the FIFO pair is probably wrong. Both
    orders of the FIFO pair (id-less result held early, or call open first) close the id the same."""
    stray, c = result("c", None, name="f", ts=1), call("c", "a2", name="f", ts=2)
    events = [stray, c] if result_first else [c, stray]
    out = run(Engine(), [*events, result("c", "a2", ts=3), result("c", "a2", ts=4)])
    conflict = ("orphan_result", "fifo_conflict")
    assert kinds(out) == [("pair", "fifo"), conflict, conflict]


def test_id_pair_then_the_id_again_stays_a_duplicate_result() -> None:
    """Only a FIFO closing makes a conflict: an id paired by id and then FIFO traffic beside it
    leaves a repeated result for that id a `duplicate_result`."""
    events = [call("c", "a", ts=1), result("c", "a", ts=2), call("c", None, ts=3), result("c", None, ts=4)]
    out = run(Engine(), [*events, result("c", "a", ts=5)])
    assert kinds(out) == [("pair", "id"), ("pair", "fifo"), ("orphan_result", "duplicate_result")]


def test_a_new_call_reusing_a_fifo_closed_id_is_paired_by_id() -> None:
    """A call that reuses the id starts afresh (the closed memory forgets it): its result pairs by id,
    and only a result after that is a `duplicate_result`."""
    events = [result("c", None, name="f", ts=1), call("c", "a", name="f", ts=2), call("c", "a", ts=3)]
    out = run(Engine(), [*events, result("c", "a", ts=4), result("c", "a", ts=5)])
    assert kinds(out) == [("pair", "fifo"), ("pair", "id"), ("orphan_result", "duplicate_result")]


def test_duplicate_results_held_before_late_call() -> None:
    e = Engine()
    out = run(e, [result("c", "a", ts=1), result("c", "a", ts=2), call("c", "a", ts=3)])
    assert kinds(out) == [("pair", "id"), ("orphan_result", "duplicate_result")]
    assert e.pending_results == 0


def test_late_result_after_call_timed_out() -> None:
    e = Engine(EngineConfig(call_timeout_ms=1_000))
    out = run(e, [call("c", "a", ts=0), call("c", "b", ts=5_000), result("c", "a", ts=5_500)])
    assert kinds(out) == [("orphan_call", "timeout"), ("orphan_result", "late_result")]


def test_another_conversations_clock_never_times_out_a_call() -> None:
    e = Engine(EngineConfig(call_timeout_ms=1_000))
    out = run(e, [call("c", "a", ts=0), call("d", "b", ts=5_000), result("c", "a", ts=500)])
    assert kinds(out) == [("pair", "id")]


def test_out_of_order_result_before_its_call_and_an_old_call_still_pair() -> None:
    e = Engine(EngineConfig(call_timeout_ms=1_000, result_grace_ms=1_000))
    out = run(e, [result("c", "a", ts=990), call("c", "a", ts=1_000)])  # result stamped first
    assert kinds(out) == [("pair", "id")] and out[0]["latency_ms"] == -10
    # A call stamped long before the conversation's clock, its result right behind it: timers
    # are checked when the clock moves, so the pair is made before the call could expire.
    out = run(e, [call("c", "b", ts=3_000), call("c", "old", ts=100), result("c", "old", ts=150)])
    assert kinds(out) == [("pair", "id")]
    out = run(e, [call("c", "d", ts=4_100)])
    assert kinds(out) == [("orphan_call", "timeout")]  # "b": 3_000 + 1_000 <= 4_100


def test_second_call_with_open_id_supersedes_first() -> None:
    e = Engine()
    first, second = call("c", "a", ts=1), call("c", "a", ts=2)
    out = run(e, [first, second, result("c", "a", ts=3)])
    assert kinds(out) == [("orphan_call", "superseded"), ("pair", "id")]
    assert out[0]["event"]["source"] == first.source
    assert out[1]["call"]["source"] == second.source


def test_call_timeout_is_event_time_and_wall_tick_fires_it() -> None:
    e = Engine(EngineConfig(call_timeout_ms=60_000))
    assert run(e, [call("c", "a", ts=0)]) == []
    # no further input: only a tick (the adapter's processing time) can emit the unanswered call;
    # P is counted from the first tick for what was held before it
    assert e.advance(5_000) == []
    assert e.advance(64_999) == []
    out = e.advance(65_000)
    assert kinds(out) == [("orphan_call", "timeout")]
    assert out[0]["ts"] == "1970-01-01T00:00:00.000Z"
    assert run(e, [call("c", "b", ts=10)]) == []  # held at P = 65_000
    assert e.advance(124_999) == []
    assert kinds(e.advance(125_000)) == [("orphan_call", "timeout")]


def test_processing_time_never_comes_from_event_time() -> None:
    e = Engine(EngineConfig(call_timeout_ms=60_000))
    e.advance(1_000.0)
    run(e, [call("c", "a", ts=0), call("d", "b", ts=10**13)])  # far-future record, other conversation
    assert e.processing_ms == 1_000.0
    assert e.advance(60_999) == []
    assert sorted(kinds(e.advance(61_000))) == [("orphan_call", "timeout")] * 2


def test_undated_events_take_their_conversation_clock() -> None:
    e = Engine(EngineConfig(call_timeout_ms=1_000))
    out = run(e, [call("c", None, ts=None), call("c", "a", ts=50_000), result("c", "a", ts=50_010)])
    assert kinds(out) == [("pair", "id")]  # the undated call had no time: not expired by 50_000
    out = run(e, [call("c", "u", ts=None), call("c", "v", ts=51_010)])
    assert [(r["event"]["id"], r["reason"], r["ts"]) for r in out] == [
        ("u", "timeout", "1970-01-01T00:00:50.010Z")  # held at its conversation's clock
    ]
    out = e.flush("end_of_input")
    assert [(r["event"]["id"], r["ts"]) for r in out] == [
        (None, None),  # no time known: null, not 1970
        ("v", "1970-01-01T00:00:51.010Z"),
    ]


def test_same_id_in_two_conversations_pairs_within_each() -> None:
    # a resumed Claude Code session copies history under a new sessionId
    e = Engine()
    out = run(
        e,
        [
            call("s1", "toolu_X", ts=1),
            call("s2", "toolu_X", ts=2),
            result("s2", "toolu_X", ts=3),
            result("s1", "toolu_X", ts=4),
        ],
    )
    assert [(p["conversation_id"], p["match"]) for p in out] == [("s2", "id"), ("s1", "id")]
    assert out[0]["pair_id"] != out[1]["pair_id"]


def test_conversation_limit_evicts_lru_and_emits() -> None:
    e = Engine(EngineConfig(max_conversations=2))
    out = run(e, [call("a", "1", ts=1), call("b", "2", ts=2), call("a", "3", ts=3), call("c", "4", ts=4)])
    # "b" was least recently used
    assert kinds(out) == [("orphan_call", "evicted")]
    assert out[0]["conversation_id"] == "b"
    assert e.open_conversations == 2 and e.evictions["conversations"] == 1  # one held event evicted


def test_calls_per_conversation_limit_evicts_oldest_call() -> None:
    e = Engine(EngineConfig(max_calls_per_conversation=2))
    first = call("a", "1", ts=1)
    out = run(e, [first, call("a", "2", ts=2), call("a", "3", ts=3)])
    assert kinds(out) == [("orphan_call", "evicted")]
    assert out[0]["event"]["source"] == first.source
    assert e.open_calls == 2


def test_held_bytes_limit_evicts_oldest_held_event() -> None:
    e = Engine(EngineConfig(max_held_bytes=held_cost(100) * 5 // 2))
    first = call("a", "1", ts=1, size=100)
    out = run(e, [first, call("b", "2", ts=2, size=100), call("c", "3", ts=3, size=100)])
    assert kinds(out) == [("orphan_call", "evicted")]
    assert out[0]["event"]["source"] == first.source
    assert e.held_bytes == 2 * held_cost(100)


def test_flush_emits_everything_open_with_reason() -> None:
    e = Engine()
    out = run(e, [call("a", "1", ts=1), call("a", None, ts=2), result("b", "zz", ts=3)], flush=True)
    assert sorted(kinds(out)) == [
        ("orphan_call", "shutdown"),
        ("orphan_call", "shutdown"),
        ("orphan_result", "shutdown"),
    ]
    assert e.open_calls == e.pending_results == e.held_bytes == 0 and e.oldest_held() is None
    out = run(Engine(), [call("a", "1", ts=1), result("b", "zz", ts=3)])
    e2 = Engine()
    run(e2, [call("a", "1", ts=1), result("b", "zz", ts=3)])
    assert sorted(kinds(e2.flush("end_of_input", result_reason="no_call"))) == [
        ("orphan_call", "end_of_input"),
        ("orphan_result", "no_call"),
    ]
    assert out == []


def test_oldest_held_tracks_commit_watermark() -> None:
    e = Engine()
    c1, c2 = call("a", "1", ts=1), call("b", "2", ts=2)
    run(e, [c1, c2])
    held = e.oldest_held()
    assert held is not None and held.event is c1
    run(e, [result("a", "1", ts=3)])
    held = e.oldest_held()
    assert held is not None and held.event is c2


def test_discard_forgets_without_emitting() -> None:
    e = Engine()
    run(e, [call("a", "1", ts=1), result("b", "x", ts=2)])
    assert e.discard() == 2
    assert e.flush() == [] and e.held_bytes == 0


def test_idle_conversation_memory_expires_after_ttl() -> None:
    e = Engine(EngineConfig(conversation_ttl_ms=1_000))
    e.advance(0.0)
    run(e, [call("a", "1", ts=5_000_000), result("a", "1", ts=5_000_010)])  # event time is irrelevant
    assert e.open_conversations == 1
    e.advance(999)
    assert e.open_conversations == 1
    e.advance(1_000)  # TTL is processing time since its last event
    assert e.open_conversations == 0


def test_pair_id_is_deterministic_from_conversation_and_call() -> None:
    c = call("conv", "toolu_1", ts=1)
    assert pair_id("conv", c) == pair_id("conv", c)
    assert pair_id("conv", c) != pair_id("other", c)
    idless = call("conv", None, ts=1)
    assert pair_id("conv", idless) == pair_id("conv", idless)
    assert pair_id("conv", idless) != pair_id("conv", call("conv", None, ts=1))  # another line


def test_a_reused_call_id_gives_two_pairs_two_pair_ids() -> None:
    """JSON-RPC ids restart per connection: `call 7, result 7, call 7, result 7` in one conversation
    is two real pairs, and a downstream dedup by pair_id must keep both."""
    e = Engine()
    out = run(e, [call("c", "7", ts=1), result("c", "7", ts=2), call("c", "7", ts=3), result("c", "7", ts=4)])
    pairs = [r for r in out if r["kind"] == "pair"]
    assert len(pairs) == 2
    assert pairs[0]["pair_id"] != pairs[1]["pair_id"]


def test_same_input_same_output() -> None:
    def scenario() -> list[Any]:
        return [
            call("c", "a", ts=1),
            call("c", None, ts=2),
            result("c", None, ts=3),
            result("c", "zz", ts=4),
            call("c", "b", ts=5),
        ]

    events = scenario()
    a = run(Engine(EngineConfig(result_grace_ms=1)), events, flush=True)
    b = run(Engine(EngineConfig(result_grace_ms=1)), events, flush=True)
    assert a == b
    assert sum(members(a).values()) == len(events)
    assert set(members(a)) == {key(ev) for ev in events}


def test_config_rejects_zero_limits() -> None:
    with pytest.raises(ValueError, match="max_conversations"):
        EngineConfig(max_conversations=0)
    with pytest.raises(ValueError, match="call_timeout_ms"):
        EngineConfig(call_timeout_ms=0)
