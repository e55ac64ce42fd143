#!/usr/bin/env python3
"""Part 4 (detail): state that grows although held bytes stay flat (the engine alone, no broker).

The soak's traffic (100,000 conversations, 20 s call timeout, 2,000 records/s of event time) fed
straight into one pipeline; after each slice: RSS, held bytes, open calls, and the two
per-conversation structures the held-bytes limit does not count (closed call ids, tagging hashes).

    python bench/state_growth.py [--slices 6] [--slice-records 200000] [--containers]

`--containers` adds, per slice, the bytes of the per-conversation containers themselves
(`sys.getsizeof`: their tables, not their entries) and the small-object allocator's bytes in use:
a dict keeps its table when its entries are deleted, so containers that empty and refill grow
with the busiest moment each conversation ever had, while every gauge of held state is flat.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import datagen
from traced_run import pymalloc_stats

from stream_pairer.core.engine import Engine, EngineConfig
from stream_pairer.core.pipeline import Pipeline
from stream_pairer.core.tagging import FailureTagger

CONTAINERS = ("calls_by_id", "open_calls", "pending_results", "closed", "timers")


def container_bytes(convs: list[Any]) -> Counter[str]:
    """Bytes of each per-conversation container summed over all conversations (introspection for
    the benchmark only)."""
    out: Counter[str] = Counter()
    for c in convs:
        for name in CONTAINERS:
            out[name] += sys.getsizeof(getattr(c, name))
        if c.tags is not None:
            out["tag hashes"] += sys.getsizeof(c.tags.seen)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=100_000)
    p.add_argument("--slices", type=int, default=6)
    p.add_argument("--slice-records", type=int, default=200_000)
    p.add_argument("--containers", action="store_true", help="per-container bytes (see above)")
    a = p.parse_args()
    g = datagen.Generator(a.conversations, seed=7, dt_ms=0.5)
    cfg = EngineConfig(
        call_timeout_ms=20_000, result_grace_ms=5_000, max_held_bytes=16 * 2**20,
        max_conversations=a.conversations,
    )  # fmt: skip
    pipe = Pipeline(Engine(cfg, tagger=FailureTagger(None)))
    recs = g.warmup()
    i = 0
    before: Counter[str] = Counter()
    for _ in range(a.slices):
        recs += g.stream(a.slice_records)
        for k, v in recs:
            pipe.feed(v, {"topic": "t", "partition": 0, "offset": i}, key=k.decode())
            i += 1
        recs = []
        gc.collect()
        convs = list(pipe.engine._convs.values())  # introspection for the benchmark only
        closed = sum(len(c.closed) for c in convs)
        hashes = sum(len(getattr(c.tags, "seen", ())) for c in convs if c.tags is not None)
        row = {
            "records": i,
            "rss_mib": common.rss_bytes() >> 20,
            "held_mib": pipe.engine.held_bytes >> 20,
            "open_calls": pipe.engine.open_calls,
            "conversations": len(convs),
            "closed_ids": closed,
            "tag_hashes": hashes,
        }
        print(
            f"records {i:,}: RSS {row['rss_mib']} MiB, held {row['held_mib']} MiB, open calls "
            f"{row['open_calls']:,}, conversations {len(convs):,}, closed ids {closed:,}, "
            f"tag hashes {hashes:,}",
            flush=True,
        )
        if a.containers:
            sizes = container_bytes(convs)
            row["containers_mib"] = {k: round(v / 2**20, 2) for k, v in sizes.items()}
            row["pymalloc_in_use_mib"] = pymalloc_stats()["allocated_mib"]
            print(
                "  containers (MiB, change since the previous slice): "
                + ", ".join(f"{k} {v / 2**20:.2f} ({(v - before[k]) / 2**20:+.2f})" for k, v in sizes.items())
                + f"; small-object allocator in use {row['pymalloc_in_use_mib']} MiB",
                flush=True,
            )
            before = sizes
        common.record("state_growth", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
