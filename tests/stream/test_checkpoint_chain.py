"""Delta checkpoints on both engines: what the sidecar writes at each commit (a snapshot, or a delta
of what changed since the previous record) must assemble, as the checkpoint topic gives it back,
into exactly the whole checkpoint (`PartitionState.checkpoint`, the specification), so a replay
restores the same held events, clocks and P whichever was written.

The random partition lives of test_partition_engines.py are driven here with tokens per commit,
failed commits (the record lost, or written but the offset commit lost), and crashes restored from
the chain at the committed token.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_pairer.stream import partition
from stream_pairer.stream.checkpoint import Checkpoint, assemble, decode, encode, key, read_chain
from stream_pairer.stream.partition import OutputTopics, PartitionState
from tests.engine_helpers import stream_pipeline
from tests.reference.engine import EngineConfig
from tests.stream.test_partition_engines import Msg, Twin, _same, lives


class Log:
    """A checkpoint partition: (key, value) records in write order."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def write(self, cp: Checkpoint) -> None:
        self.records.append((key(cp.group, cp.topic, cp.partition, cp.seq), encode(cp)))

    def compacted(self, upto: int) -> list[tuple[bytes, bytes | None]]:
        """The log after compaction of its first `upto` records (the newest of each key survives)."""
        head, tail = self.records[:upto], self.records[upto:]
        newest = {k: i for i, (k, _) in enumerate(self.records)}
        return [r for i, r in enumerate(head) if newest[r[0]] == i] + tail


def _commit(states: tuple[PartitionState, ...], log: Log, token: str) -> tuple[Checkpoint | None, bool]:
    """Both engines' records must be the same: (the whole checkpoint, whether a delta was written)."""
    py, nat = states
    rec = py.checkpoint_record("g", token)
    assert nat.checkpoint_record("g", token) == rec
    full = py.checkpoint("g", token)
    if rec is None:
        assert full is None
        return None, False
    log.write(rec)
    return full, rec.is_delta


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lives(),
    st.lists(st.sampled_from(["ok", "ok", "ok", "lost", "uncommitted"]), min_size=40, max_size=40),
    st.sampled_from([(256, 1024), (1, 3), (3, 1), (0, 2)]),
)
def test_the_written_chain_assembles_to_the_whole_checkpoint(
    life: tuple[EngineConfig, bool, list[Msg], list[Any]], fates: list[str], rule: tuple[int, int]
) -> None:
    """`rule`: the snapshot rule (SNAPSHOT_MIN_CHANGES, MAX_DELTAS), also small, so snapshots come
    often between deltas: a snapshot must not lose what the deltas after it need."""
    saved = partition.SNAPSHOT_MIN_CHANGES, partition.MAX_DELTAS
    partition.SNAPSHOT_MIN_CHANGES, partition.MAX_DELTAS = rule
    try:
        _written_chain(life, fates)
    finally:
        partition.SNAPSHOT_MIN_CHANGES, partition.MAX_DELTAS = saved


def _written_chain(life: tuple[EngineConfig, bool, list[Msg], list[Any]], fates: list[str]) -> None:
    cfg, repartition, msgs, ops = life
    ops = [op for op in ops for op in ((op, ("commit",)) if op[0] == "feed" else (op,))]  # more commits
    twin = Twin(cfg, repartition)
    log = Log()
    pos, wall, n = 0, 0.0, 0
    committed: tuple[Checkpoint, str] | None = None  # the whole checkpoint the offset commit names
    newer_snapshot = False  # a snapshot written since that commit (it replaced the committed chain)
    for op in ops:
        py, nat = twin.states
        if op[0] == "feed":
            batch = msgs[pos : pos + op[1]]
            pos += len(batch)
            _same(py.feed(batch, wall), nat.feed(batch, wall))
        elif op[0] == "tick":
            wall += op[1]
            _same(py.tick(wall, caught_up=op[2]), nat.tick(wall, caught_up=op[2]))
        elif op[0] == "commit":
            n += 1
            fate = fates[n % len(fates)]
            records = len(log.records)
            full, delta = _commit(twin.states, log, f"t{n}")
            if full is None:
                continue
            if fate == "lost":  # the record never became readable (a failed send, an aborted transaction)
                del log.records[records:]
                for s in twin.states:
                    s.checkpoint_failed()  # so the sidecar's next record is a snapshot
                continue
            if fate == "uncommitted":  # written, but the offset commit failed: the chain goes on
                newer_snapshot = newer_snapshot or not delta
                continue
            committed = (full, full.metadata)
            newer_snapshot = False
            # Whatever compaction has done to the log so far, the commit's state reads back exactly.
            for upto in {0, len(log.records) // 2, len(log.records)}:
                chain = read_chain(log.compacted(upto))
                assert chain is not None
                assert chain.find(full.committed, full.metadata) == full
        elif op[0] == "discard":
            assert nat.discard() == py.discard()
            twin.states = twin._open(pos, None, wall)
        else:  # a crash: the next owner restores the state the committed offset names, from the chain
            if committed is None:
                twin.states = twin._open(None, None, wall)
                pos = 0
                continue
            want, metadata = committed
            chain = read_chain(log.compacted(len(log.records)))
            assert chain is not None
            got = chain.find(want.committed, metadata)
            # The commit's state is found exactly, unless a newer snapshot replaced its chain (then
            # the token does not match: the safe path, a plain replay from the committed offset).
            assert got == (None if newer_snapshot else want)
            twin.states = twin._open(want.committed, None if got is None else decode(encode(got)), wall)
            pos = want.committed
        twin.check_state()
    py, nat = twin.states
    _same(py.flush("shutdown"), nat.flush("shutdown"))
    full, _ = _commit(twin.states, log, "last")
    if full is not None:
        chain = read_chain(log.records)
        assert chain is not None and chain.find(full.committed, full.metadata) == full


@pytest.mark.parametrize("engine", ["python", "native"])
def test_a_conversation_touched_before_a_snapshot_still_reaches_the_next_delta(engine: str) -> None:
    """A conversation touched since the last record, then holding nothing when a snapshot is taken,
    must be looked at again when it next holds an event: its clock entry (the clock is ahead of
    the new event's time, so a replay could not rebuild it) belongs in the next delta."""

    def msg(offset: int, kind: str, cid: str, ts: int) -> Msg:
        body = {"conversation_id": "A", "type": kind, "id": cid, "name": "t", "ts": ts}
        return Msg(offset, b"A", orjson.dumps(body), ts)

    cfg = EngineConfig(call_timeout_ms=10**9, result_grace_ms=10**9)
    st = PartitionState(
        "in",
        0,
        stream_pipeline(cfg, engine=engine),
        OutputTopics.for_input("in"),
        start_offset=0,  # type: ignore[arg-type]
    )
    st.feed([msg(0, "tool_call", "c1", 100)], 0.0)
    assert st.checkpoint_record("g", "t1") is not None  # a snapshot: the base of the changes
    st.feed([msg(1, "tool_result", "c1", 200)], 0.0)  # pairs: A holds nothing, its clock is 200
    st.checkpoint_failed()
    snapshot = st.checkpoint_record("g", "t2")
    assert snapshot is not None and not snapshot.is_delta and snapshot.held == ()
    st.feed([msg(2, "tool_call", "c2", 150)], 0.0)  # held; A's clock (200) is not its time
    rec = st.checkpoint_record("g", "t3")
    full = st.checkpoint("g", "t3")
    assert rec is not None and rec.is_delta and full is not None
    assert full.clocks == ((2, 0, 200_000.0),)  # "ts" in seconds
    assert assemble(snapshot, [rec]).state(1) == full
