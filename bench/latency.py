#!/usr/bin/env python3
"""Part 5: latency from a result's arrival to its pair being acknowledged, at a steady rate.

* arrival: the broker's append time of the result record on the input topic (LogAppendTime);
* acknowledged: the broker's append time of the pair on `<topic>.pairs` (with acks=all on this
  one-broker setup that is when the sidecar's send is acknowledged), and, as the stricter reading,
  the moment a `read_committed` consumer receives it (after the transaction commits, in
  exactly-once mode; it includes this probe's own fetch wait, `fetch_max_wait_ms=5`).

The rate defaults to half of the latest sidecar steady rate in bench/results/e2e.jsonl; `--rates`
runs several fixed rates (issue 25: 1k, 5k, 10k records/s).

Measured apart from the harness (issue 25): the sidecar runs under `taskset` on its own CPUs
(`--sidecar-cpus`, default the first), and this script, the rate producer and the read_committed
probe run on the others (`--harness-cpus`), so harness saturation no longer shows up as sidecar
latency. The broker it starts is not pinned (`--pin-broker` pins it with the harness): in a
deployment it is another machine, and on a 2-CPU box pinned beside the producer and the probe it
was starved by them, which exactly-once (transaction markers, read_committed fetches) measured as a
visible p99 of 450-520 ms at 5k/s against ~220 ms unpinned (2026-12-06). Beside the end-to-end
figures it prints the sidecar's own per-stage quantiles (`stream_pairer_stage_seconds`: fetch wait,
engine, linger, produce, commit/transaction; see stream_pairer/ops/stages.py), read from its
/metrics at the end of each run.

    python bench/latency.py --duration 60                  # at-least-once, then exactly-once
    python bench/latency.py --rate 4000 --modes alo
    python bench/latency.py --rates 1000 5000 10000 --duration 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import kafkabench as kb

PY = sys.executable


def peak_from_results() -> float | None:
    """The steady rate of the latest complete single-process sidecar run on 4 partitions."""
    path = common.RESULTS / "e2e.jsonl"
    if not path.exists():
        return None
    rates = [
        float(r["steady_records_per_s"])
        for r in map(orjson.loads, path.read_bytes().splitlines())
        if r.get("runner") == "sidecar"
        and r.get("complete")
        and r.get("processes") == 1
        and r.get("partitions") == 4
        and r.get("steady_records_per_s")
    ]
    return rates[-1] if rates else None


def wait_ready(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r,
        ):
            if r.status == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"sidecar not ready on port {port} after {timeout}s")


def scrape(port: int) -> str:
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r,
    ):
        return str(r.read().decode())
    return ""


def histogram_quantiles(text: str, name: str, qs: tuple[float, ...] = (0.5, 0.99)) -> dict[str, float]:
    """Quantiles (upper bucket bounds) of a Prometheus histogram, summed over its label sets."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(le)] = buckets.get(float(le), 0.0) + float(line.rsplit(" ", 1)[1])
    if not buckets:
        return {}
    total = buckets[max(buckets)]
    out = {}
    for q in qs:
        for le in sorted(buckets):
            if total and buckets[le] >= q * total:
                out[f"p{q * 100:g}"] = le
                break
    return out


async def probe(
    bootstrap: str, topic: str, stop_at: list[float], out: list[tuple[float, int, bytes]]
) -> None:
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=5,
        enable_auto_commit=False,
    )
    await c.start()
    try:
        while not stop_at or time.time() < stop_at[0]:
            batches = await c.getmany(timeout_ms=100)
            now = time.time()
            for msgs in batches.values():
                for m in msgs:
                    out.append((now, m.timestamp, m.value))
    finally:
        await c.stop()


def cpu_seconds(text: str) -> float:
    """The sidecar's `process_cpu_seconds_total` from a /metrics page (0 when absent)."""
    for line in text.splitlines():
        if line.startswith("process_cpu_seconds_total "):
            return float(line.split()[1])
    return 0.0


def stage_quantiles(text: str) -> dict[str, dict[str, float]]:
    """Per stage of `stream_pairer_stage_seconds`: p50/p99 in ms (upper bucket bounds)."""
    out: dict[str, dict[str, float]] = {}
    for stage in ("fetch_wait", "engine", "linger", "produce", "commit"):
        mine = "\n".join(line for line in text.splitlines() if f'stage="{stage}"' in line)
        qs = histogram_quantiles(mine, "stream_pairer_stage_seconds")
        if qs:
            out[stage] = {k: round(v * 1000, 2) for k, v in qs.items()}
    return out


async def append_times(bootstrap: str, topic: str) -> dict[tuple[int, int], int]:
    """(partition, offset) -> the broker's append time of every input record (no kcat needed)."""
    c = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await c.start()
    out: dict[tuple[int, int], int] = {}
    try:
        ends = await c.end_offsets(list(c.assignment()) or [])
        while not ends:
            await asyncio.sleep(0.1)
            ends = await c.end_offsets(list(c.assignment()))
        while [tp for tp, end in ends.items() if await c.position(tp) < end]:
            for tp, msgs in (await c.getmany(timeout_ms=500, max_records=50_000)).items():
                for m in msgs:
                    out[(tp.partition, m.offset)] = m.timestamp
    finally:
        await c.stop()
    return out


def warm(bootstrap: str, rounds: int = 30) -> None:
    """Transactions and group commits on the broker before any run: a fresh broker creates its
    `__transaction_state` and `__consumer_offsets` topics and warms its JIT on the first ones,
    one-time costs a production cluster is past. Measured, it was not what made exactly-once slow
    on a fresh broker (visible p99 454 ms warmed against 522 cold, both with the broker pinned
    beside the harness; 92-179 ms unpinned): the broker's CPU was (the module docstring). It stays
    so that no run, the first included, pays those one-time costs."""
    topic = f"bench-latency-warm-{uuid.uuid4().hex[:6]}"
    kb.create_topics(bootstrap, [topic], 1)

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"warm-{topic}")
        await producer.start()
        try:
            for i in range(rounds):
                async with producer.transaction():
                    await producer.send(topic, b"warm")
                    await producer.send_offsets_to_transaction(
                        {TopicPartition(topic, 0): OffsetAndMetadata(i, "")}, f"warm-{topic}"
                    )
        finally:
            await producer.stop()

    asyncio.run(go())


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latencies(
    got: list[tuple[float, int, bytes]], arrivals: dict[tuple[int, int], int]
) -> tuple[list[float], list[float], list[tuple[int, int, float]]]:
    """Per pair: arrival to ack, arrival to visible (ms), and (arrival, ack, visible) in time order."""
    ack: list[float] = []
    seen: list[float] = []
    series: list[tuple[int, int, float]] = []  # (arrival ms, ack ms, visible ms): where the tail sits
    for recv, ts, value in got:
        src = orjson.loads(value)["result"]["source"]
        t_in = arrivals.get((src["partition"], src["offset"]))
        if t_in is None:
            continue
        ack.append(ts - t_in)
        seen.append(recv * 1000 - t_in)
        series.append((t_in, ts - t_in, round(recv * 1000 - t_in, 1)))
    return ack, seen, series


def run_mode(broker: kb.Broker, mode: str, rate: int, args: argparse.Namespace) -> dict[str, Any]:
    b = broker.bootstrap
    topic = f"bench-latency-{mode}-{uuid.uuid4().hex[:6]}"
    kb.create_topics(
        b, [topic, f"{topic}.pairs", f"{topic}.orphans", f"{topic}.dead-letter"], args.partitions
    )
    port = args.http_port
    pin = ["taskset", "-c", args.sidecar_cpus] if args.sidecar_cpus else []
    cmd = [
        *pin,
        PY,  # the work tree's package (PYTHONPATH), not whatever `stream-pairer` is on PATH
        "-m",
        "stream_pairer",
        "run",
        "--bootstrap-servers",
        b,
        "--input-topic",
        topic,
        "--group-id",
        f"lat-{uuid.uuid4().hex[:6]}",
        "--http-port",
        str(port),
        "--log-level",
        "WARNING",
    ]
    if mode == "eos":
        cmd.append("--exactly-once")
    cmd += args.sidecar_args
    log = kb.DATA_DIR / f"{topic}.log"
    side = kb.spawn(cmd, log)
    got: list[tuple[float, int, bytes]] = []
    try:
        wait_ready(port)
        load_before = common.loadavg()
        cpu_before, wall_before = cpu_seconds(scrape(port)), time.monotonic()
        prod = kb.spawn(
            [
                PY,
                "bench/rate_producer.py",
                "--bootstrap-servers",
                b,
                "--topic",
                topic,
                "--rate",
                str(rate),
                "--duration",
                str(args.duration),
                "--conversations",
                str(args.conversations),
            ],
            log,
        )
        stop_at: list[float] = []

        async def go() -> None:
            task = asyncio.create_task(probe(b, f"{topic}.pairs", stop_at, got))
            while prod.poll() is None:  # noqa: ASYNC110 - a child process, not an event
                await asyncio.sleep(0.5)
            stop_at.append(time.time() + 5.0)  # let the last pairs through
            await task

        asyncio.run(go())
        load_after = common.loadavg()
        text = scrape(port)
        # The sidecar's CPU share over the run: near 1.0 on its one pinned CPU, it is saturated
        # (or starved by other tenants) and its latency is queueing, not any setting.
        cpu_share = round((cpu_seconds(text) - cpu_before) / (time.monotonic() - wall_before), 2)
        hist = histogram_quantiles(text, "stream_pairer_emit_latency_seconds")
        stages = stage_quantiles(text)
    finally:
        kb.stop([side])
    arrivals = asyncio.run(append_times(b, topic))
    ack, seen, series = latencies(got, arrivals)
    if args.dump:
        Path(args.dump).write_bytes(orjson.dumps({"mode": mode, "rate": rate, "series": sorted(series)}))
    # The first seconds include the warm-up burst and group join; measure the steady part.
    skip = int(len(ack) * args.skip)
    ack, seen = ack[skip:], seen[skip:]
    row: dict[str, Any] = {
        "mode": mode,
        "rate": rate,
        "duration_s": args.duration,
        "pairs": len(ack),
        "ack_p50_ms": round(pct(ack, 0.5), 1),
        "ack_p99_ms": round(pct(ack, 0.99), 1),
        "ack_max_ms": round(max(ack), 1),
        "visible_p50_ms": round(pct(seen, 0.5), 1),
        "visible_p99_ms": round(pct(seen, 0.99), 1),
        "ack_mean_ms": round(statistics.fmean(ack), 1),
        "sidecar_histogram_s": hist,
        "stages_ms": stages,
        "sidecar_cpu_share": cpu_share,
        "sidecar_cpus": args.sidecar_cpus,
        "harness_cpus": args.harness_cpus,
        "sidecar_args": args.sidecar_args,
        "load_before": load_before,
        "load_after": load_after,
        "kafka": broker.version,
    }
    common.record("latency", row)
    print(
        f"{mode}: rate {rate}/s, {len(ack)} pairs: arrival->ack p50 {row['ack_p50_ms']} ms, p99 "
        f"{row['ack_p99_ms']} ms (max {row['ack_max_ms']}); arrival->visible (read_committed) p50 "
        f"{row['visible_p50_ms']} ms, p99 {row['visible_p99_ms']} ms; sidecar histogram {hist}; "
        f"sidecar CPU {cpu_share:.0%}; load {load_before} -> {load_after}",
        flush=True,
    )
    print(
        "  stages p50/p99 ms: " + "; ".join(f"{k} {v.get('p50')}/{v.get('p99')}" for k, v in stages.items()),
        flush=True,
    )
    kb.delete_topics(b, topic)
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers")
    p.add_argument("--rate", type=int, help="records/s (default: half the latest measured sidecar rate)")
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--modes", nargs="+", default=["alo", "eos"], choices=["alo", "eos"])
    p.add_argument("--skip", type=float, default=0.1, help="fraction of the first pairs left out")
    p.add_argument("--http-port", type=int, default=19480)
    p.add_argument("--rates", type=int, nargs="+", help="several fixed rates, one run per mode each")
    cpus = sorted(os.sched_getaffinity(0))
    p.add_argument("--sidecar-cpus", default=str(cpus[0]), help="taskset CPU list of the sidecar ('' = none)")
    p.add_argument(
        "--harness-cpus",
        default=",".join(map(str, cpus[1:])) or str(cpus[0]),
        help="CPUs of this script, the producer, the probe and the broker it starts ('' = no pinning)",
    )
    p.add_argument("--dump", help="write each pair's (arrival, ack, visible) ms to this JSON file")
    p.add_argument(
        "--pin-broker", action="store_true", help="run the broker it starts on the harness CPUs too"
    )
    p.add_argument("--sidecar-args", nargs=argparse.REMAINDER, default=[], help="extra `run` options")
    args = p.parse_args()
    # The broker first: started before the harness pins itself, it is free to use every CPU.
    broker = None if args.pin_broker else kb.Broker(args.bootstrap_servers)
    if args.harness_cpus:
        os.sched_setaffinity(0, {int(c) for c in args.harness_cpus.split(",")})  # children inherit it
    rate = args.rate
    if args.rates:
        rates = args.rates
    elif rate is None:
        peak = peak_from_results()
        if peak is None:
            sys.exit("no sidecar rate in bench/results/e2e.jsonl: run bench/e2e.py first or pass --rate")
        rates = [int(peak / 2)]
        print(f"rate: half of the latest measured sidecar steady rate {peak:,.0f}/s = {rates[0]}/s")
    else:
        rates = [rate]
    broker = broker or kb.Broker(args.bootstrap_servers)
    try:
        warm(broker.bootstrap)
        for r in rates:
            for mode in args.modes:
                run_mode(broker, mode, r, args)
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
