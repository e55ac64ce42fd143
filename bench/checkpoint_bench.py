#!/usr/bin/env python3
"""Issue 15: what one commit's checkpoint costs as held state grows (a partition's engine holding
N unanswered calls), split into taking the checkpoint (`PartitionState.checkpoint`: gathering the
held (offset, block)s and clocks) and encoding it (`checkpoint.encode`: delta + orjson + zlib).

    python bench/checkpoint_bench.py --held 10000 100000 1000000 [--per-conversation 10]

Prints µs per commit (best of --repeat); asserts nothing. The GC is tuned as the sidecar tunes it.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import orjson

from stream_pairer.core.engine import Engine, EngineConfig
from stream_pairer.core.pipeline import Pipeline
from stream_pairer.ops.gctune import tune_gc
from stream_pairer.stream.checkpoint import encode
from stream_pairer.stream.partition import OutputTopics, PartitionState

T0 = 1_741_944_400_000


@dataclass(frozen=True, slots=True)
class Msg:
    offset: int
    key: bytes | None
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


def held_state(n: int, per_conversation: int) -> PartitionState:
    cfg = EngineConfig(
        call_timeout_ms=10**12,
        max_conversations=n + 1,
        max_calls_per_conversation=n + 1,
        max_held_bytes=2**62,
    )
    st = PartitionState(
        "in", 0, Pipeline(Engine(cfg)), OutputTopics.for_input("in"), start_offset=0, wall_ms=0.0
    )
    chunk: list[Msg] = []
    for i in range(n):
        conv = f"conversation-{i // per_conversation:08d}"
        body = {"conversation_id": conv, "type": "tool_call", "id": f"call-{i:09d}", "name": "search",
                "ts": T0 + i, "arguments": {"q": "x"}}  # fmt: skip
        chunk.append(Msg(i, conv.encode(), orjson.dumps(body), T0 + i))
        if len(chunk) == 1000:
            st.feed(chunk, float(T0 + i))
            chunk = []
    st.feed(chunk, float(T0 + n))
    assert st.engine.open_calls == n, st.engine.open_calls
    return st


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--held", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--per-conversation", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    tune_gc()  # as `stream-pairer run` does: the collector would otherwise walk every held object
    for n in args.held:
        st = held_state(n, args.per_conversation)
        take, enc, size = [], [], 0
        for r in range(args.repeat):
            t0 = time.perf_counter()
            cp = st.checkpoint("g", f"t{r}")
            t1 = time.perf_counter()
            value = encode(cp)
            t2 = time.perf_counter()
            take.append(t1 - t0)
            enc.append(t2 - t1)
            size = len(value)
        assert cp is not None and len(cp.held) == n
        print(
            f"held {n:>9,}: checkpoint {min(take) * 1e6:>12,.0f} us, encode {min(enc) * 1e6:>12,.0f} us, "
            f"total {(min(take) + min(enc)) * 1e6:>12,.0f} us per commit; {size:,} bytes",
            flush=True,
        )


if __name__ == "__main__":
    main()
