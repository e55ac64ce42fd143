#!/usr/bin/env python3
"""Part 5: latency from a result's arrival to its pair being acknowledged, at a steady rate.

* arrival: the broker's append time of the result record on the input topic (LogAppendTime);
* acknowledged: the broker's append time of the pair on `<topic>.pairs` (with acks=all on this
  one-broker setup that is when the sidecar's send is acknowledged), and, as the stricter reading,
  the moment a `read_committed` consumer receives it (after the transaction commits, in
  exactly-once mode; it includes this probe's own fetch wait, `fetch_max_wait_ms=5`).

The rate defaults to half of the latest sidecar steady rate in bench/results/e2e.jsonl.

    python bench/latency.py --duration 60                  # at-least-once, then exactly-once
    python bench/latency.py --rate 4000 --modes alo
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer

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


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_mode(broker: kb.Broker, mode: str, rate: int, args: argparse.Namespace) -> dict[str, Any]:
    b = broker.bootstrap
    topic = f"bench-latency-{mode}-{uuid.uuid4().hex[:6]}"
    kb.create_topics(
        b, [topic, f"{topic}.pairs", f"{topic}.orphans", f"{topic}.dead-letter"], args.partitions
    )
    port = args.http_port
    cmd = [
        "stream-pairer",
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
    log = kb.DATA_DIR / f"{topic}.log"
    side = kb.spawn(cmd, log)
    got: list[tuple[float, int, bytes]] = []
    try:
        wait_ready(port)
        load_before = common.loadavg()
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
        hist = histogram_quantiles(scrape(port), "stream_pairer_emit_latency_seconds")
    finally:
        kb.stop([side])
    arrivals: dict[tuple[int, int], int] = {}
    for line in kb.read_back(b, topic, "%p %o %T\\n"):
        p, o, t = line.split()
        arrivals[(int(p), int(o))] = int(t)
    ack: list[float] = []
    seen: list[float] = []
    for recv, ts, value in got:
        src = orjson.loads(value)["result"]["source"]
        t_in = arrivals.get((src["partition"], src["offset"]))
        if t_in is None:
            continue
        ack.append(ts - t_in)
        seen.append(recv * 1000 - t_in)
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
        "load_before": load_before,
        "load_after": load_after,
        "kafka": broker.version,
    }
    common.record("latency", row)
    print(
        f"{mode}: rate {rate}/s, {len(ack)} pairs: arrival->ack p50 {row['ack_p50_ms']} ms, p99 "
        f"{row['ack_p99_ms']} ms (max {row['ack_max_ms']}); arrival->visible (read_committed) p50 "
        f"{row['visible_p50_ms']} ms, p99 {row['visible_p99_ms']} ms; sidecar histogram {hist}; "
        f"load {load_before} -> {load_after}",
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
    args = p.parse_args()
    rate = args.rate
    if rate is None:
        peak = peak_from_results()
        if peak is None:
            sys.exit("no sidecar rate in bench/results/e2e.jsonl: run bench/e2e.py first or pass --rate")
        rate = int(peak / 2)
        print(f"rate: half of the latest measured sidecar steady rate {peak:,.0f}/s = {rate}/s")
    broker = kb.Broker(args.bootstrap_servers)
    try:
        for mode in args.modes:
            run_mode(broker, mode, rate, args)
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
