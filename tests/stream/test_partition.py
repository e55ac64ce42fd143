"""The per-partition core of the sidecar without a broker: commit rule, checkpointed replay, wall tick.

The central property: a partition rebuilt from a checkpoint and fed the log again from the committed
offset emits *exactly* what the original would have emitted after that commit, nothing twice and
nothing lost; a plain replay (no checkpoint) provably does not.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_pairer.adapters.kafka.rekeyer import conversation_key
from stream_pairer.core.formats import DEFAULT_CONFIG
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint, decode, encode
from stream_pairer.stream.partition import (
    Emitted,
    OutputTopics,
    PartitionState,
    consumed_offset,
    lineage_headers,
    source_from_headers,
)
from tests.core.time_helpers import canonical as rec
from tests.engine_helpers import DecodedPartitionState, Msg, stream_pipeline
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline

T0 = 1_741_944_400_000  # event times in ms
TOPICS = OutputTopics.for_input("in")
# Orphan reasons that need the id's closing remembered: a replay that starts after the closing
# gives `no_call` instead (README, DELIVERY.md "Limits").
SECOND_RESULTS = ("duplicate_result", "fifo_conflict", "late_result")


def log_of(values: list[bytes | None], key: bytes | None = b"k") -> list[Msg]:
    return [Msg(i, key, v, T0 + i) for i, v in enumerate(values)]


def state(
    start: int | None = 0, restore: Checkpoint | None = None, config: EngineConfig | None = None,
    metrics: Metrics | None = None,
) -> PartitionState:  # fmt: skip
    cfg = config or EngineConfig(call_timeout_ms=60_000, result_grace_ms=5_000)
    return DecodedPartitionState(
        "in",
        0,
        stream_pipeline(cfg, observer=metrics),
        TOPICS,
        start_offset=start,
        restore=restore,
        wall_ms=0.0,
    )


def identities(out: list[Emitted]) -> Counter[tuple[Any, ...]]:
    """Each input event an output accounts for: (offset, block), or (offset, None) for a dead letter."""
    seen: Counter[tuple[Any, ...]] = Counter()
    for e in out:
        r = e.record
        if r["kind"] == "dead_letter":
            seen[(r["source"]["offset"], None)] += 1
            continue
        for side in [r["call"], r["result"]] if r["kind"] == "pair" else [r["event"]]:
            seen[(side["source"]["offset"], side["block"])] += 1
    return seen


def test_outputs_are_routed_and_keyed() -> None:
    s = state()
    log = log_of([rec("c1", "tool_call", "a", T0), rec("c1", "tool_result", "a", T0 + 5), b"not json"])
    out = s.feed(log, wall_ms=0.0)
    assert [(e.topic, e.key, e.record["kind"]) for e in out] == [
        ("in.pairs", b"c1", "pair"),
        ("in.dead-letter", b"k", "dead_letter"),  # dead letters keep the input key
    ]
    assert out[0].record["call"]["source"] == {"topic": "in", "partition": 0, "offset": 0}


def test_commit_never_passes_the_oldest_held_event() -> None:
    s = state(start=10)
    log = [
        Msg(10, b"k", rec("c1", "tool_call", "a", T0), T0),
        Msg(11, b"k", rec("c2", "tool_call", "b", T0), T0),
        Msg(12, b"k", rec("c2", "tool_result", "b", T0 + 1), T0),
    ]
    assert s.commit_offset() == 10  # nothing read yet: the committed offset stands
    s.feed(log, wall_ms=0.0)
    assert s.commit_offset() == 10  # call "a" at offset 10 is still open
    s.feed([Msg(13, b"k", rec("c1", "tool_result", "a", T0 + 2), T0)], wall_ms=0.0)
    assert s.commit_offset() == 14  # all paired: past the last processed record
    assert state(start=None).commit_offset() is None  # no commit and nothing read: nothing to commit


def test_records_before_the_next_offset_are_ignored() -> None:
    s = state(start=5)
    s.feed([Msg(5, b"k", rec("c", "tool_call", "a", T0), T0)], wall_ms=0.0)
    out = s.feed([Msg(5, b"k", rec("c", "tool_call", "a", T0), T0)], wall_ms=0.0)  # a stale refetch
    assert out == [] and s.pipeline.gauges().open_calls == 1


def test_wall_tick_times_out_a_call_on_a_quiet_partition() -> None:
    s = state(config=EngineConfig(call_timeout_ms=2_000))
    s.feed(log_of([rec("c1", "tool_call", "a", T0)]), wall_ms=1_000.0)
    assert s.tick(1_000.0, caught_up=True) == []  # processing time starts: the call's timeout too
    assert s.tick(2_000.0, caught_up=True) == []  # 1 s of silence: not yet
    assert s.tick(10_000.0, caught_up=False) == []  # a backlog: processing time stands still
    assert s.tick(11_000.0, caught_up=True) == []  # counting again from here: 1 s so far
    out = s.tick(12_000.0, caught_up=True)
    assert [(e.record["kind"], e.record["reason"]) for e in out] == [("orphan_call", "timeout")]
    assert s.commit_offset() == 1 and s.dirty


def test_quiet_conversation_is_closed_by_the_tick_alone_while_others_stay_busy() -> None:
    """A conversation that stops (its clock frozen) on a partition where others go on: no record of
    its own ever moves its clock again, and other conversations' clocks must not expire it; the
    processing-time tick does, after the timeout."""
    s = state(config=EngineConfig(call_timeout_ms=5_000, result_grace_ms=1_000))
    s.tick(0.0, caught_up=True)
    log = [Msg(0, b"q", rec("quiet", "tool_call", "q1", T0), T0)]
    # an id-less result with no call of its name: held for the grace
    log += [Msg(1, b"q", rec("quiet", "tool_result", None, T0 + 1, name="fetch"), T0 + 1)]
    out: list[Emitted] = s.feed(log, wall_ms=0.0)
    ticked: list[Emitted] = []
    for i in range(2, 12):  # another conversation, hours ahead in event time, keeps pairing
        busy_ts = T0 + 3_600_000 * i
        log = [Msg(2 * i, b"b", rec("busy", "tool_call", f"b{i}", busy_ts), busy_ts),
               Msg(2 * i + 1, b"b", rec("busy", "tool_result", f"b{i}", busy_ts + 5), busy_ts)]  # fmt: skip
        out += s.feed(log, wall_ms=1_000.0 * i)
        ticked += s.tick(1_000.0 * i, caught_up=True)
    assert all(e.record["conversation_id"] == "busy" for e in out)  # records never expire "quiet"
    assert [(e.record["kind"], e.record.get("reason"), e.record["conversation_id"]) for e in ticked] == [
        ("orphan_result", "no_call", "quiet"),  # grace: 1 s of processing time
        ("orphan_call", "timeout", "quiet"),  # timeout: 5 s of processing time
    ]
    assert sum(1 for e in out if e.record["kind"] == "pair") == 10
    assert s.pipeline.gauges().open_calls == s.pipeline.gauges().pending_results == 0


def test_checkpoint_describes_the_held_state() -> None:
    s = state(start=0)
    s.feed(
        log_of(
            [
                rec("c1", "tool_call", "a", T0),
                rec("c2", "tool_call", "b", T0),
                rec("c2", "tool_result", "b", T0),
            ]
        ),
        wall_ms=0.0,
    )
    cp = s.checkpoint("g", "tok")
    assert cp is not None
    assert (cp.committed, cp.processed, cp.held, cp.processing_ms) == (0, 2, ((0, 0),), None)
    s.tick(123.0, caught_up=True)
    cp = s.checkpoint("g", "tok")
    assert cp is not None and cp.processing_ms == 0.0  # P started at the state's creation (wall 0)
    assert decode(encode(cp)) == cp


def test_checkpoint_held_is_sorted_and_unique_in_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine yields held events in arrival order; the checkpoint must not depend on it."""
    s = state(start=0)
    s.feed(log_of([rec(f"c{i}", "tool_call", f"id{i}", T0) for i in range(4)]), wall_ms=0.0)
    held = s.pipeline.held_positions()
    shuffled = [held[2], held[0], held[3], held[1], held[0], held[2]]  # and twice some
    monkeypatch.setattr(s.pipeline, "held_positions", lambda: list(shuffled))
    cp = s.checkpoint("g", "tok")
    assert cp is not None
    assert cp.held == ((0, 0), (1, 0), (2, 0), (3, 0))


def _scenario(seed: int, n: int) -> list[bytes | None]:
    """Interleaved conversations: id pairs near and far, id-less FIFO results, unknown ids, garbage,
    chat lines without tool events, parallel calls; every id unique (see the closed-id note below)."""
    rnd = random.Random(seed)
    open_calls: dict[str, list[str]] = {}
    values: list[bytes | None] = []
    ts = T0
    for i in range(n):
        ts += rnd.randint(0, 50)
        conv = f"c{rnd.randint(0, 4)}"
        calls = open_calls.setdefault(conv, [])
        roll = rnd.random()
        if roll < 0.45 or not calls:
            cid = None if rnd.random() < 0.15 else f"id{i}"
            calls.append(cid or "")
            values.append(rec(conv, "tool_call", cid, ts, name=rnd.choice(["search", "fetch", None])))
        elif roll < 0.8:
            cid = calls.pop(rnd.randrange(len(calls)))
            values.append(rec(conv, "tool_result", cid or None, ts, name=None))
        elif roll < 0.88:
            values.append(rec(conv, "tool_result", None, ts, name=rnd.choice(["search", None])))
        elif roll < 0.93:
            values.append(rec(conv, "tool_result", f"unknown{i}", ts, name=None))
        elif roll < 0.97:
            values.append(orjson.dumps({"conversation_id": conv, "role": "user", "content": "hi"}))
        else:
            values.append(rnd.choice([b"{broken", None, b"[1,2]"]))
    return values


def _run(s: PartitionState, log: list[Msg], cut: int) -> tuple[list[Emitted], list[Emitted]]:
    before = s.feed(log[:cut], wall_ms=0.0)
    after = s.feed(log[cut:], wall_ms=0.0)
    return before, after


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(20, 160), st.data())
def test_checkpointed_replay_emits_exactly_what_the_original_would_have(
    seed: int, n: int, data: st.DataObject
) -> None:
    log = log_of(_scenario(seed, n))
    cut = data.draw(st.integers(1, n))
    original = state()
    _, after = _run(original, log, cut)
    # The checkpoint as committed at `cut`: taken from a twin that processed exactly log[:cut].
    twin = state()
    twin.feed(log[:cut], wall_ms=0.0)
    cp = twin.checkpoint("g", "tok")
    assert cp is not None
    cp = decode(encode(cp))  # what a new owner reads back from the topic

    replayed = state(start=cp.committed, restore=cp)
    out = replayed.feed(log[cp.committed :], wall_ms=0.0)
    rest_original = after + original.flush("shutdown")
    rest_replayed = out + replayed.flush("shutdown")
    # Nothing twice, nothing lost: the same input events end up in outputs after the restart...
    assert identities(rest_replayed) == identities(rest_original)
    before = identities(_run(state(), log, cut)[0])
    total = before + identities(rest_replayed)
    assert all(v == 1 for v in total.values()), {k: v for k, v in total.items() if v != 1}
    # ... with the same pairs, and the same orphans except one documented case: a result whose id
    # was closed *before* the committed offset is one of SECOND_RESULTS originally, but the rebuilt
    # state never saw that id close, so it waits out the grace as `no_call`.
    assert [e.record for e in out if e.record["kind"] == "pair"] == [
        e.record for e in after if e.record["kind"] == "pair"
    ]
    fate_a = {k: r.record.get("reason") for r in rest_original for k in identities([r])}
    fate_b = {k: r.record.get("reason") for r in rest_replayed for k in identities([r])}
    for k, reason in fate_a.items():
        if fate_b[k] != reason:
            assert reason in SECOND_RESULTS and fate_b[k] in ("no_call", "shutdown")
    if all(r.record.get("reason") not in SECOND_RESULTS for r in after):
        assert [e.record for e in out] == [e.record for e in after]  # then exactly the same records
    assert replayed.commit_offset() == original.commit_offset() or not original.pipeline.held_positions()


def test_plain_replay_without_checkpoint_would_pair_wrongly_and_twice() -> None:
    """Why checkpoints exist: replaying from the commit without them re-emits and mis-pairs."""
    log = log_of(
        [
            rec("c", "tool_call", None, T0, name="search"),  # 0: id-less call, paired by 2
            rec("c", "tool_call", "x", T0, name="search"),  # 1: open at the commit (C = 1)
            rec("c", "tool_result", None, T0 + 1, name="search"),  # 2: FIFO -> call 0
            rec("c", "tool_result", "x", T0 + 2),  # 3
        ]
    )
    original = state()
    first = original.feed(log[:3], wall_ms=0.0)
    cp = original.checkpoint("g", "tok")
    assert cp is not None and cp.committed == 1 and cp.held == ((1, 0),)
    assert [e.record["call"]["source"]["offset"] for e in first] == [0]

    plain = state(start=1)
    wrong = plain.feed(log[1:], wall_ms=0.0)
    # Result 2 is emitted a second time, and now FIFO-paired with call 1 (which was not its partner);
    # call 1's real result is then a `fifo_conflict` orphan (the sign that this FIFO pair is wrong).
    assert [(e.record["kind"], e.record.get("reason")) for e in wrong] == [
        ("pair", None),
        ("orphan_result", "fifo_conflict"),
    ]
    assert (wrong[0].record["call"]["source"]["offset"], wrong[0].record["result"]["source"]["offset"]) == (
        1,
        2,
    )

    good = state(start=1, restore=cp).feed(log[1:], wall_ms=0.0)
    assert [(e.record["call"]["source"]["offset"], e.record["result"]["source"]["offset"]) for e in good] == [
        (1, 3)
    ]


def test_commit_during_a_replay_keeps_the_events_not_yet_replayed() -> None:
    calls = [rec("c", "tool_call", "a", T0), rec("d", "tool_call", "b", T0), rec("d", "tool_call", "z", T0)]
    log = log_of(calls + [orjson.dumps({"conversation_id": "e", "role": "user", "content": "hi"})] * 3)
    s0 = state()
    s0.feed(log, wall_ms=0.0)
    cp = s0.checkpoint("g", "t1")
    assert cp is not None and cp.held == ((0, 0), (1, 0), (2, 0)) and cp.processed == 5
    s1 = state(start=0, restore=cp)
    s1.feed(log[:1], wall_ms=0.0)  # crash again after replaying only offset 0
    assert s1.restoring
    cp2 = s1.checkpoint("g", "t2")
    assert cp2 is not None
    assert (cp2.committed, cp2.processed, cp2.held) == (0, 5, cp.held)
    assert s1.tick(10**9, caught_up=True) == []  # no wall tick while the replay rebuilds state
    s1.feed(log[1:], wall_ms=0.0)
    assert not s1.restoring and s1.pipeline.gauges().open_calls == 3


def test_record_metrics_count_formats_and_skips() -> None:
    m = Metrics()
    s = state(metrics=m)
    s.feed(
        log_of(
            [
                rec("c", "tool_call", "a", T0),
                orjson.dumps({"conversation_id": "c", "role": "user", "content": "x"}),
            ]
        ),
        wall_ms=0.0,
    )
    get = m.registry.get_sample_value
    assert get("stream_pairer_records_read_total", {"format": "canonical"}) == 1
    assert get("stream_pairer_events_read_total", {"format": "canonical", "type": "tool_call"}) == 1
    assert get("stream_pairer_records_skipped_total") == 1


def test_evictions_are_reported_as_deltas() -> None:
    m = Metrics()
    s = state(config=EngineConfig(max_calls_per_conversation=1), metrics=m)
    s.feed(log_of([rec("c", "tool_call", f"a{i}", T0) for i in range(4)]), wall_ms=0.0)
    s.feed([Msg(4, b"k", rec("c", "tool_call", "a9", T0), T0)], wall_ms=0.0)
    assert (
        m.registry.get_sample_value("stream_pairer_evictions_total", {"limit": "calls_per_conversation"}) == 4
    )


def test_repartitioned_records_keep_their_original_lineage_and_commit_by_consumed_offset() -> None:
    s = DecodedPartitionState(
        "in.by-conversation", 2, stream_pipeline(), TOPICS, start_offset=40, lineage_headers=True
    )
    log = [
        Msg(40, b"c", rec("c", "tool_call", "a", T0), T0, tuple(lineage_headers("in", 7, 1234))),
        Msg(41, b"c", rec("c", "tool_call", "b", T0), T0, tuple(lineage_headers("in", 3, 99))),
        Msg(42, b"c", rec("c", "tool_result", "a", T0), T0, ()),  # written by something else: own lineage
    ]
    out = s.feed(log, wall_ms=0.0)
    assert out[0].record["call"]["source"] == {
        "topic": "in", "partition": 7, "offset": 1234,
        "via": {"topic": "in.by-conversation", "partition": 2, "offset": 40},
    }  # fmt: skip
    assert out[0].record["result"]["source"] == {"topic": "in.by-conversation", "partition": 2, "offset": 42}
    assert s.commit_offset() == 41  # call "b" is held: the consumed offset counts, not its origin's 99
    cp = s.checkpoint("g", "t")
    assert cp is not None and cp.held == ((41, 0),)


@pytest.mark.parametrize(
    ("value", "key", "expected"),
    [
        (rec("conv-9", "tool_call", "a", T0), b"user-1", b"conv-9"),  # the record's own field wins
        (orjson.dumps({"type": "tool_call", "id": "a", "name": "n"}), b"user-1", b"user-1"),  # key fallback
        (b"{broken", b"k", b"k"),  # unreadable: forwarded as it was, dead-lettered by stage two
        (b"[1]", None, None),
        (None, b"k", b"k"),
    ],
)
def test_repartition_key_is_the_conversation_id(
    value: bytes | None, key: bytes | None, expected: bytes | None
) -> None:
    assert conversation_key(value, key, DEFAULT_CONFIG) == expected


def test_lineage_headers_round_trip_and_garbage_falls_back() -> None:
    via = {"topic": "x", "partition": 0, "offset": 5}
    assert source_from_headers(lineage_headers("in", 1, 2), via) == {
        "topic": "in",
        "partition": 1,
        "offset": 2,
        "via": via,
    }
    assert source_from_headers([("sp-src-topic", b"in")], via) == via
    assert source_from_headers([*lineage_headers("in", 1, 2)[:2], ("sp-src-offset", b"NaN")], via) == via
    assert source_from_headers(None, via) == via


def test_held_events_deleted_before_the_replay_are_reported() -> None:
    s0 = state()
    log = log_of(
        [rec("c", "tool_call", "a", T0), rec("c", "tool_call", "b", T0), rec("d", "tool_call", "z", T0)]
    )
    s0.feed(log, wall_ms=0.0)
    cp = s0.checkpoint("g", "t")
    assert cp is not None and cp.held == ((0, 0), (1, 0), (2, 0))
    s1 = state(start=0, restore=cp)
    s1.feed(log[2:], wall_ms=0.0)  # offsets 0 and 1 were deleted by retention before the replay
    assert s1.missed == [(0, 0), (1, 0)] and not s1.restoring
    assert s1.pipeline.gauges().open_calls == 1


# ------------------------------------------------------------------ replay and event time (issue 11)


def _replay_after(
    log: list[Msg], cut: int, config: EngineConfig, cp: Checkpoint | None = None
) -> list[Emitted]:
    """What a partition rebuilt from the checkpoint taken at `cut` emits for the rest of the log."""
    if cp is None:
        twin = state(config=config)
        twin.feed(log[:cut], wall_ms=0.0)
        cp = twin.checkpoint("g", "tok")
        assert cp is not None
        cp = decode(encode(cp))
    replayed = state(start=cp.committed, restore=cp, config=config)
    return replayed.feed(log[cp.committed :], wall_ms=0.0) + replayed.flush("shutdown")


def test_replay_restores_the_conversation_clock_so_event_time_expiries_repeat_exactly() -> None:
    config = EngineConfig(call_timeout_ms=60_000, result_grace_ms=5_000)
    log = log_of(
        [
            rec("A", "tool_call", "x", T0 + 10_000),
            rec("A", "tool_result", "x", T0 + 10_050),  # A's clock: T0 + 10_050
            rec("A", "tool_call", "old", T0 - 100_000),  # stamped long before: past its deadline,
            # but held: timers are checked when the clock moves (cut here: only this is held)
            rec("A", "tool_call", "y", T0 + 5_000),  # older than the clock: does not move it
            rec("A", "tool_result", "old", T0 - 99_000),
            rec("A", "tool_call", "z", T0 + 20_000),  # moves the clock: "y" is not due, nothing fires
        ]
    )
    original = state(config=config)
    original.feed(log[:3], wall_ms=0.0)
    cp = original.checkpoint("g", "tok")
    assert cp is not None and cp.held == ((2, 0),)
    assert cp.clocks == ((2, 0, float(T0 + 10_050)),)  # the replay could not rebuild it from "old"
    first_pass = original.feed(log[3:], wall_ms=0.0) + original.flush("shutdown")
    fates = [
        (e.record["kind"], e.record.get("reason"), (e.record.get("call") or e.record["event"])["id"])
        for e in first_pass
    ]
    assert fates == [
        ("pair", None, "old"),
        ("orphan_call", "shutdown", "y"),
        ("orphan_call", "shutdown", "z"),
    ]

    assert [e.record for e in _replay_after(log, 3, config, decode(encode(cp)))] == [
        e.record for e in first_pass
    ]
    # Without the clock, the replayed conversation starts from "old"'s time, "y" moves it past
    # "old"'s deadline, and the replay emits what the first pass never did.
    no_clock = _replay_after(log, 3, config, replace(cp, clocks=()))
    assert [(e.record["kind"], e.record.get("reason")) for e in no_clock][:2] == [
        ("orphan_call", "timeout"),
        ("orphan_result", "late_result"),
    ]


def _skewed_scenario(seed: int, n: int) -> list[bytes | None]:
    """Conversations hours apart in event time, each with its own jittered clock (events up to 1.5 s
    early or late, so up to 3 s out of order: less than the 4 s timeout), short timers: event-time
    expiries (timeouts, grace) on every conversation's own clock all through the log.

    Out of order by less than the timeout, an event is never past its deadline when it arrives, and
    a rebuilt conversation's clock (never ahead of the first pass's) moves past a deadline exactly
    when the first pass's does. Events out of order by more than the timeout need the checkpointed
    clock (the test above), and are beyond it in a conversation that held nothing at the commit (see
    DELIVERY.md, *Limits and known differences*)."""
    rnd = random.Random(seed)
    clocks = {f"s{c}": T0 + c * 3 * 3_600_000 - rnd.randint(0, 10**8) for c in range(4)}
    open_calls: dict[str, list[str | None]] = {}
    values: list[bytes | None] = []
    for i in range(n):
        conv = rnd.choice(sorted(clocks))
        clocks[conv] += rnd.randint(0, 1_500)
        ts = clocks[conv] + rnd.randint(-1_500, 1_500)
        calls = open_calls.setdefault(conv, [])
        roll = rnd.random()
        if roll < 0.45 or not calls:
            cid = None if rnd.random() < 0.2 else f"id{i}"
            calls.append(cid)
            name = "fifo_tool" if cid is None else rnd.choice(["search", "fetch"])
            values.append(rec(conv, "tool_call", cid, ts, name=name))
        elif roll < 0.85:
            cid = calls.pop(rnd.randrange(len(calls)))
            values.append(rec(conv, "tool_result", cid, ts, name="fifo_tool" if cid is None else None))
        elif roll < 0.93:
            values.append(rec(conv, "tool_result", None, ts, name=rnd.choice(["search", "weather"])))
        else:
            values.append(rec(conv, "tool_result", f"unknown{i}", ts, name=None))
    return values


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(20, 160), st.data())
def test_replay_gives_the_first_pass_outputs_for_event_time_expiries(
    seed: int, n: int, data: st.DataObject
) -> None:
    config = EngineConfig(call_timeout_ms=4_000, result_grace_ms=1_500)
    log = log_of(_skewed_scenario(seed, n))
    cut = data.draw(st.integers(1, n))
    original = state(config=config)
    original.feed(log[:cut], wall_ms=0.0)
    first_pass = original.feed(log[cut:], wall_ms=0.0) + original.flush("shutdown")
    replayed = _replay_after(log, cut, config)
    assert identities(replayed) == identities(first_pass)
    # The same records in the same order, expiries included, but for the documented exception: a
    # result whose call was closed (timed out) before the cut is a `late_result` on the first pass,
    # and an unknown id, `no_call` after its grace, once rebuilt (see the test above).
    exceptions = [e for e in first_pass if e.record.get("reason") in SECOND_RESULTS]
    if not exceptions:
        assert [e.record for e in replayed] == [e.record for e in first_pass]
        return
    fate = {k: e.record.get("reason") for e in replayed for k in identities([e])}
    for e in first_pass:
        for k in identities([e]):
            if fate[k] != e.record.get("reason"):
                assert e.record["reason"] in SECOND_RESULTS
                assert fate[k] in ("no_call", "shutdown")
    assert [e.record for e in replayed if e.record["kind"] == "pair"] == [
        e.record for e in first_pass if e.record["kind"] == "pair"
    ]


def test_the_engine_keeps_the_held_positions_in_step_with_what_it_holds() -> None:
    """The checkpoint copies the engine's position map instead of walking the held events (issue
    15): the map must equal the walk after every step, through pairs, FIFO pairs, timeouts,
    evictions, superseded calls, a checkpointed replay and a discard."""
    rng = random.Random(15)
    cfg = EngineConfig(call_timeout_ms=5_000, result_grace_ms=1_000, max_conversations=6,
                       max_calls_per_conversation=3)  # fmt: skip

    def walk(st: PartitionState) -> list[tuple[int, int]]:
        return [(consumed_offset(h.event.source), h.event.block) for h in engine(st).held()]

    def engine(st: PartitionState) -> Engine:
        assert isinstance(st.pipeline, Pipeline)  # the Python engine's bookkeeping is under test
        return st.pipeline.engine

    def python_state(restore: Checkpoint | None = None, start: int = 0) -> PartitionState:
        return DecodedPartitionState("in", 0, stream_pipeline(cfg, engine="python"), TOPICS,
                                     start_offset=start, restore=restore, wall_ms=0.0)  # fmt: skip

    st = python_state()
    assert st.pipeline.held_positions() == []  # the first call starts the tracking
    log: list[Msg] = []
    open_ids: list[tuple[str, str]] = []
    for step in range(2500):
        conv, ts = f"c{rng.randrange(10)}", T0 + step * 40
        r = rng.random()
        if r < 0.45:
            cid = f"id{step}" if rng.random() < 0.9 else f"id{step - 1}"  # sometimes a superseding call
            value = rec(conv, "tool_call", cid, ts)
            open_ids.append((conv, cid))
        elif r < 0.85 and open_ids:
            conv, cid = open_ids.pop(rng.randrange(len(open_ids)))
            value = rec(conv, "tool_result", cid, ts)
        elif r < 0.93:
            value = rec(conv, "tool_result", None, ts)  # id-less: FIFO or held for the grace
        else:
            value = rec(conv, "tool_result", f"unknown{step}", ts)
        msg = Msg(step, conv.encode(), value, ts)
        log.append(msg)
        st.feed([msg], float(ts))
        assert st.pipeline.held_positions() == walk(st), step
    assert engine(st).tracks_positions and engine(st).positions  # something is held at the end
    cp = st.checkpoint("g", "t")
    assert cp is not None and list(cp.held) == sorted(walk(st))
    replayed = python_state(restore=cp, start=cp.committed)
    replayed.feed(log[cp.committed :], float(T0 + 2500 * 40))
    assert replayed.pipeline.held_positions() == walk(replayed) == walk(st)
    replayed.pipeline.discard()
    assert engine(replayed).positions == {}
