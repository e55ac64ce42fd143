#!/usr/bin/env python3
"""Part 1: the engine alone, one core, no I/O: raw bytes in memory -> parse -> pair -> orjson bytes.

What is timed per record is exactly the sidecar's per-message work minus Kafka: decode the key,
build the Kafka-style `source`, `Pipeline.feed` (orjson parse, format detection and
normalization, pairing, failure tagging, accounting), then `orjson.dumps` of every output record.
The warm-up (one open call per conversation, so the engine holds K open conversations) is fed
first and timed separately; the measured stream then runs against that steady state.

    python bench/engine_bench.py                           # 1k, 100k, 1M open conversations
    python bench/engine_bench.py --conversations 1000 --records 200000 --repeat 5
    python bench/engine_bench.py --conversations 100000 --profile   # pyinstrument, text tree

It prints figures; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import datagen

from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline

GC_MODE = "default"
GC_PAUSES: list[float] = []  # seconds of each cyclic-GC collection during the timed loop
_gc_started = [0.0]


def _gc_callback(phase: str, info: dict[str, Any]) -> None:
    """Times every collection: with a million held objects, full collections are a real cost."""
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        GC_PAUSES.append(time.perf_counter() - _gc_started[0])


gc.callbacks.append(_gc_callback)


def engine_config(conversations: int, dt_ms: float) -> EngineConfig:
    """Limits raised so that the benchmark measures pairing, not evictions: room for every
    conversation, every held byte, and a call timeout far beyond a slot's revisit gap (~K records)."""
    return EngineConfig(
        call_timeout_ms=max(600_000.0, 20 * conversations * dt_ms),
        conversation_ttl_ms=max(3_600_000.0, 40 * conversations * dt_ms),
        max_conversations=2 * conversations + 1000,
        max_held_bytes=64 * 2**30,
    )


def make_pipeline(conversations: int, dt_ms: float, tagger: bool) -> Pipeline:
    tag: Any = None
    if tagger:
        from tests.reference.tagging import FailureTagger  # noqa: PLC0415 - optional part of the run

        tag = FailureTagger(None)  # the sidecar's default: no tool schemas, default loop brakes
    return Pipeline(Engine(engine_config(conversations, dt_ms), tagger=tag))


def run(
    pipeline: Pipeline, records: list[tuple[bytes, bytes]], offset0: int
) -> tuple[float, float, int, int]:
    """The timed loop. Returns (wall seconds, CPU seconds, output records, output bytes). CPU time
    is reported beside wall time because the machine is shared: CPU seconds of this one thread are
    what the code costs, wall seconds also count the time other processes held the core."""
    feed = pipeline.feed
    dumps = orjson.dumps
    if GC_MODE == "freeze":
        gc.freeze()  # the warm-up's objects (held state) leave the collector's generations
    elif GC_MODE == "off":
        gc.disable()
    n_out = 0
    n_bytes = 0
    GC_PAUSES.clear()
    c0 = time.thread_time()
    t0 = time.perf_counter()
    for i, (key, raw) in enumerate(records, offset0):
        source = {"topic": "bench", "partition": 0, "offset": i}
        out = feed(raw, source, key=key.decode())
        for rec in out:
            n_bytes += len(dumps(rec))
        n_out += len(out)
    wall = time.perf_counter() - t0
    gc.enable()
    return wall, time.thread_time() - c0, n_out, n_bytes


def stages(ds: datagen.Dataset, k: int, args: argparse.Namespace) -> None:
    """Where the time goes, without a profiler's distortion: the same records through cumulative
    stages, CPU time each, the difference between two stages is the cost of the one added."""
    from stream_pairer.core.formats import parse_record  # noqa: PLC0415

    recs = ds.records
    n = len(recs)
    loads, dumps = orjson.loads, orjson.dumps

    def timed(fn: Any) -> float:
        gc.collect()
        c0 = time.thread_time()
        fn()
        return 1e6 * (time.thread_time() - c0) / n

    def s_loop() -> None:
        for i, (key, _raw) in enumerate(recs):
            _ = {"topic": "bench", "partition": 0, "offset": i}
            key.decode()

    def s_loads() -> None:
        for i, (key, raw) in enumerate(recs):
            _ = {"topic": "bench", "partition": 0, "offset": i}
            key.decode()
            loads(raw)

    def s_parse() -> None:
        for i, (key, raw) in enumerate(recs):
            parse_record(raw, {"topic": "bench", "partition": 0, "offset": i}, key=key.decode())

    outs: list[Any] = []

    def pipe(tagger: bool, dump: bool, keep: bool = False) -> Any:
        p = make_pipeline(k, args.dt_ms, tagger)
        run(p, ds.warmup, 0)  # not timed: brings the engine to K open conversations

        def go() -> None:
            feed = p.feed
            for i, (key, raw) in enumerate(recs, len(ds.warmup)):
                out = feed(raw, {"topic": "bench", "partition": 0, "offset": i}, key=key.decode())
                if dump:
                    for rec in out:
                        dumps(rec)
                if keep:
                    outs.extend(out)

        return go

    def s_dumps() -> None:
        for rec in outs:
            dumps(rec)

    rows = [
        ("loop: key decode + source dict", timed(s_loop)),
        ("+ orjson.loads", timed(s_loads)),
        ("+ format detection / normalization (parse_record)", timed(s_parse)),
        ("+ pairing engine, no tagging", timed(pipe(False, False))),
        ("+ failure tagging", timed(pipe(True, False))),
        ("+ orjson.dumps of every output (= the full benchmark)", timed(pipe(True, True))),
    ]
    pipe(True, False, keep=True)()  # untimed: the outputs, for dumps alone
    dump_only = timed(s_dumps)
    print(f"[K={k:,}] stage costs, CPU microseconds per input record (cumulative; load {common.loadavg()}):")
    prev = 0.0
    for name, us in rows:
        print(f"  {us:7.2f} us  ({us - prev:+6.2f})  {name}")
        common.record(
            "engine_stages",
            {
                "conversations": k,
                "stage": name,
                "us_cumulative": round(us, 2),
                "us_added": round(us - prev, 2),
                "records": n,
            },
        )
        prev = us
    print(f"  orjson.dumps alone of the {len(outs):,} output records: {dump_only:.2f} us per input record")


def bench_one(k: int, n: int, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    ds = datagen.generate(k, n, seed=args.seed, dt_ms=args.dt_ms)
    gen_s = time.perf_counter() - t0
    print(f"[K={k:,}] data: {ds.describe()} (generated in {gen_s:.1f}s)", flush=True)
    if args.stages:
        stages(ds, k, args)
        return {}
    rates: list[float] = []
    cpu_rates: list[float] = []
    row: dict[str, Any] = {}
    for rep in range(args.repeat):
        gc.collect()
        pipeline = make_pipeline(k, args.dt_ms, not args.no_tagger)
        rss0 = common.rss_bytes()
        tw, _, _, _ = run(pipeline, ds.warmup, 0)
        engine = pipeline.engine
        rss_warm = common.rss_bytes()
        ev0 = sum(pipeline.summary.events.values())
        load_before = common.loadavg()
        if args.profile and rep == 0:
            from pyinstrument import Profiler  # noqa: PLC0415 - only when profiling

            prof = Profiler(interval=0.0005)
            prof.start()
            secs, cpu, n_out, n_bytes = run(pipeline, ds.records, len(ds.warmup))
            prof.stop()
            path = common.RESULTS / f"engine_profile_K{k}.txt"
            common.RESULTS.mkdir(parents=True, exist_ok=True)
            path.write_text(prof.output_text(unicode=False, color=False, show_all=False))
            print(f"  profile (pyinstrument, timing inflated by the profiler) -> {path}")
        else:
            secs, cpu, n_out, n_bytes = run(pipeline, ds.records, len(ds.warmup))
        events = sum(pipeline.summary.events.values()) - ev0
        recs = len(ds.records)
        rate = recs / secs
        if not (args.profile and rep == 0):
            rates.append(rate)
            cpu_rates.append(recs / cpu)
        row = {
            "conversations": k,
            "records": recs,
            "tool_events": events,
            "seconds": round(secs, 3),
            "records_per_s": round(rate),
            "cpu_seconds": round(cpu, 3),
            "records_per_cpu_s": round(recs / cpu),
            "tool_events_per_s": round(events / secs),
            "us_per_record": round(1e6 * secs / recs, 2),
            "outputs": n_out,
            "output_mib": round(n_bytes / 2**20, 1),
            "warmup_records_per_s": round(len(ds.warmup) / tw),
            "open_conversations": engine.open_conversations,
            "open_calls": engine.open_calls,
            "held_bytes": engine.held_bytes,
            "rss_before_warmup_mib": round(rss0 / 2**20),
            "rss_after_warmup_mib": round(rss_warm / 2**20),
            "rss_end_mib": round(common.rss_bytes() / 2**20),
            "gc_seconds": round(sum(GC_PAUSES), 3),
            "gc_collections": len(GC_PAUSES),
            "gc_max_pause_ms": round(1000 * max(GC_PAUSES, default=0.0), 1),
            "tagger": not args.no_tagger,
            "gc": args.gc,
            "gc_threshold": list(gc.get_threshold()),
            "profiled": bool(args.profile and rep == 0),
            "load_before": load_before,
        }
        common.record("engine", row)
        print(
            f"  rep {rep + 1}: {common.fmt_rate(rate)} records/s wall, {common.fmt_rate(recs / cpu)} "
            f"records/CPU-s ({common.fmt_rate(events / secs)} tool events/s wall, "
            f"{row['us_per_record']} us/record wall, {1e6 * cpu / recs:.2f} us CPU)"
            f"{' [profiled]' if row['profiled'] else ''}; cyclic GC {row['gc_seconds']}s in "
            f"{row['gc_collections']} collections (longest {row['gc_max_pause_ms']} ms); "
            f"open conversations {engine.open_conversations:,}, open calls {engine.open_calls:,}, "
            f"held {engine.held_bytes / 2**20:,.0f} MiB, RSS {row['rss_before_warmup_mib']:,} -> "
            f"{row['rss_after_warmup_mib']:,} -> {row['rss_end_mib']:,} MiB; load {load_before} -> "
            f"{common.loadavg()}",
            flush=True,
        )
        del pipeline, engine
    if rates:
        print(
            f"[K={k:,}] records/s over {len(rates)} runs: "
            f"median {common.fmt_rate(statistics.median(rates))}, "
            f"min {common.fmt_rate(min(rates))}, max {common.fmt_rate(max(rates))} (wall); per CPU-second: "
            f"median {common.fmt_rate(statistics.median(cpu_rates))}, min {common.fmt_rate(min(cpu_rates))}, "
            f"max {common.fmt_rate(max(cpu_rates))}; load {common.loadavg()}",
            flush=True,
        )
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    p.add_argument("--records", type=int, default=300_000, help="measured records per run")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dt-ms", type=float, default=1.0, help="event-time step between records")
    p.add_argument("--no-tagger", action="store_true", help="pair without failure tagging")
    p.add_argument("--profile", action="store_true", help="profile the first run with pyinstrument")
    p.add_argument(
        "--gc",
        choices=("default", "freeze", "off", "tuned"),
        default="default",
        help="cyclic GC during the timed loop: CPython's defaults, gc.freeze() after warm-up, "
        "disabled, or tuned as the CLI commands do at start-up (stream_pairer.ops.gctune.tune_gc)",
    )
    p.add_argument(
        "--gc-threshold",
        type=int,
        nargs=3,
        metavar=("GEN0", "GEN1", "GEN2"),
        default=None,
        help="with --gc tuned: these thresholds instead of gctune.THRESHOLDS",
    )
    p.add_argument("--gc-no-freeze", action="store_true", help="with --gc tuned: no gc.freeze() at start-up")
    p.add_argument(
        "--stages", action="store_true", help="cost of each stage (loads, parse, pair, tag, dumps)"
    )
    args = p.parse_args()
    global GC_MODE  # noqa: PLW0603 - a run-wide switch set once from the command line
    GC_MODE = args.gc
    if args.gc == "tuned":
        from stream_pairer.ops import gctune  # noqa: PLC0415 - after common put this checkout first

        thresholds = tuple(args.gc_threshold) if args.gc_threshold else gctune.THRESHOLDS
        gctune.tune_gc(thresholds, freeze=not args.gc_no_freeze)  # type: ignore[arg-type]
        print(f"gc: thresholds {gc.get_threshold()}, frozen {gc.get_freeze_count():,}", flush=True)
    m = common.machine()
    print(f"machine: {m}; load {common.loadavg()}", flush=True)
    for k in args.conversations:
        bench_one(k, args.records, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
