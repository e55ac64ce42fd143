"""The compiled core's containers release what the engine-wide bounds take from them.

A Rust hash map (and a deque) keeps its allocation when entries leave, and never shrinks by
itself: a conversation that once remembered many call hashes or closed ids kept tables sized for
that moment after the engine-wide bounds (`max_hashes_total`, `max_closed_ids`) forgot them, and
the sum over 100,000 conversations crept up while every entry count stayed at its bound (the
soak's RSS creep, BENCHMARKS.md). These tests compare an engine with such a history against one
that only ever held the surviving entries: the same capacity, give or take a small table.
`Core.memory()` reports (container, entries, capacity, estimated table bytes).
"""

from __future__ import annotations

import orjson
import pytest

from stream_pairer.core import native
from tests.reference.engine import EngineConfig
from tests.reference.tagging import FailureTagger

BOUND = 200
T0 = 1_750_000_000_000
# A shrunk table keeps at most a power of two above its entries; the reference engine's tables grew
# by insertion. Either way a table of a few entries differs by a handful of slots, never by the
# ~BOUND slots a kept peak costs.
SLACK = 16


def _call(conv: str, i: int) -> bytes:
    return orjson.dumps({
        "conversation_id": conv, "type": "tool_call", "id": f"{conv}-{i}", "name": "lookup",
        "arguments": {"i": i}, "ts": T0 + i,
    })  # fmt: skip


def _result(conv: str, i: int) -> bytes:
    return orjson.dumps({
        "conversation_id": conv, "type": "tool_result", "id": f"{conv}-{i}", "name": "lookup",
        "content": "ok", "ts": T0 + i,
    })  # fmt: skip


def _pipeline() -> native.NativePipeline:
    cfg = EngineConfig(max_closed_ids=BOUND, max_closed_ids_per_conversation=2 * BOUND)
    return native.NativePipeline(cfg, tagger=FailureTagger(max_hashes_total=BOUND))


def _feed(p: native.NativePipeline, records: list[bytes]) -> int:
    n = 0
    for i, r in enumerate(records):
        n += len(p.feed(r, {"file": "t", "line": i}, key=None))
    return n


def _pairs(conv: str, ids: range) -> list[bytes]:
    """Each call then its result: a remembered hash and a closed id per call."""
    return [r for i in ids for r in (_call(conv, i), _result(conv, i))]


def _capacity(p: native.NativePipeline) -> dict[str, tuple[int, int]]:
    return {name: (n, cap) for name, n, cap, _bytes in p.core.memory()}


@pytest.mark.parametrize("survivors", [0, 1, 5])
def test_a_conversation_the_bounds_emptied_keeps_no_table_sized_for_its_past(survivors: int) -> None:
    """`busy` remembers BOUND hashes and closes BOUND ids; `later` then closes BOUND - survivors
    more, so the engine-wide bounds forget all but `survivors` of busy's. The reference engine
    saw only busy's survivors and later's pairs: same entries, and the history costs no more."""
    history = _pipeline()
    outs = _feed(history, _pairs("busy", range(BOUND)) + _pairs("later", range(BOUND - survivors)))
    reference = _pipeline()
    ref_outs = _feed(
        reference, _pairs("busy", range(BOUND - survivors, BOUND)) + _pairs("later", range(BOUND - survivors))
    )
    assert outs == 2 * BOUND - survivors and ref_outs == BOUND  # every call paired
    got, want = _capacity(history), _capacity(reference)
    for name in ("conv.tags.seen", "conv.tags.seen_order", "conv.closed"):
        n, cap = got[name]
        assert n == want[name][0] == BOUND, name  # the bound holds, in both
        assert cap <= want[name][1] + SLACK, (name, got[name], want[name])
    assert history.core.closed_ids == history.core.remembered_calls == BOUND


def test_the_repeat_check_memory_stays_within_its_bounds_while_it_churns() -> None:
    """Many conversations taking turns, each remembering more calls than the engine-wide bound
    leaves it: entries stay at the bound, and capacity does not drift above a few times it (before,
    each conversation's table kept its busiest moment, and the sum grew round after round)."""
    p = _pipeline()
    rounds: list[int] = []
    for r in range(6):
        records: list[bytes] = []
        for c in range(20):
            size = 5 + (c * 7 + r * 13) % 40  # a different busiest moment per conversation and round
            records += _pairs(f"c{c}", range(r * 100, r * 100 + size))
        _feed(p, records)
        n, cap = _capacity(p)["conv.tags.seen"]
        assert n == BOUND
        rounds.append(cap)
    assert max(rounds) <= 4 * BOUND + 20 * SLACK, rounds
    for name in ("conv.tags.seen_order", "conv.closed"):
        n, cap = _capacity(p)[name]
        assert n <= 2 * BOUND + 20 * 4 and cap <= 4 * BOUND + 20 * SLACK, (name, n, cap)
