#!/usr/bin/env python3
"""Issue 15: what one commit's checkpoint costs as held state grows, whole (a snapshot of every held
event, what every commit wrote before delta checkpoints) and as a delta (what changed since the
previous record: what a commit writes now), on each engine.

    python bench/checkpoint_bench.py --held 10000 100000 1000000 [--changes 1000] [--engine python native]

A partition's engine holds N unanswered calls; between two commits, `--changes` events change
(half answer held calls, half are new calls, so N stays put). Per commit, CPU time (process time,
best of --repeat) of: taking the record (`PartitionState.checkpoint` whole, or
`checkpoint_record`'s delta) plus encoding it (`checkpoint.encode`), and its size. The amortised
figure adds a snapshot's cost spread over the commits between two snapshots (a snapshot is taken
once the changes written since the last one reach its size: PartitionState.checkpoint_record), so
it is what a commit costs on average in a steady run. Asserts nothing but that the delta assembles
to the whole checkpoint. The GC is tuned as the sidecar tunes it.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import orjson

from stream_pairer.ops.gctune import tune_gc
from stream_pairer.stream.checkpoint import assemble, encode
from stream_pairer.stream.partition import SNAPSHOT_MIN_CHANGES, OutputTopics, PartitionState
from tests.reference.engine import EngineConfig
from tests.reference.engines import make_pipeline

T0 = 1_741_944_400_000


@dataclass(frozen=True, slots=True)
class Msg:
    offset: int
    key: bytes | None
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


def call(i: int, per_conversation: int) -> Msg:
    conv = f"conversation-{i // per_conversation:08d}"
    body = {"conversation_id": conv, "type": "tool_call", "id": f"call-{i:09d}", "name": "search",
            "ts": T0 + i, "arguments": {"q": "x"}}  # fmt: skip
    return Msg(i, conv.encode(), orjson.dumps(body), T0 + i)


def result(offset: int, i: int, per_conversation: int) -> Msg:
    conv = f"conversation-{i // per_conversation:08d}"
    body = {"conversation_id": conv, "type": "tool_result", "id": f"call-{i:09d}", "ts": T0 + offset,
            "output": "ok"}  # fmt: skip
    return Msg(offset, conv.encode(), orjson.dumps(body), T0 + offset)


def held_state(engine: str, n: int, per_conversation: int) -> PartitionState:
    cfg = EngineConfig(
        call_timeout_ms=10**12,
        max_conversations=n + 1,
        max_calls_per_conversation=n + 1,
        max_held_bytes=2**62,
    )
    pipeline = make_pipeline(engine, cfg, routed=True)  # type: ignore[arg-type]
    st = PartitionState("in", 0, pipeline, OutputTopics.for_input("in"), start_offset=0, wall_ms=0.0)
    for lo in range(0, n, 1000):
        st.feed([call(i, per_conversation) for i in range(lo, min(n, lo + 1000))], float(T0 + lo))
    assert st.pipeline.gauges().open_calls == n
    return st


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--held", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--changes", type=int, default=1000, help="changed events between two commits")
    p.add_argument("--engine", nargs="+", default=["python", "native"])
    p.add_argument("--per-conversation", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    tune_gc()  # as `stream-pairer run` does: the collector would otherwise walk every held object
    per = args.per_conversation
    for engine in args.engine:
        for n in args.held:
            st = held_state(engine, n, per)
            offset, answered = n, 0
            whole, delta, sizes, deltas = [], [], [0, 0], []
            snapshot = st.checkpoint_record("g", "t0")  # the chain's first record: a snapshot
            assert snapshot is not None and not snapshot.is_delta
            for r in range(args.repeat):
                # Between two commits: half answer the oldest held calls, half are new calls.
                batch = []
                for _ in range(args.changes // 2):
                    batch.append(result(offset, answered, per))
                    batch.append(call(offset + 1, per))
                    offset, answered = offset + 2, answered + 1
                st.feed(batch, float(T0 + offset))
                t0 = time.process_time()
                cp = st.checkpoint("g", f"w{r}")
                value = encode(cp) if cp is not None else b""
                t1 = time.process_time()
                rec = st.checkpoint_record("g", f"t{r + 1}")
                enc = encode(rec) if rec is not None else b""
                t2 = time.process_time()
                assert rec is not None and rec.is_delta, "a steady change rate this small writes deltas"
                deltas.append(rec)
                chain = assemble(snapshot, deltas)
                assert cp is not None and chain.state(len(chain.deltas)).held == cp.held
                whole.append(t1 - t0)
                delta.append(t2 - t1)
                sizes = [len(value), len(enc)]
            # Amortised: one snapshot (the whole cost) every budget/changes commits.
            budget = max(n, SNAPSHOT_MIN_CHANGES)
            amortised = min(delta) + min(whole) * args.changes / budget
            print(
                f"{engine:>6} held {n:>9,}: whole {min(whole) * 1e6:>11,.0f} us ({sizes[0]:>10,} B), "
                f"delta {min(delta) * 1e6:>8,.0f} us ({sizes[1]:>7,} B), "
                f"amortised with snapshots {amortised * 1e6:>8,.0f} us per commit "
                f"({args.changes:,} changes/commit)",
                flush=True,
            )


if __name__ == "__main__":
    main()
