"""The commit follows what was processed; the held events stay in the checkpoint (issue 25).

Pure: a checkpoint whose held events lie before its committed offset round-trips, names where a
replay starts (in its commit metadata too, for a replay without a readable checkpoint), and a
ReplayFilter over it replays exactly those held events and nothing else.
"""

from __future__ import annotations

import pytest

from stream_pairer.core.config import EngineConfig
from stream_pairer.stream.checkpoint import (
    Checkpoint,
    ReplayFilter,
    decode,
    encode,
    metadata_replay_from,
    replay_offset,
)
from stream_pairer.stream.partition import PartitionState
from tests.engine_helpers import DecodedPartitionState, stream_pipeline
from tests.stream.test_partition import TOPICS, _scenario, identities, log_of


def held_back(replay_from: int = 3) -> Checkpoint:
    return Checkpoint(
        group="g", topic="t", partition=0, committed=10, processed=9, processing_ms=5.0,
        held=((3, 0), (7, 1)), token="abc", replay_from=replay_from,
    )  # fmt: skip


def test_held_events_before_the_commit_round_trip_and_name_the_replay_start() -> None:
    cp = held_back()
    assert decode(encode(cp)) == cp
    assert cp.metadata == "sp1:abc:3"
    assert metadata_replay_from(cp.metadata) == 3
    assert replay_offset(10, cp.metadata, cp) == 3  # from the checkpoint's first held event
    assert replay_offset(10, cp.metadata, None) == 3  # no readable checkpoint: plain replay from 3
    assert replay_offset(10, "sp1:abc", None) == 10  # the rule before: the commit is the start
    assert replay_offset(None, None, None) is None


def test_a_checkpoint_of_the_rule_before_keeps_its_metadata() -> None:
    cp = held_back(replay_from=-1)
    assert cp.metadata == "sp1:abc"
    assert "replay_from" not in encode(cp).decode()


def test_the_replay_processes_the_held_events_before_the_commit_only() -> None:
    replay = ReplayFilter(held_back())
    assert replay.active
    seen = {offset: replay.blocks(offset) for offset in range(3, 12)}
    assert seen[3] == frozenset({0}) and seen[7] == frozenset({1})
    assert all(seen[o] == frozenset() for o in (4, 5, 6, 8, 9))  # emitted before the commit: skipped
    assert seen[10] is None and seen[11] is None  # new input: processed normally
    assert not replay.active and not replay.missed


def _state(start: int, restore: Checkpoint | None, *, commit_processed: bool) -> PartitionState:
    return DecodedPartitionState(
        "in", 0, stream_pipeline(EngineConfig(call_timeout_ms=60_000, result_grace_ms=5_000)), TOPICS,
        start_offset=start, restore=restore, wall_ms=0.0, commit_processed=commit_processed,
    )  # fmt: skip


@pytest.mark.parametrize("seed, n, cut", [(1, 60, 30), (2, 80, 17), (3, 120, 90), (4, 40, 39)])
def test_a_restart_from_a_commit_past_held_events_loses_nothing_and_repeats_nothing(
    seed: int, n: int, cut: int
) -> None:
    """The commit is the processed position; the new owner reads from the checkpoint's first held
    event (before the commit) and every input event still ends in exactly one output."""
    log = log_of(_scenario(seed, n))
    twin = _state(0, None, commit_processed=True)
    before = twin.feed(log[:cut], wall_ms=0.0)
    cp = twin.checkpoint_record("g", "tok")
    assert cp is not None and cp.committed == cut  # what was processed, held events or not
    if twin.pipeline.held_positions():
        assert min(o for o, _ in cp.held) < cut and cp.metadata.startswith("sp1:tok:")
    cp = decode(encode(cp))
    start = replay_offset(cp.committed, cp.metadata, cp)
    assert start is not None
    replayed = _state(start, cp, commit_processed=True)
    out = replayed.feed(log[start:], wall_ms=0.0)
    assert replayed.commit_offset() == n
    total = identities(before) + identities(out + replayed.flush("shutdown"))
    everything = identities(_state(0, None, commit_processed=False).feed(log, wall_ms=0.0))
    assert set(total) >= set(everything)  # nothing lost
    assert all(v == 1 for v in total.values()), {k: v for k, v in total.items() if v != 1}
