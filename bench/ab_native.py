#!/usr/bin/env python3
"""Two builds of the compiled core in one process, interleaved per repeat: CPU time per record.

Why: on a shared machine (load 10-25 on 2 cores) two separate runs of native_bench.py differ by
more than most changes do; here both builds, and the orjson yardstick, run on the same data in the
same time window, one after the other within each repeat, so the load hits all of them alike.
Each build is the `.so` a `cargo build --release` leaves (copy the old one aside before rebuilding).

    python bench/ab_native.py /tmp/old.so stream_pairer/_native.abi3.so --conversations 1000 100000

Variants: `native_tag` (tagging on, `FailureTagger` defaults, default --raw: what `--engine auto`
runs) and `native` (tagging off) of each build, as bench/native_bench.py defines them. It prints
figures; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import gc
import importlib.machinery
import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datagen
import native_bench as nb

from stream_pairer.core import native


def _load(path: str) -> ModuleType:
    """The extension at `path` under the package's module name (its init function's name)."""
    loader = importlib.machinery.ExtensionFileLoader("stream_pairer._native", path)
    spec = importlib.util.spec_from_file_location("stream_pairer._native", path, loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", help="the first build's .so (say, before)")
    p.add_argument("b", help="the second build's .so (say, after)")
    p.add_argument("--conversations", type=int, nargs="+", default=[1000, 100_000])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    builds = {"a": _load(args.a), "b": _load(args.b)}
    rows = [("orjson", None, "orjson")]
    for v in ("native_tag", "native"):
        rows += [(f"a {v}", "a", v), (f"b {v}", "b", v)]
    for k in args.conversations:
        ds = datagen.generate(k, args.records, seed=42, dt_ms=1.0)
        times: dict[str, list[float]] = {name: [] for name, _, _ in rows}
        for _ in range(args.repeat):
            for name, build, variant in rows:
                if build is not None:
                    native._Core = builds[build].Core
                step = nb.VARIANTS[variant](k, 1.0)
                nb.run(step, ds.warmup, 0)
                gc.collect()
                times[name].append(nb.run(step, ds.records, len(ds.warmup)))
                del step
                nb.NATIVE.clear()
                gc.collect()
        base = statistics.median(times["orjson"])
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"K={k:,} open conversations, {len(ds.records):,} records, {args.repeat} repeats, load {load}")
        for name, ts in times.items():
            med = statistics.median(ts)
            us = 1e6 * med / len(ds.records)
            each = " ".join(f"{1e6 * t / len(ds.records):.2f}" for t in ts)
            print(f"  {name:14s} {us:6.2f} us/record  {med / base:5.2f}x orjson  ({each})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
