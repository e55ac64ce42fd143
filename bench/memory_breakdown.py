#!/usr/bin/env python3
"""Part 4 (detail): what one open conversation costs in memory, and where it is allocated.

Feeds the warm-up of K conversations (one open call turn each) into a fresh pipeline under
tracemalloc and prints the bytes held per conversation by allocation site (file:line), next to the
engine's own `held_bytes` estimate (engine.held_cost) and the raw sizes it is computed from. The
traced / estimate ratio says how far the held-bytes limit is from the memory it is meant to bound;
the engine's constants are calibrated with this script (see engine.py, HELD_BYTES_PER_*).

    python bench/memory_breakdown.py --conversations 20000
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import datagen
from engine_bench import make_pipeline, run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=20_000)
    p.add_argument("--top", type=int, default=15)
    a = p.parse_args()
    k = a.conversations
    ds = datagen.generate(k, 0)
    raw_bytes = sum(len(v) for _, v in ds.warmup)
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    pipeline = make_pipeline(k, 1.0, True)
    run(pipeline, ds.warmup, 0)
    gc.collect()
    after = tracemalloc.take_snapshot()
    stats = after.compare_to(before, "lineno")
    total = sum(s.size_diff for s in stats)
    eng = pipeline.engine
    held = list(eng.held())
    raw_held = sum(h.event.size for h in held)
    print(
        f"K={k:,} conversations, {eng.open_calls:,} open calls, {len(ds.warmup):,} records of {raw_bytes:,} "
        f"raw bytes: engine state {total / 2**20:.1f} MiB = {total / k:,.0f} B per conversation; "
        f"held_bytes gauge (estimate) {eng.held_bytes / 2**20:.1f} MiB; "
        f"state / held_bytes = {total / eng.held_bytes:.2f}; "
        f"{len(held):,} held events of {raw_held / 2**20:.1f} MiB raw size "
        f"({raw_held / k:,.0f} B per conversation), state / raw = {total / max(raw_held, 1):.2f}"
    )
    for s in stats[: a.top]:
        fr = s.traceback[0]
        name = fr.filename.split("/stream_pairer/")[-1].split("/bench/")[-1]
        print(f"  {s.size_diff / k:8,.0f} B/conv  {100 * s.size_diff / total:5.1f}%  {name}:{fr.lineno}")
    common.record(
        "memory_breakdown",
        {
            "conversations": k,
            "state_bytes": total,
            "held_bytes": eng.held_bytes,
            "held_raw_bytes": raw_held,
            "held_events": len(held),
            "raw_bytes": raw_bytes,
            "load": common.loadavg(),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
