#!/usr/bin/env python3
"""Produce benchmark records at a steady rate (for the latency and soak runs).

Records come from the same seeded generator as every other benchmark, made before the clock
starts (up to `--pregen` seconds of them; past those, in one-second slices); their event time
advances 1000/rate ms per record, so event time keeps pace with wall time and call timeouts
expire at the rate they would in production. Sends are paced in 10 ms steps; the achieved rate
is printed at the end (a producer that falls behind says so).

    python bench/rate_producer.py --bootstrap-servers H:P --topic T --rate 5000 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datagen


async def produce(args: argparse.Namespace) -> None:
    gen = datagen.Generator(args.conversations, seed=args.seed, dt_ms=1000.0 / args.rate)
    backlog = gen.warmup()  # the first K records open one call per conversation
    # The whole run is generated before the clock starts: made in one-second slices during the
    # run, each slice stalled the sends for tens of ms and arrived as a burst, and the latency
    # figures measured this producer's pauses as the sidecar's tail.
    # (Up to --pregen seconds of it, for a long soak's memory's sake: past them, slices again.)
    while len(backlog) < args.rate * (min(args.duration, args.pregen) + 1):
        backlog.extend(gen.stream(args.rate))
    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap_servers, acks="all", linger_ms=2, max_batch_size=256 * 1024
    )
    await producer.start()
    step = 0.01
    per_step = args.rate * step
    sent = 0
    credit = 0.0
    t0 = time.monotonic()
    end = t0 + args.duration
    try:
        while (now := time.monotonic()) < end:
            credit = (now - t0) * args.rate - sent
            n = int(credit)
            if len(backlog) < n + args.rate:
                backlog.extend(gen.stream(args.rate))
            batch, backlog = backlog[:n], backlog[n:]
            for key, value in batch:
                await producer.send(args.topic, value, key=key)
            sent += len(batch)
            await asyncio.sleep(max(0.0, step - (time.monotonic() - now)) if per_step else step)
        await producer.flush()
    finally:
        await producer.stop()
    took = time.monotonic() - t0
    print(
        f"rate_producer: sent {sent} records in {took:.1f}s = {sent / took:,.0f}/s (asked {args.rate}/s)",
        flush=True,
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--rate", type=int, required=True, help="records per second")
    p.add_argument("--duration", type=float, required=True, help="seconds")
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--pregen", type=float, default=120.0, help="seconds of traffic made before the clock starts"
    )
    asyncio.run(produce(p.parse_args()))
