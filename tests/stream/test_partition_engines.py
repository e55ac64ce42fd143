"""A Kafka partition on the compiled core against the same partition on the Python engine.

The sidecar's per-partition logic (stream/partition.py) reads its pipeline only through
`StreamPipeline`; this drives two PartitionStates, one per engine, through the same random life:
fetched batches, wall-clock ticks, commits with their checkpoints, a crash rebuilt from the last
checkpoint and replayed from the committed offset, a revocation (discard), a final flush. At every
step both must emit the same outputs (topic, key, record; the compiled core's bytes decoded, its
OutputMeta checked against the record), commit the same offset with the same checkpoint, show the
same state gauges, and tell their observers the same things in the same order.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_pairer.stream.checkpoint import Checkpoint, decode, encode
from stream_pairer.stream.partition import Emitted, OutputTopics, PartitionState, lineage_headers
from tests.core.differential_helpers import CONVS, T0, records
from tests.engine_helpers import Msg, Recorder, decoded, engine_config, stream_pipeline
from tests.reference.engine import EngineConfig

TOPIC = "in"
TOPICS = OutputTopics.for_input(TOPIC)


@st.composite
def lives(draw: st.DrawFn) -> tuple[EngineConfig, bool, list[Msg], list[Any]]:
    skew = {c: draw(st.integers(-20_000, 20_000)) for c in CONVS}
    cfg = engine_config(draw, small_held_bytes=3_000)
    repartition = draw(st.booleans())  # --repartition: lineage headers, commits by the `via` offset
    recs = draw(st.lists(records(skew), min_size=1, max_size=30))
    log = []
    for i, (raw, key, arrival) in enumerate(recs):
        headers = tuple(lineage_headers("orig", 3, 1000 + 7 * i)) if repartition else ()
        ts = int(arrival) if arrival is not None else T0 + i
        value = None if draw(st.integers(0, 30)) == 0 else raw  # a tombstone now and then
        log.append(Msg(i, key.encode() if key is not None else None, value, ts, headers))
    ops: list[Any] = []
    for _ in range(draw(st.integers(1, 14))):
        ops.append(
            draw(
                st.one_of(
                    st.tuples(st.just("feed"), st.integers(1, 6)),
                    st.tuples(st.just("tick"), st.integers(0, 40_000), st.booleans()),
                    st.just(("commit",)),
                    st.just(("crash",)),
                    st.just(("discard",)),
                )
            )
        )
    # Always one commit followed by a crash, somewhere: the replay from a checkpoint (held
    # blocks, restored conversation clocks) is the part that differs most between the engines.
    at = draw(st.integers(0, len(ops)))
    ops[at:at] = [
        ("feed", draw(st.integers(2, 20))), ("commit",), ("feed", draw(st.integers(0, 8))), ("crash",),
    ]  # fmt: skip
    ops.append(("feed", len(log)))
    return cfg, repartition, log, ops


def _same(a: list[Emitted], b: list[Emitted]) -> list[tuple[Any, ...]]:
    want = [(e.topic, e.key, e.record) for e in decoded(a)]
    got = [(e.topic, e.key, e.record) for e in decoded(b)]
    assert got == want
    assert all(isinstance(e.record, bytes) for e in b if e.topic != TOPICS.dead_letters or e.meta)
    return got


class Twin:
    """One PartitionState on each engine, driven alike."""

    def __init__(self, cfg: EngineConfig, repartition: bool) -> None:
        self.cfg = cfg
        self.repartition = repartition
        self.observers = (Recorder(), Recorder())
        self.states = self._open(None, None, 0.0)

    def _open(self, start: int | None, cp: Checkpoint | None, wall: float) -> tuple[PartitionState, ...]:
        states = []
        for engine, obs in zip(("python", "native"), self.observers, strict=True):
            pipeline = stream_pipeline(self.cfg, observer=obs, engine=engine)  # type: ignore[arg-type]
            state = PartitionState(
                TOPIC, 0, pipeline, TOPICS, start_offset=start, restore=cp, wall_ms=wall,
                lineage_headers=self.repartition,
            )  # fmt: skip
            states.append(state)
        return tuple(states)

    def check_state(self) -> None:
        py, nat = self.states
        assert nat.pipeline.gauges() == py.pipeline.gauges()
        assert nat.commit_offset() == py.commit_offset()
        assert nat.checkpoint("g", "t") == py.checkpoint("g", "t")
        assert nat.restoring == py.restoring and nat.missed == py.missed
        assert self.observers[1].calls == self.observers[0].calls


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lives())
def test_both_engines_run_a_partition_alike(life: tuple[EngineConfig, bool, list[Msg], list[Any]]) -> None:
    cfg, repartition, log, ops = life
    twin = Twin(cfg, repartition)
    pos, wall = 0, 0.0
    last: Checkpoint | None = None
    emitted = 0
    for op in ops:
        py, nat = twin.states
        if op[0] == "feed":
            batch = log[pos : pos + op[1]]
            pos += len(batch)
            emitted += len(_same(py.feed(batch, wall), nat.feed(batch, wall)))
        elif op[0] == "tick":
            wall += op[1]
            emitted += len(_same(py.tick(wall, caught_up=op[2]), nat.tick(wall, caught_up=op[2])))
        elif op[0] == "commit":
            cp = py.checkpoint("g", "t")
            assert nat.checkpoint("g", "t") == cp
            if cp is not None:
                last = decode(encode(cp))  # what the checkpoint topic gives back
        elif op[0] == "discard":
            assert nat.discard() == py.discard()
            twin.states = twin._open(pos, None, wall)
            pos = pos if pos < len(log) else len(log)
        else:  # a crash: the next owner starts from the last commit and its checkpoint
            twin.states = twin._open(None if last is None else last.committed, last, wall)
            pos = 0 if last is None else last.committed
        twin.check_state()
    py, nat = twin.states
    _same(py.flush("shutdown"), nat.flush("shutdown"))
    twin.check_state()
    assert nat.pipeline.summary.as_dict() == py.pipeline.summary.as_dict()
    del emitted


def test_the_twin_really_runs_the_compiled_core() -> None:
    twin = Twin(EngineConfig(), repartition=True)
    py, nat = twin.states
    assert (
        type(py.pipeline).__name__ == "EncodedReference" and type(nat.pipeline).__name__ == "NativePipeline"
    )
    call = orjson.dumps({"conversation_id": "c", "type": "tool_call", "id": "a", "name": "t", "ts": T0})
    msg = Msg(5, b"c", call, T0, tuple(lineage_headers("orig", 1, 99)))
    _same(py.feed([msg], 0.0), nat.feed([msg], 0.0))
    # The held call commits by the offset it was consumed at (5), not its original one (99).
    assert nat.commit_offset() == py.commit_offset() == 5
    assert nat.pipeline.held_positions() == [(5, 0)]
    twin.check_state()
