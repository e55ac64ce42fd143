#!/usr/bin/env python3
"""The compiled core against the Python pipeline and an orjson round trip, CPU time per record.

Per record, each variant does what the sidecar does minus Kafka: build the Kafka-style `source`,
then
* `orjson`: `orjson.loads` of the record and `orjson.dumps` of the result (the issue-15 yardstick);
* `python`: `Pipeline.feed` (no tagger) and `orjson.dumps` of every output record;
* `native`: `NativePipeline.feed`, whose outputs are already encoded;
* `python_tag` / `native_tag` (`--tagging`): the same with failure tagging on, a `FailureTagger`
  at its defaults (what `pair` and the sidecar always run).
Each variant first takes the warm-up (one open call per conversation: K open conversations), not
timed; the measured stream then runs against that steady state. Variants are interleaved per
repeat (the machine is shared) and the median CPU time of the repeats is printed, with the ratio
to the orjson round trip and, for `native`, which share of records the fast path read.

    python bench/native_bench.py                                   # 1k, 100k, 1M conversations
    python bench/native_bench.py --conversations 1000 --records 200000 --repeat 5
    python bench/native_bench.py --canonical-only                  # only the canonical records
    python bench/native_bench.py --format gemini                   # the same traffic as Gemini records
    python bench/native_bench.py --conversations 100000 --memory   # RSS per open conversation
    python bench/native_bench.py --conversations 1000 100000 --tagging   # + tagging on
    python bench/native_bench.py --conversations 1000 --raw omit   # the lean output shape (--raw)
    python bench/native_bench.py --variants orjson native routed partition-python partition-native
        # + routed outputs (the sidecar's shape) and a whole Kafka partition (stream/partition.py)

It prints figures; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import datagen
import stream_formats
from engine_bench import engine_config

from stream_pairer.core import native
from stream_pairer.core.vocab import DEFAULT_RAW_MODE, RawMode
from stream_pairer.stream.partition import OutputTopics, PartitionState
from tests.reference.engine import Engine, EngineConfig
from tests.reference.engines import make_pipeline
from tests.reference.pipeline import Pipeline
from tests.reference.tagging import FailureTagger

Records = list[tuple[bytes, bytes]]
RAW = [DEFAULT_RAW_MODE]  # --raw: the output shape both pipelines write


def _config(k: int, dt: float) -> EngineConfig:
    return replace(engine_config(k, dt), raw=RAW[0])


def _orjson(_k: int, _dt: float) -> Callable[[bytes, dict[str, Any], str], int]:
    loads, dumps = orjson.loads, orjson.dumps

    def step(raw: bytes, _src: dict[str, Any], _key: str) -> int:
        return len(dumps(loads(raw)))

    return step


def _python(
    k: int, dt: float, tagger: FailureTagger | None = None
) -> Callable[[bytes, dict[str, Any], str], int]:
    feed = Pipeline(Engine(_config(k, dt), tagger)).feed
    dumps = orjson.dumps

    def step(raw: bytes, src: dict[str, Any], key: str) -> int:
        n = 0
        for rec in feed(raw, src, key=key):
            n += len(dumps(rec))
        return n

    return step


NATIVE: list[native.NativePipeline] = []


def _native(
    k: int, dt: float, tagger: FailureTagger | None = None
) -> Callable[[bytes, dict[str, Any], str], int]:
    pipe = native.NativePipeline(_config(k, dt), tagger=tagger)
    NATIVE[:] = [pipe]
    feed = pipe.feed

    def step(raw: bytes, src: dict[str, Any], key: str) -> int:
        n = 0
        for b in feed(raw, src, key=key):
            n += len(b)
        return n

    return step


def _python_tag(k: int, dt: float) -> Callable[[bytes, dict[str, Any], str], int]:
    return _python(k, dt, FailureTagger())


def _native_tag(k: int, dt: float) -> Callable[[bytes, dict[str, Any], str], int]:
    return _native(k, dt, FailureTagger())


def _routed(k: int, dt: float) -> Callable[[bytes, dict[str, Any], str], int]:
    """The sidecar's shape: each output with its kind, key and OutputMeta (`routed=True`)."""
    pipe = native.NativePipeline(_config(k, dt), routed=True)
    feed = pipe.feed

    def step(raw: bytes, src: dict[str, Any], key: str) -> int:
        n = 0
        for b, _kind, _cid, _meta in feed(raw, src, key=key):
            n += len(b)
        return n

    return step


def _partition(engine: str) -> Callable[[int, float], Callable[[bytes, dict[str, Any], str], int]]:
    """A whole Kafka partition (stream/partition.py: routing, commit bookkeeping) on `engine`,
    one fetched record at a time; the Python engine's outputs are encoded as the sidecar does."""

    def make(k: int, dt: float) -> Callable[[bytes, dict[str, Any], str], int]:
        pipe = make_pipeline(engine, _config(k, dt), routed=True)  # type: ignore[arg-type]
        state = PartitionState("bench", 0, pipe, OutputTopics.for_input("bench"), start_offset=None)
        dumps = orjson.dumps

        def step(raw: bytes, src: dict[str, Any], key: str) -> int:
            msg = _Msg(src["offset"], key.encode(), raw, 0)
            n = 0
            for e in state.feed([msg], 0.0):
                n += len(e.record) if isinstance(e.record, bytes) else len(dumps(e.record))
            return n

        return step

    return make


class _Msg(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


Step = Callable[[bytes, dict[str, Any], str], int]
VARIANTS: dict[str, Callable[[int, float], Step]] = {
    "orjson": _orjson,
    "python": _python,
    "native": _native,
    "routed": _routed,
    "partition-python": _partition("python"),
    "partition-native": _partition("native"),
    "python_tag": _python_tag,
    "native_tag": _native_tag,
}
DEFAULT_VARIANTS = ["orjson", "python", "native"]


def run(step: Callable[[bytes, dict[str, Any], str], int], recs: Records, offset0: int) -> float:
    """CPU seconds of this thread for the loop (the machine is shared: CPU, not wall time)."""
    c0 = time.thread_time()
    for i, (key, raw) in enumerate(recs, offset0):
        step(raw, {"topic": "bench", "partition": 0, "offset": i}, key.decode())
    return time.thread_time() - c0


def bench(k: int, n: int, args: argparse.Namespace) -> None:
    ds = datagen.generate(k, n, seed=args.seed, dt_ms=args.dt_ms)
    warm, recs = ds.warmup, ds.records
    if args.canonical_only:
        warm = [r for r in warm if b'"type":"tool_' in r[1][:120]]
        recs = [r for r in recs if b'"type":"tool_' in r[1][:120]]
    if args.format != "mix":  # the same conversations, written as Bedrock / Gemini / MCP records
        rewriter = stream_formats.Rewriter(args.format)
        warm, recs = rewriter.records(warm), rewriter.records(recs)
    times: dict[str, list[float]] = {v: [] for v in args.variants}
    share: dict[str, str] = {}
    for _ in range(args.repeat):
        for v in args.variants:
            step = VARIANTS[v](k, args.dt_ms)
            run(step, warm, 0)
            gc.collect()
            times[v].append(run(step, recs, len(warm)))
            if v.startswith("native"):
                p = NATIVE[0]
                share[v] = f"fast path read {p.core.fast_records / p.core.records:.0%} of records"
            del step
            NATIVE.clear()
            gc.collect()
    base = statistics.median(times["orjson"]) if "orjson" in times else None
    mean = sum(len(r) for _, r in recs) / len(recs)
    print(
        f"K={k:,} open conversations, {len(recs):,} measured records (+{len(warm):,} warm-up), "
        f"format {args.format}, mean {mean:,.0f} B/record"
    )
    for v, ts in times.items():
        med = statistics.median(ts)
        us = 1e6 * med / len(recs)
        ratio = f"  {med / base:5.2f}x orjson" if base else ""
        note = f"  ({share[v]})" if v in share else ""
        print(f"  {v:10s} {us:7.2f} us/record CPU  {len(recs) / med:>10,.0f} records/s{ratio}{note}")
        common.record(
            "native",
            {
                "conversations": k,
                "format": args.format,
                "records": len(recs),
                "variant": v,
                "us_per_record": round(us, 3),
                "ratio_vs_orjson": round(med / base, 3) if base else None,
                "repeat": args.repeat,
            },
        )


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def memory(k: int, args: argparse.Namespace) -> None:
    """RSS growth of the compiled core holding K open conversations (the warm-up), per conversation,
    beside its held-bytes gauge (which keeps the Python engine's estimate, `engine.held_cost`)."""
    ds = datagen.generate(k, 1000, seed=args.seed, dt_ms=args.dt_ms)
    gc.collect()
    before = _rss_mib()
    pipe = native.NativePipeline(_config(k, args.dt_ms))
    for i, (key, raw) in enumerate(ds.warmup):
        pipe.feed(raw, {"topic": "bench", "partition": 0, "offset": i}, key=key.decode())
    gc.collect()
    grown = _rss_mib() - before
    raw_mib = sum(len(v) for _, v in ds.warmup) / 2**20
    print(
        f"K={k:,}: {len(ds.warmup):,} warm-up records ({raw_mib:,.0f} MiB raw), {pipe.core.held_count:,} "
        f"held events: RSS +{grown:,.0f} MiB = {grown * 2**20 / k:,.0f} B per conversation; "
        f"held-bytes gauge {pipe.core.held_bytes / 2**20:,.0f} MiB"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    p.add_argument("--records", type=int, default=200_000, help="measured records per run")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dt-ms", type=float, default=1.0)
    p.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    p.add_argument("--tagging", action="store_true", help="add python_tag and native_tag (FailureTagger on)")
    p.add_argument("--canonical-only", action="store_true", help="keep only canonical records")
    p.add_argument(
        "--format",
        choices=["mix", *stream_formats.FORMATS],
        default="mix",
        help="mix: datagen's format mix; or its traffic re-written as one stream format",
    )
    p.add_argument("--memory", action="store_true", help="only the compiled core's RSS per conversation")
    modes = [m.value for m in RawMode]
    p.add_argument(
        "--raw", choices=modes, default=DEFAULT_RAW_MODE.value, help="output shape (README, Output size)"
    )
    args = p.parse_args()
    RAW[0] = RawMode(args.raw)
    if args.tagging:
        args.variants += [v for v in ("python_tag", "native_tag") if v not in args.variants]
    for k in args.conversations:
        if args.memory:
            memory(k, args)
        else:
            bench(k, args.records, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
