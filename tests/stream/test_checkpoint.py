"""The replay checkpoint codec and the replay filter that uses it (no broker needed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_pairer.errors import CheckpointError
from stream_pairer.stream.checkpoint import (
    COMPRESS_OVER,
    Checkpoint,
    ReplayFilter,
    decode,
    encode,
    key,
    new_token,
)


def cp(held: list[tuple[int, int]], committed: int = 100, processed: int = 200) -> Checkpoint:
    return Checkpoint("g", "t", 3, committed, processed, 1.7e12, tuple(sorted(set(held))), "tok")


def test_round_trip_keeps_every_field() -> None:
    c = cp([(100, 0), (105, 0), (105, 2), (150, 1), (199, 0)])
    assert decode(encode(c)) == c


def test_empty_held_and_no_stream_time() -> None:
    c = Checkpoint("g", "t", 0, 0, -1, None, (), new_token())
    assert decode(encode(c)) == c


def test_large_checkpoints_are_compressed_and_still_exact() -> None:
    held = [(100 + 3 * i, 0) for i in range(20_000)] + [(100 + 3 * i, 1) for i in range(0, 20_000, 7)]
    c = cp(held, committed=100, processed=100 + 3 * 20_000)
    body = encode(c)
    assert body[:1] == b"Z"
    assert len(body) < COMPRESS_OVER * 10  # 22 857 events: delta encoding + zlib keep it small
    assert decode(body) == c


@given(
    st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 4)), max_size=300),
    st.integers(0, 10),
)
def test_round_trip_property(held: list[tuple[int, int]], base: int) -> None:
    shifted = [(o + base, b) for o, b in held]
    c = cp(shifted, committed=base, processed=base + 5_001)
    assert decode(encode(c)) == c


@pytest.mark.parametrize(
    "value", [b"", b"{", b"Zgarbage", b'{"v": 99}', b'{"v": 1}', b'{"v":1,"committed":"x","held":[]}']
)
def test_garbage_is_a_checkpoint_error(value: bytes) -> None:
    with pytest.raises(CheckpointError):
        decode(value)


def test_metadata_binds_an_offset_commit_to_one_checkpoint() -> None:
    c = cp([(100, 0)])
    assert c.matches(100, c.metadata)
    assert not c.matches(101, c.metadata)  # offsets moved without this checkpoint
    assert not c.matches(100, "sp1:other")  # a later (or earlier) commit's checkpoint
    assert not c.matches(100, "")  # offsets reset by an operator tool
    assert key("g", "t", 3) != key("g", "t", 4) != key("h", "t", 3)


def test_replay_filter_processes_only_held_blocks_then_everything_after_hw() -> None:
    f = ReplayFilter(cp([(100, 0), (103, 1), (103, 2), (107, 0)], committed=100, processed=108))
    assert f.active
    assert f.blocks(100) == {0}
    assert f.first_pending_offset() == 103
    assert f.blocks(101) == frozenset()
    assert f.pending() == [(103, 1), (103, 2), (107, 0)]
    assert f.blocks(103) == {1, 2}
    assert f.pending() == [(107, 0)]
    assert f.blocks(105) == frozenset()
    assert f.blocks(107) == {0}
    assert f.active
    assert f.blocks(108) == frozenset()  # HW itself was emitted
    assert not f.active
    assert f.blocks(109) is None
    assert f.pending() == [] and f.first_pending_offset() is None
    assert f.missed == []


def test_replay_filter_a_gap_past_hw_ends_the_replay() -> None:
    f = ReplayFilter(cp([(100, 0), (104, 0)], committed=100, processed=106))
    assert f.blocks(100) == {0}
    assert f.blocks(110) is None  # offsets 101-109 gone (retention): new input from here
    assert not f.active and f.pending() == []
    assert f.missed == [(104, 0)]  # reported, not silently forgotten


def test_nothing_processed_since_the_commit_means_no_replay() -> None:
    f = ReplayFilter(cp([], committed=100, processed=99))
    assert not f.active
    assert f.blocks(100) is None


clock_values = st.one_of(
    st.integers(-(2**53) + 1, 2**53 - 1).map(float),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(1_700_000_000_000, 1_800_000_000_000).map(lambda ms: ms + 0.001),
)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), clock_values), max_size=40))
def test_conversation_clocks_round_trip_exactly(items: list[tuple[int, int, float]]) -> None:
    """Clocks are delta-encoded between entries; every float must come back bit for bit, or a
    replay would re-derive different event-time deadlines. The one exception is the sign of a zero
    (-0.0 comes back as 0.0): the two compare equal, so every deadline derived from them is equal."""
    offset = 100
    clocks = []
    for step, block, clock in items:
        offset += step
        clocks.append((offset, block, clock))
    c = Checkpoint("g", "t", 3, 100, 300, 12.5, ((100, 0),), "tok", tuple(clocks))
    back = decode(encode(c))
    assert back == c
    assert [repr(x[2] + 0.0) for x in back.clocks] == [repr(x[2] + 0.0) for x in clocks]


def test_a_checkpoint_of_the_single_stream_time_version_still_restores() -> None:
    """Before per-conversation clocks the field was `stream_ms` and there were no clocks."""
    old = b'{"v":1,"group":"g","topic":"t","partition":3,"committed":100,"processed":120,' \
        b'"stream_ms":1741944400000.0,"token":"tok","held":[0,5]}'  # fmt: skip
    c = decode(old)
    assert (c.processing_ms, c.held, c.clocks) == (1741944400000.0, ((100, 0), (105, 0)), ())
