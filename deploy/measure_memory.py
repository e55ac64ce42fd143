"""Measure how much Python heap one held byte costs, to size the container memory limit.

`--max-held-bytes` bounds the *payload* bytes the engine holds (the `size` of open calls and
pending results), not the process's memory: a decoded JSON payload plus its raw block, the
ToolEvent and the bookkeeping around it take several times their wire size. This script feeds
realistic open calls (canonical format, through the real reader and engine, nothing answered) and
prints the ratio of traced heap to held bytes, and the heap per open conversation. The Kubernetes
manifests in deploy/kubernetes size `resources.limits.memory` from these figures (see the comment
there). A benchmark script, not a test: it prints figures and asserts nothing.

    python deploy/measure_memory.py [--calls 20000] [--payload-bytes 1024] [--calls-per-conversation 4]
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

import orjson

from stream_pairer.core.formats import parse_record
from tests.reference.engine import Engine, EngineConfig  # the reference model: its Python heap


def measure(calls: int, payload_bytes: int, per_conversation: int) -> tuple[int, int, int, int]:
    config = EngineConfig(
        call_timeout_ms=1e12,
        max_conversations=10**9,
        max_calls_per_conversation=10**9,
        max_held_bytes=2**62,
    )
    filler = "x" * max(payload_bytes - 40, 1)
    lines = [
        orjson.dumps(
            {
                "conversation_id": f"conv-{i // per_conversation}",
                "type": "tool_call",
                "id": f"call-{i}",
                "name": f"tool_{i % 20}",
                "arguments": {"query": filler, "page": i % 7},
                "ts": "2025-01-01T00:00:00Z",
            }
        )
        for i in range(calls)
    ]
    gc.collect()
    tracemalloc.start()
    engine = Engine(config)
    before = tracemalloc.get_traced_memory()[0]
    emitted = 0
    for n, line in enumerate(lines):
        for event in parse_record(line, {"file": "bench", "line": n}):
            emitted += len(engine.process(event, now_ms=0.0))
    gc.collect()
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    if emitted:
        raise SystemExit(f"expected every call to stay open, {emitted} records were emitted")
    return heap, engine.held_bytes, engine.open_conversations, sum(map(len, lines))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000)
    p.add_argument("--payload-bytes", type=int, default=1024)
    p.add_argument("--calls-per-conversation", type=int, default=4)
    a = p.parse_args()
    heap, held, convs, wire = measure(a.calls, a.payload_bytes, a.calls_per_conversation)
    print(f"open calls:              {a.calls}")
    print(f"open conversations:      {convs}")
    print(f"wire bytes of the input: {wire}")
    print(f"held bytes (engine):     {held}")
    print(f"traced heap bytes:       {heap}")
    print(f"heap / held byte:        {heap / max(held, 1):.2f}")
    print(f"heap per open call:      {heap / a.calls:.0f} B")


if __name__ == "__main__":
    main()
