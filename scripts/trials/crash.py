"""Trials that crash something: kill -9 of the sidecar, a broker restarted or killed, a cluster
node lost, a rebalance, and an overload far past the state limits.

Why apart from produce_side.py: these faults hit the input side and the process; the audit after
them proves nothing was lost (and, exactly-once, nothing doubled).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid

from kafka_broker import KafkaBroker, KafkaCluster

from trials.harness import Context, SidecarProc, TrialResult, _result, create_topic, metric, produce, settle
from trials.traffic import make_traffic


async def trial_kill(
    ctx: Context, rng: random.Random, exactly_once: bool, kind: str, repartition: bool = False
) -> TrialResult:
    """kill -9 of the sidecar at random points while input flows; restart after a random pause.
    With `repartition`, the input is not keyed by conversation (no message key: records of one
    conversation land on every partition) and the sidecar runs --repartition (two stages)."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=3)
    extra = ("--repartition",) if repartition else ()
    side = SidecarProc(
        "k", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=exactly_once, extra=extra
    )
    side.start()
    traffic = make_traffic(rng, rng.randint(150, 400))
    records = [(None, make) for _, make in traffic.records] if repartition else traffic.records
    duration = rng.uniform(4.0, 8.0)
    producing = asyncio.create_task(produce(bootstrap, topic, records, len(traffic) / duration))
    kills = rng.randint(1, 3)
    points = sorted(rng.uniform(0.3, duration + 2.0) for _ in range(kills))
    t0 = time.monotonic()
    for at in points:
        await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
        side.kill()
        await asyncio.sleep(rng.uniform(0.0, 1.5))
        side.start()
    await producing
    report = await settle(bootstrap, topic, exactly_once, check=side.check)
    side.stop()
    note = f"{side.kills} kills at {', '.join(f'{p:.1f}' for p in points)} s"
    if repartition:
        note += " (--repartition, unkeyed input)"
    return _result(kind, report, [side], started, note=note, exactly_once=exactly_once)


async def trial_rebalance(ctx: Context, rng: random.Random, exactly_once: bool, kind: str) -> TrialResult:
    """Two instances in one group: B joins mid-run (rebalance), then A is killed (rebalance again)."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=4)
    group = f"g-{topic}"
    a = SidecarProc("a", bootstrap, topic, group, ctx.workdir, exactly_once=exactly_once)
    b = SidecarProc("b", bootstrap, topic, group, ctx.workdir, exactly_once=exactly_once)
    a.start()
    traffic = make_traffic(rng, rng.randint(300, 500))
    duration = rng.uniform(8.0, 12.0)
    producing = asyncio.create_task(produce(bootstrap, topic, traffic.records, len(traffic) / duration))
    await asyncio.sleep(rng.uniform(1.5, 3.5))
    b.start()
    await asyncio.sleep(rng.uniform(3.0, 5.0))
    a.kill()
    await producing

    def check() -> None:
        b.check()

    report = await settle(bootstrap, topic, exactly_once, check=check)
    b.stop()
    return _result(kind, report, [a, b], started, note="b added, then a killed", exactly_once=exactly_once)


async def trial_broker_restart(
    ctx: Context, rng: random.Random, hard: bool, kind: str, exactly_once: bool | None = None
) -> TrialResult:
    """The broker goes away mid-run (SIGTERM, or SIGKILL when `hard`) and comes back on the same port
    and data; the sidecar keeps running and must recover by itself (no restart by us)."""
    started = time.monotonic()
    broker = KafkaBroker(ctx.workdir / f"broker-{uuid.uuid4().hex[:6]}").start()
    try:
        bootstrap = broker.bootstrap
        topic = await create_topic(bootstrap, partitions=2)
        if exactly_once is None:
            exactly_once = rng.random() < 0.5
        side = SidecarProc("b", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=exactly_once)
        side.start()
        traffic = make_traffic(rng, rng.randint(200, 300))
        half = len(traffic) // 2
        await produce(bootstrap, topic, traffic.records[:half], half / 3.0)
        await asyncio.sleep(rng.uniform(0.0, 1.0))
        (broker.kill if hard else broker.stop)()
        down = rng.uniform(3.0, 8.0)
        await asyncio.sleep(down)
        side.check()
        broker.start()
        await produce(bootstrap, topic, traffic.records[half:], (len(traffic) - half) / 3.0)
        report = await settle(bootstrap, topic, exactly_once, check=side.check)
        side.stop()
        mode = "EOS" if exactly_once else "ALO"
        note = f"broker {'killed' if hard else 'stopped'} for {down:.1f} s ({mode})"
        return _result(kind, report, [side], started, note=note, exactly_once=exactly_once)
    finally:
        broker.close()


async def trial_cluster(ctx: Context, rng: random.Random, exactly_once: bool, kind: str) -> TrialResult:
    """3 KRaft brokers, every topic with replication factor 3 (min ISR 2); one broker killed mid-run."""
    started = time.monotonic()
    cluster = KafkaCluster(3, ctx.workdir / f"cluster-{uuid.uuid4().hex[:6]}").start()
    try:
        bootstrap = cluster.bootstrap
        topic = await create_topic(bootstrap, partitions=3, replication=3)
        side = SidecarProc(
            "c",
            bootstrap,
            topic,
            f"g-{topic}",
            ctx.workdir,
            exactly_once=exactly_once,
            extra=("--replication-factor", "3"),
        )
        side.start()
        traffic = make_traffic(rng, rng.randint(300, 400))
        duration = rng.uniform(8.0, 10.0)
        producing = asyncio.create_task(produce(bootstrap, topic, traffic.records, len(traffic) / duration))
        await asyncio.sleep(rng.uniform(2.0, 5.0))
        victim = rng.randrange(3)
        cluster.kill(victim)
        await producing
        report = await settle(bootstrap, topic, exactly_once, check=side.check)
        side.stop()
        note = f"node {victim + 1} of 3 killed ({'EOS' if exactly_once else 'ALO'})"
        return _result(kind, report, [side], started, note=note, exactly_once=exactly_once)
    finally:
        cluster.close()


async def trial_overload(ctx: Context, rng: random.Random, kind: str) -> TrialResult:
    """A backlog produced far faster than the sidecar reads it, with conversations far beyond the state
    limits and a long call timeout: only the limits release state. Held bytes (from /metrics) must
    stay at the bound, evictions must be emitted as orphans and counted in metrics, nothing lost.
    At the end a SIGTERM with --flush-on-shutdown emits what is still held (reason shutdown)."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    partitions = 2
    topic = await create_topic(bootstrap, partitions=partitions)
    limit_bytes = 256 * 1024
    extra = (
        "--max-conversations",
        "50",
        "--max-calls-per-conversation",
        "8",
        "--max-held-bytes",
        str(limit_bytes),
        "--call-timeout",
        "3600",
        "--flush-on-shutdown",
    )
    side = SidecarProc("o", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=False, extra=extra)
    # Many conversations, many unanswered calls, 2 KB payloads: far beyond all three limits.
    traffic = make_traffic(rng, 1500, turns=(4, 12), parallel=(6, 8, 10), unanswered=0.5, payload_bytes=2048)
    produce_rate = await produce(bootstrap, topic, traffic.records, None)  # the backlog, at full speed
    side.start()
    peak_held = peak_rss = limit_seen = 0.0
    samples = 0
    first_read = done_at = None
    deadline = time.monotonic() + 600
    last: dict[str, float] = {}
    while time.monotonic() < deadline:
        side.check()
        m = side.metrics()
        if m:
            samples += 1
            peak_held = max(peak_held, metric(m, "stream_pairer_held_bytes"))
            limit_seen = max(limit_seen, metric(m, "stream_pairer_held_bytes_limit"))
            if first_read is None and metric(m, "stream_pairer_records_read_total") > 0:
                first_read = time.monotonic()
            lag = [v for k, v in m.items() if k.startswith("stream_pairer_consumer_lag_messages{")]
            if first_read is not None and len(lag) == partitions and not any(lag):
                last = m
                done_at = time.monotonic()
                break
        peak_rss = max(peak_rss, side.rss_bytes())
        await asyncio.sleep(0.2)
    read_rate = len(traffic) / (done_at - first_read) if done_at and first_read else 0.0
    await asyncio.sleep(2.0)  # let the last batch's outputs be counted before the snapshot
    last = side.metrics() or last
    evictions_metric = metric(last, "stream_pairer_evictions_total")
    evicted_metric = metric(last, "stream_pairer_orphans_total", reason="evicted")
    side.stop()  # flush-on-shutdown: what is still held becomes orphans (shutdown)
    report = await settle(bootstrap, topic, False)
    evicted_out = report.reasons["orphan_call:evicted"] + report.reasons["orphan_result:evicted"]
    # The gauge sums all partitions; each partition's engine is held to the limit (one event may be
    # admitted before the oldest is evicted, so allow one payload's worth per partition).
    bound = limit_bytes * partitions + partitions * 16 * 1024
    checks = {
        "backlog read": done_at is not None,
        "held bytes at the bound": 0 < peak_held <= bound,
        "evictions emitted": evicted_out > 0,
        "evicted orphans counted": evicted_metric == evicted_out,
        "evictions counted as events": evictions_metric == evicted_out,
        "input faster than the sidecar": read_rate > 0 and produce_rate > read_rate,
    }
    note = (
        f"peak held {peak_held / 1024:.0f} KiB (limit {limit_bytes // 1024} KiB per partition x "
        f"{partitions}, gauge limit {limit_seen / 1024:.0f} KiB); peak RSS {peak_rss / 2**20:.0f} MiB; "
        f"evicted orphans {evicted_out} (orphans_total evicted {evicted_metric:.0f}, "
        f"evictions_total {evictions_metric:.0f}); "
        f"input {produce_rate:,.0f}/s vs sidecar {read_rate:,.0f} records/s; {samples} metric samples"
    )
    failed = [k for k, v in checks.items() if not v]
    if failed:
        note += "; FAILED: " + ", ".join(failed)
    return _result(kind, report, [side], started, note=note, exactly_once=False, extra_ok=not failed)
