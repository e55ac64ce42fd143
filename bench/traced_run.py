#!/usr/bin/env python3
"""Run a stream-pairer command in-process under tracemalloc, and say where memory grows.

Why: an RSS creep in the sidecar can be Python objects that are kept (state growing towards a limit
that is too far away, or with no limit at all), garbage the cyclic collector has not freed yet, or
the allocator holding freed memory (fragmentation). Each needs a different fix, so this script
samples all three side by side, every `--every` seconds, from a background thread:

* RSS (/proc) against tracemalloc's traced total (what the live Python allocations hold) and
  glibc's `mallinfo2` (heap in use / free, mmapped): RSS growing with a flat traced total is the
  allocator, not Python objects;
* the allocation sites (tracebacks of `--frames` frames) that grew most since the baseline snapshot
  (taken `--baseline` seconds in, after the warm-up): where Python memory is being kept;
* object counts by type (`gc.get_objects()`) that grew most, and `gc.get_count()`: garbage waiting
  for a collection shows as types that only a cycle keeps alive (frames, futures, exceptions).

    python bench/traced_run.py --every 60 --baseline 120 --out /tmp/trace.txt -- run --bootstrap-servers ...

`bench/soak.py --trace` runs the sidecar through this. tracemalloc slows the process by 2-4x: keep
the rate modest, and do not read speed figures from a traced run.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import gc
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

from stream_pairer.cli.app import main as cli_main


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


_LIBC: Any = None
with_libc = ctypes.util.find_library("c")
if with_libc:
    _LIBC = ctypes.CDLL(with_libc)
    if not hasattr(_LIBC, "mallinfo2"):
        _LIBC = None
    else:
        _LIBC.mallinfo2.restype = _MallInfo2


def mallinfo() -> dict[str, int]:
    """glibc's view of its heap (MiB): `arena` (main heap from brk/sbrk + other arenas), `uordblks`
    (in use), `fordblks` (free but kept), `hblkhd` (mmapped blocks, incl. pymalloc's arenas)."""
    if _LIBC is None:
        return {}
    m = _LIBC.mallinfo2()
    return {k: getattr(m, k) >> 20 for k in ("arena", "uordblks", "fordblks", "hblkhd")}


def type_counts() -> Counter[str]:
    return Counter(type(o).__name__ for o in gc.get_objects())


def _engine_state_on_loop() -> dict[str, Any]:
    """Summed over the process's pipelines (one per assigned partition): conversations, closed ids
    and remembered call hashes (both bounded per partition: their sum is the process's bound only
    once every partition has filled), and for the compiled core each container's estimated table
    MiB (`Core.memory()`). Runs on the event loop's thread: the compiled core is `unsendable`."""
    out: Counter[str] = Counter()
    tables: Counter[str] = Counter()
    for o in gc.get_objects():
        name = type(o).__name__
        if name == "NativePipeline":
            c = o.core
            out["pipelines"] += 1
            out["conversations"] += c.open_conversations
            out["closed_ids"] += c.closed_ids
            out["remembered_calls"] += c.remembered_calls
            for cname, _n, _cap, b in c.memory() if hasattr(c, "memory") else ():
                tables[cname] += b
        elif name == "Pipeline" and hasattr(o, "engine"):
            e = o.engine
            out["pipelines"] += 1
            out["conversations"] += e.open_conversations
            out["closed_ids"] += e.closed_ids
            if e.tagger is not None:
                out["remembered_calls"] += e.tagger.remembered_calls
    res: dict[str, Any] = dict(out)
    if tables:
        res["native_tables_mib"] = {k: round(v / 2**20, 1) for k, v in tables.most_common(8)}
    return res


def engine_state() -> dict[str, Any]:
    """`_engine_state_on_loop`, run on the sidecar's event loop (found among the live objects)."""
    loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]
    if not loops:
        return {}
    done = threading.Event()
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(_engine_state_on_loop())
        except Exception as e:  # a probe must not break the run
            box.append({"error": repr(e)})
        done.set()

    loops[0].call_soon_threadsafe(run)
    return box[0] if done.wait(30) else {"error": "event loop busy"}


def pymalloc_stats() -> dict[str, Any]:
    """CPython's small-object allocator (objects <= 512 B, in 1 MiB arenas mmapped directly, so
    invisible to mallinfo): its totals and, per size class, the bytes in blocks in use. Read from
    `sys._debugmallocstats()`, which writes to the C stderr: fd 2 is pointed at a file meanwhile
    (a log line the process writes in that instant lands there too)."""
    with tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    out: dict[str, Any] = {}
    classes: dict[int, int] = {}
    in_table = False
    for line in text.splitlines():
        if line.startswith("class   size"):
            in_table = True
            continue
        if in_table:
            parts = line.split()
            if len(parts) == 5 and parts[0].isdigit():
                classes[int(parts[1])] = int(parts[3]) * int(parts[1])
                continue
            if line.startswith("-----"):
                continue
            in_table = False
        if line.startswith("# arenas allocated current"):
            out["arenas"] = int(line.split("=")[1].replace(",", ""))
        elif line.startswith("# bytes in allocated blocks"):
            out["allocated_mib"] = int(line.split("=")[1].replace(",", "")) >> 20
        elif line.startswith("# bytes in available blocks"):
            out["available_mib"] = int(line.split("=")[1].replace(",", "")) >> 20
        elif line.startswith("# bytes in "):
            pass
    out["classes"] = classes
    return out


def garbage_probe(out: TextIO, top: int, frames: int) -> None:
    """A full collection that keeps what it finds (DEBUG_SAVEALL): how many objects only a cycle
    kept alive, by type and (under tracemalloc) by allocation site; then frees them."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        t = time.perf_counter()
        found = gc.collect()
        took = time.perf_counter() - t
        garbage = list(gc.garbage)
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
    by_type = Counter(type(o).__name__ for o in garbage)
    print(
        f"  full collection ({took:.2f} s) found {found:,} unreachable objects; by type: "
        + ", ".join(f"{k} {n:,}" for k, n in by_type.most_common(top)),
        file=out,
    )
    if tracemalloc.is_tracing():
        sites: Counter[tuple[str, ...]] = Counter()
        for o in garbage:
            tb = tracemalloc.get_object_traceback(o)
            if tb is not None:
                sites[tuple(tb.format(limit=frames, most_recent_first=True))] += 1
        for site, n in sites.most_common(top):
            print(f"    {n:,} garbage objects allocated at:", file=out)
            for line in site:
                print(f"        {line}", file=out)
    del garbage
    out.flush()


def late_sites(out: TextIO, a: argparse.Namespace) -> None:
    """What is still alive of what was allocated since the baseline, by allocation site."""
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    )
    stats = snap.statistics("traceback")
    total = sum(st.size for st in stats)
    print(f"  alive, allocated since the baseline: {total / 2**20:.2f} MiB; top sites:", file=out)
    for st in stats[: a.top]:
        print(f"    {st.size / 2**20:.2f} MiB in {st.count:,} blocks", file=out)
        for line in st.traceback.format(limit=a.late, most_recent_first=True):
            print(f"        {line}", file=out)
    out.flush()


def sample(out: TextIO, a: argparse.Namespace, stop: threading.Event) -> None:
    t0 = time.monotonic()
    base: tracemalloc.Snapshot | None = None
    base_types: Counter[str] | None = None
    base_classes: dict[int, int] = {}
    while not stop.wait(a.every):
        t = time.monotonic() - t0
        traced, peak = tracemalloc.get_traced_memory()
        types = type_counts()
        print(
            f"t={t:.0f}s RSS {common.rss_bytes() >> 20} MiB, traced {traced >> 20} MiB (peak {peak >> 20}), "
            f"malloc {mallinfo()}, gc count {gc.get_count()}, gc objects {sum(types.values()):,}, "
            f"collections {[s['collections'] for s in gc.get_stats()]}",
            file=out,
            flush=True,
        )
        pym = pymalloc_stats()
        classes = pym.pop("classes")
        print(f"  pymalloc {pym}", file=out, flush=True)
        print(f"  engine state {engine_state()}", file=out, flush=True)
        if a.malloc_trim and _LIBC is not None:
            # Free heap memory glibc keeps resident (fragmentation) against live allocations: RSS
            # that a trim gives back was free, not growth.
            before = common.rss_bytes()
            _LIBC.malloc_trim(0)
            print(
                f"  malloc_trim: RSS {before >> 20} -> {common.rss_bytes() >> 20} MiB, malloc {mallinfo()}",
                file=out,
                flush=True,
            )
        if base_types is None and t >= a.baseline:
            base_types, base_classes = types, classes
            if a.late and not tracemalloc.is_tracing():
                # From here on only: every trace alive at a later sample was allocated after the
                # warm-up, so a snapshot is the growth itself, and costs only from now.
                tracemalloc.start(a.late)
            elif a.snapshots and tracemalloc.is_tracing():
                base = tracemalloc.take_snapshot()
            print("  baseline taken", file=out, flush=True)
        elif base_types is not None:
            grown = [(k, types[k] - base_types.get(k, 0)) for k in types]
            grown.sort(key=lambda kv: -kv[1])
            print(
                "  object types grown since baseline: "
                + ", ".join(f"{k} {d:+,} (now {types[k]:,})" for k, d in grown[: a.top] if d > 0),
                file=out,
                flush=True,
            )
            grown_classes = sorted(
                ((c, n - base_classes.get(c, 0)) for c, n in classes.items()), key=lambda kv: -kv[1]
            )
            print(
                "  pymalloc bytes in use grown since baseline, by size class: "
                + ", ".join(f"{c} B {d / 2**20:+.1f} MiB" for c, d in grown_classes[: a.top] if d > 0),
                file=out,
                flush=True,
            )
            if a.late and tracemalloc.is_tracing():
                late_sites(out, a)
            if base is not None:
                snap = tracemalloc.take_snapshot()
                print("  top growth since baseline, by allocation site:", file=out)
                for st in snap.compare_to(base, "traceback")[: a.top]:
                    if st.size_diff <= 0:
                        break
                    print(
                        f"    {st.size_diff / 2**20:+.2f} MiB ({st.count_diff:+,} blocks), now "
                        f"{st.size / 2**20:.2f} MiB in {st.count:,}",
                        file=out,
                    )
                    for line in st.traceback.format(limit=a.frames, most_recent_first=True):
                        print(f"        {line}", file=out)
                out.flush()
        del types
        if a.gc_probe:
            garbage_probe(out, a.top, a.frames)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    p.add_argument("--baseline", type=float, default=120.0, help="seconds before the baseline snapshot")
    p.add_argument("--frames", type=int, default=0, help="tracemalloc traceback depth (0: tracemalloc off)")
    p.add_argument(
        "--snapshots", action="store_true",
        help="with --frames: also diff tracemalloc snapshots by site (blocks the process for seconds "
        "per sample with a large heap: a sidecar may miss its group heartbeats)",
    )  # fmt: skip
    p.add_argument(
        "--late", type=int, default=0, metavar="FRAMES",
        help="start tracemalloc (FRAMES deep) only at the baseline; each later sample lists what "
        "is still alive of what was allocated since, by site (cheaper than --frames, exact growth)",
    )  # fmt: skip
    p.add_argument(
        "--gc-probe", action="store_true",
        help="after each sample, a full collection that reports what it found (type, allocation site)",
    )  # fmt: skip
    p.add_argument(
        "--malloc-trim", action="store_true",
        help="after each sample, glibc's malloc_trim(0), printing RSS before and after (changes the "
        "run's RSS from then on: an experiment, not a measurement of the sidecar as shipped)",
    )  # fmt: skip
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--out", required=True, help="file the samples are written to")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the stream-pairer arguments")
    a = p.parse_args()
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if a.frames:
        tracemalloc.start(a.frames)
    stop = threading.Event()
    with open(a.out, "w") as out:
        print(f"pid {os.getpid()}: stream-pairer {' '.join(argv)}", file=out, flush=True)
        th = threading.Thread(target=sample, args=(out, a, stop), daemon=True)
        th.start()
        try:
            return cli_main(argv)
        finally:
            stop.set()
            th.join(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
