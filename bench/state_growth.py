#!/usr/bin/env python3
"""Part 4 (detail): state that grows although held bytes stay flat (the engine alone, no broker).

The soak's traffic (100,000 conversations, 20 s call timeout, 2,000 records/s of event time) fed
straight into one pipeline; after each slice: RSS, held bytes, open calls, and the two
per-conversation structures the held-bytes limit does not count (closed call ids, tagging hashes).

    python bench/state_growth.py [--slices 6] [--slice-records 200000] [--containers]

`--engine native` runs the compiled core instead (the sidecar's default engine): its containers'
lengths and capacities come from the core's `memory()` (native/src/engine_memory.rs) and its
allocations from glibc's `mallinfo2` (the Rust heap is malloc's, invisible to pymalloc).
`--processing-time` also feeds an arrival time (2,000 records/s) and calls `advance` every 1,000
records, as the sidecar does (processing-time timers, the idle-conversation sweep).

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
from traced_run import mallinfo, pymalloc_stats

from stream_pairer.core.native import NativePipeline
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline
from tests.reference.tagging import FailureTagger

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
    p.add_argument("--engine", choices=("python", "native"), default="python")
    p.add_argument("--processing-time", action="store_true", help="arrival times and advance (see above)")
    a = p.parse_args()
    g = datagen.Generator(a.conversations, seed=7, dt_ms=0.5)
    cfg = EngineConfig(
        call_timeout_ms=20_000, result_grace_ms=5_000, max_held_bytes=16 * 2**20,
        max_conversations=a.conversations,
    )  # fmt: skip
    if a.engine == "native":
        return native(a, g, cfg)
    pipe = Pipeline(Engine(cfg, tagger=FailureTagger(None)))
    recs = g.warmup()
    i = 0
    before: Counter[str] = Counter()
    for _ in range(a.slices):
        recs += g.stream(a.slice_records)
        i = feed(pipe, recs, i, a.processing_time)
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


def feed(pipe: Any, recs: list[tuple[bytes, bytes]], i: int, processing: bool) -> int:
    """Feeds `recs` (offsets from `i`); with `processing`, an arrival time 0.5 ms apart (2,000
    records/s) and `advance` every 1,000 records, as the sidecar does."""
    for k, v in recs:
        src = {"topic": "t", "partition": 0, "offset": i}
        if processing:
            pipe.feed(v, src, key=k.decode(), arrival_ms=i * 0.5)
            if i % 1000 == 0:
                pipe.advance(i * 0.5)
        else:
            pipe.feed(v, src, key=k.decode())
        i += 1
    return i


def native(a: argparse.Namespace, g: datagen.Generator, cfg: EngineConfig) -> int:
    """The same slices through the compiled core: per slice RSS, glibc's heap in use, and each
    container's entries / capacity / estimated table MiB with the change since the last slice."""
    pipe = NativePipeline(cfg, tagger=FailureTagger(None))
    recs = g.warmup()
    i = 0
    before: dict[str, int] = {}
    for _ in range(a.slices):
        recs += g.stream(a.slice_records)
        i = feed(pipe, recs, i, a.processing_time)
        recs = []
        gc.collect()
        mem = {name: (n, cap, b) for name, n, cap, b in pipe.core.memory()}
        row: dict[str, Any] = {
            "engine": "native",
            "records": i,
            "rss_mib": common.rss_bytes() >> 20,
            "malloc_mib": mallinfo(),
            "held_mib": pipe.core.held_bytes >> 20,
            "open_calls": pipe.core.open_calls,
            "conversations": pipe.core.open_conversations,
            "closed_ids": pipe.core.closed_ids,
            "remembered_calls": pipe.core.remembered_calls,
            "containers": {k: list(v) for k, v in mem.items()},
        }
        print(
            f"records {i:,}: RSS {row['rss_mib']} MiB, malloc {row['malloc_mib']}, held "
            f"{row['held_mib']} MiB, open calls {row['open_calls']:,}, conversations "
            f"{row['conversations']:,}, closed ids {row['closed_ids']:,}, remembered calls "
            f"{row['remembered_calls']:,}",
            flush=True,
        )
        if a.containers:
            print(
                "  containers (entries / capacity, table MiB, change): "
                + ", ".join(
                    f"{k} {n:,}/{cap:,} {b / 2**20:.2f} ({(b - before.get(k, 0)) / 2**20:+.2f})"
                    for k, (n, cap, b) in mem.items()
                ),
                flush=True,
            )
        before = {k: b for k, (_, _, b) in mem.items()}
        common.record("state_growth", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
