"""Produce-side faults (issue 13): output limits too small, a dead-letter topic deleted, ids that
inflate memory, a big record on the repartition topic, a bad lineage header, a wrong checkpoint
topic, SIGTERM while the broker is down.

Why apart from crash.py: these faults hit the sidecar's writes, and each trial checks the records
and metrics that say why an output was diverted, besides the audit.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

from kafka_broker import KafkaBroker

from trials.harness import Context, SidecarProc, TrialResult, _result, create_topic, metric, produce, settle
from trials.traffic import _dumps, make_traffic


async def _admin(bootstrap: str) -> Any:
    from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    return admin


async def create_topic_with(bootstrap: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    """An explicitly configured topic, as production creates them (never the broker's auto-creation)."""
    from aiokafka.admin import NewTopic  # noqa: PLC0415

    admin = await _admin(bootstrap)
    try:
        resp = await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs)])
        codes = [code for _, code, *_ in resp.topic_errors]
        assert codes == [0], resp.topic_errors
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # until every partition has a leader
            (meta,) = await admin.describe_topics([name])
            leaders = [p["leader"] for p in meta["partitions"]]
            if meta["error_code"] == 0 and len(leaders) == partitions and min(leaders) >= 0:
                break
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def alter_topic(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # noqa: PLC0415

    admin = await _admin(bootstrap)
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs)])
    finally:
        await admin.close()


def _big_records(
    rng: random.Random, n: int, size: int, prefix: str
) -> list[tuple[bytes, Callable[[float], bytes]]]:
    """n canonical call/result pairs whose result carries `size` bytes of content, plus one
    unreadable record of `size` bytes (a dead letter that large)."""
    out: list[tuple[bytes, Callable[[float], bytes]]] = []
    for i in range(n):
        cid = f"{prefix}-big-{i}"
        call_id = f"call-{i}-{rng.randrange(1 << 20):05x}"
        out.append(
            (
                cid.encode(),
                lambda ts, c=cid, k=call_id: _dumps(
                    {
                        "conversation_id": c,
                        "type": "tool_call",
                        "id": k,
                        "name": "dump",
                        "arguments": {},
                        "ts": int(ts * 1000),
                    }
                ),
            )
        )
        out.append(
            (
                cid.encode(),
                lambda ts, c=cid, k=call_id: _dumps(
                    {
                        "conversation_id": c,
                        "type": "tool_result",
                        "id": k,
                        "content": "y" * size,
                        "ts": int(ts * 1000),
                    }
                ),
            )
        )
    out.append((f"{prefix}-bad".encode(), lambda ts: b'{"conversation_id": "' + b"z" * size))
    return out


def _readyz(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return f"{resp.status} {resp.read().decode().strip()}"
    except urllib.error.HTTPError as err:
        return f"{err.code} {err.read().decode().strip()}"
    except OSError as err:
        return f"unreachable {err}"


def _log_text(side: SidecarProc) -> str:
    return side.log_path.read_text(errors="replace") if side.log_path.exists() else ""


async def trial_small_output_limit(
    ctx: Context, rng: random.Random, exactly_once: bool, kind: str
) -> TrialResult:
    """Output topics created with max.message.bytes=100000, and 600 KB results and dead letters: every
    output is fitted under the topic's limit (payloads cut with a marker), nothing is refused, so
    nothing replays in a loop: 0 lost, 0 duplicated even at-least-once, no produce errors."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=2)
    for suffix in ("pairs", "orphans", "dead-letter"):
        await create_topic_with(bootstrap, f"{topic}.{suffix}", 2, {"max.message.bytes": "100000"})
    side = SidecarProc("s", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=exactly_once)
    side.start()
    traffic = make_traffic(rng, 60)
    records = traffic.records + _big_records(rng, 3, 600_000, topic)
    rng.shuffle(records)
    await produce(bootstrap, topic, records, 100.0)
    report = await settle(bootstrap, topic, exactly_once, check=side.check)
    m = side.metrics()
    produce_errors = metric(m, "stream_pairer_produce_errors_total")
    side.stop()
    resets = _log_text(side).count("rebuilding it from its last commit")
    checks = {
        "no produce errors": produce_errors == 0,
        "no partition rebuilt": resets == 0,
        "no duplicates": report.duplicated == 0,
    }
    failed = [k for k, v in checks.items() if not v]
    note = (
        f"topics max.message.bytes=100000, 3 x 600 KB results + a 600 KB dead letter; produce errors "
        f"{produce_errors:.0f}, partition rebuilds {resets} ({'EOS' if exactly_once else 'ALO'})"
    )
    if failed:
        note += "; FAILED: " + ", ".join(failed)
    return _result(kind, report, [side], started, note=note, exactly_once=exactly_once, extra_ok=not failed)


async def trial_limit_lowered_before_first_commit(ctx: Context, rng: random.Random, kind: str) -> TrialResult:
    """A fresh group that has not committed yet (--commit-interval 600) when the dead-letter topic's
    max.message.bytes is lowered under a record already on its way: the broker refuses it, the
    partition is rebuilt and, having no commit, must start again from the --auto-offset-reset
    position (before the fix it resumed at the fetch position: the outputs in between were lost)."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=1)
    side = SidecarProc(
        "f",
        bootstrap,
        topic,
        f"g-{topic}",
        ctx.workdir,
        exactly_once=False,
        extra=("--commit-interval", "600"),
    )
    side.start()
    first = make_traffic(rng, 40)
    await produce(bootstrap, topic, first.records, 200.0)
    await asyncio.sleep(3.0)
    await alter_topic(bootstrap, f"{topic}.dead-letter", {"max.message.bytes": "20000"})
    await asyncio.sleep(1.0)
    second = make_traffic(rng, 40)
    bad = (b"bad", lambda ts: b'{"conversation_id": "' + b"q" * 100_000)
    await produce(bootstrap, topic, [*second.records[:20], bad, *second.records[20:]], 200.0)
    report = await settle(bootstrap, topic, False, check=side.check)
    side.stop()
    text = _log_text(side)
    rebuilt = text.count("rebuilding it from its last commit")
    note = f"dead-letter topic lowered to 20000 B mid-run, no commit yet; partition rebuilds {rebuilt}"
    ok = rebuilt >= 1
    if not ok:
        note += "; FAILED: the refusal did not happen (nothing tested)"
    return _result(kind, report, [side], started, note=note, exactly_once=False, extra_ok=ok)


async def trial_dead_letter_topic_deleted(ctx: Context, rng: random.Random, kind: str) -> TrialResult:
    """The dead-letter topic is deleted mid-run on a fresh group (--commit-interval 600: no commit
    yet). The broker re-creates it as soon as our producer asks for it, so it never looks missing;
    the sidecar sees the acknowledged offsets of the topic go back to 0, rebuilds every partition,
    and, having no commit, replays from the --auto-offset-reset position: the dead letters deleted
    with the topic are written again (before: 3 lost, /readyz 200)."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=2)
    side = SidecarProc(
        "d",
        bootstrap,
        topic,
        f"g-{topic}",
        ctx.workdir,
        exactly_once=False,
        extra=("--commit-interval", "600"),
    )
    side.start()
    first = make_traffic(rng, 60, bad=0.2)
    await produce(bootstrap, topic, first.records, 200.0)
    await asyncio.sleep(3.0)
    admin = await _admin(bootstrap)
    try:
        await admin.delete_topics([f"{topic}.dead-letter"])
    finally:
        await admin.close()
    await asyncio.sleep(2.0)
    second = make_traffic(rng, 60, bad=0.2)
    await produce(bootstrap, topic, second.records, 200.0)
    report = await settle(bootstrap, topic, False, check=side.check)
    side.stop()
    text = _log_text(side)
    seen = "deleted and re-created" in text
    note = (
        f"dead-letter topic deleted mid-run, no commit yet ({first.unreadable} dead letters before, "
        f"{second.unreadable} after); re-creation detected: {seen}"
    )
    return _result(kind, report, [side], started, note=note, exactly_once=False, extra_ok=seen)


async def trial_long_ids(ctx: Context, rng: random.Random, kind: str) -> TrialResult:
    """Input that inflates memory outside the held-bytes estimate: 600 conversations whose ids are
    500 KB each (330 MB of RSS before), mixed into normal traffic. Past --max-id-bytes they are
    dead letters (`too_large`); peak RSS must stay near a normal run's."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=2)
    side = SidecarProc("i", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=False)
    side.start()
    traffic = make_traffic(rng, 60)
    records = list(traffic.records)
    for n in range(600):
        conv = f"{n:04d}" + "x" * 500_000
        kind_ = "tool_call" if n % 2 == 0 else "tool_result"
        records.append(
            (b"long", lambda ts, c=conv, k=kind_, i=n: _dumps({"conversation_id": c, "type": k, "id": f"k{i}",
                                                                 "name": "f", "ts": int(ts * 1000)}))
        )  # fmt: skip
    rng.shuffle(records)
    peak_rss = 0
    producing = asyncio.create_task(produce(bootstrap, topic, records, 200.0))
    while not producing.done():
        peak_rss = max(peak_rss, side.rss_bytes())
        await asyncio.sleep(0.2)
    await producing

    def check() -> None:
        nonlocal peak_rss
        side.check()
        peak_rss = max(peak_rss, side.rss_bytes())

    report = await settle(bootstrap, topic, False, check=check)
    side.stop()
    too_large = report.reasons["dead_letter:too_large"]
    ok = too_large == 600 and peak_rss < 200 * 2**20
    note = (
        f"600 records with 500 KB conversation ids: too_large dead letters {too_large}; "
        f"peak RSS {peak_rss / 2**20:.0f} MiB"
    )
    return _result(kind, report, [side], started, note=note, exactly_once=False, extra_ok=ok)


async def trial_repartition_big_record(
    ctx: Context, rng: random.Random, exactly_once: bool, kind: str
) -> TrialResult:
    """--repartition with a 5 MB input record (the input topic takes 8 MB): stage one forwards a
    prefix with the original size, stage two dead-letters it as too_large; peak RSS is reported."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = f"trial-big-{uuid.uuid4().hex[:8]}"
    await create_topic_with(bootstrap, topic, 2, {"max.message.bytes": str(8 << 20)})
    side = SidecarProc(
        "r", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=exactly_once, extra=("--repartition",)
    )
    side.start()
    traffic = make_traffic(rng, 60)
    huge = (
        None,
        lambda ts: _dumps(
            {
                "conversation_id": "huge",
                "type": "tool_call",
                "id": "h",
                "name": "x",
                "arguments": {"blob": "w" * (5 << 20)},
                "ts": int(ts * 1000),
            }
        ),
    )
    records = [(None, make) for _, make in traffic.records]
    records.insert(len(records) // 2, huge)
    peak_rss = 0
    producing = asyncio.create_task(_produce_big(bootstrap, topic, records))
    while not producing.done():
        peak_rss = max(peak_rss, side.rss_bytes())
        await asyncio.sleep(0.2)
    await producing

    def check() -> None:
        nonlocal peak_rss
        side.check()
        peak_rss = max(peak_rss, side.rss_bytes())

    report = await settle(bootstrap, topic, exactly_once, check=check)
    side.stop()
    too_large = report.reasons["dead_letter:too_large"]
    ok = too_large >= 1
    note = (
        f"a 5 MiB record through --repartition: too_large dead letters {too_large}; peak RSS "
        f"{peak_rss / 2**20:.0f} MiB ({'EOS' if exactly_once else 'ALO'})"
    )
    return _result(kind, report, [side], started, note=note, exactly_once=exactly_once, extra_ok=ok)


async def _produce_big(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, Callable[[float], bytes]]]
) -> None:
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, max_request_size=8 << 20
    )
    await producer.start()
    try:
        futures = [await producer.send(topic, make(time.time()), key=key) for key, make in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def trial_bad_lineage_header(
    ctx: Context, rng: random.Random, exactly_once: bool, kind: str
) -> TrialResult:
    """--repartition, and a record written straight into the internal topic with a null
    `sp-src-partition` header: it is dead-lettered (lineage: the internal record), the sidecar keeps
    running (0 crashes) and every real input event is still accounted for."""
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415

    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=2)
    side = SidecarProc(
        "h", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=exactly_once, extra=("--repartition",)
    )
    side.start()
    traffic = make_traffic(rng, 60)
    records = [(None, make) for _, make in traffic.records]
    half = len(records) // 2
    await produce(bootstrap, topic, records[:half], 200.0)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        value = _dumps({"conversation_id": "injected", "type": "tool_call", "id": "i", "name": "x"})
        headers = [("sp-src-topic", topic.encode()), ("sp-src-partition", None), ("sp-src-offset", b"0")]
        await (await producer.send(f"{topic}.by-conversation", value, key=b"injected", headers=headers))
    finally:
        await producer.stop()
    await produce(bootstrap, topic, records[half:], 200.0)
    report = await settle(bootstrap, topic, exactly_once, check=side.check)
    side.stop()
    # The injected record is not an input of the audited topic: it is the one "unexpected" claim.
    unexpected = report.counts["unexpected"]
    ok = unexpected == 1 and report.lost == 0 and (not exactly_once or report.duplicated == 0)
    note = f"null sp-src-partition header injected: unexpected (the injected dead letter) {unexpected}"
    result = _result(kind, report, [side], started, note=note, exactly_once=exactly_once, extra_ok=ok)
    if ok:  # the only audit problem is the injected record, which is not an input event
        result.ok = side.crashes == 0
        result.problems = []
    return result


async def trial_checkpoint_topic_wrong(ctx: Context, rng: random.Random, kind: str) -> TrialResult:
    """The checkpoint topic exists with broker defaults (what auto-creation makes): the sidecar
    refuses to consume, says why (log and /readyz), and goes on once an operator fixes the topic."""
    assert ctx.broker is not None
    started = time.monotonic()
    bootstrap = ctx.broker.bootstrap
    topic = await create_topic(bootstrap, partitions=2)
    await create_topic_with(bootstrap, f"{topic}.pairer-checkpoints", 2, {"cleanup.policy": "delete"})
    side = SidecarProc("c", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=False)
    side.start()
    traffic = make_traffic(rng, 40)
    await produce(bootstrap, topic, traffic.records, 200.0)
    deadline = time.monotonic() + 30
    refused = False
    while time.monotonic() < deadline and not refused:
        await asyncio.sleep(0.5)
        refused = "checkpoint topic settings are wrong" in _log_text(side)
    readyz = await asyncio.to_thread(_readyz, side.http_port)
    await alter_topic(
        bootstrap,
        f"{topic}.pairer-checkpoints",
        {"cleanup.policy": "compact", "max.message.bytes": str(16 * 1024 * 1024 + 1024)},
    )
    report = await settle(bootstrap, topic, False, check=side.check)
    side.stop()
    lines = sum("checkpoint topic settings are wrong" in line for line in _log_text(side).splitlines())
    ok = refused and readyz.startswith("503") and "checkpoint topic settings are wrong" in readyz
    note = f"refused ({lines} log line(s)), /readyz said {readyz!r}; consumed after the fix"
    return _result(kind, report, [side], started, note=note, exactly_once=False, extra_ok=ok)


async def trial_sigterm_broker_down(
    ctx: Context, rng: random.Random, exactly_once: bool, kind: str
) -> TrialResult:
    """SIGTERM while the broker is down: exit 0 within --shutdown-timeout (here 10 s), a line naming
    what could not be committed, no traceback; the aiokafka lines of the outage are rate-limited.
    Then the broker and a new sidecar come back and the audit finds nothing lost."""
    started = time.monotonic()
    broker = KafkaBroker(ctx.workdir / f"broker-{uuid.uuid4().hex[:6]}").start()
    try:
        bootstrap = broker.bootstrap
        topic = await create_topic(bootstrap, partitions=2)
        extra = ("--shutdown-timeout", "10")
        side = SidecarProc(
            "t", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=exactly_once, extra=extra
        )
        side.start()
        traffic = make_traffic(rng, 200)
        half = len(traffic) // 2
        await produce(bootstrap, topic, traffic.records[:half], 100.0)
        before = len(_log_text(side).splitlines())
        t_down = time.monotonic()
        broker.stop()
        await asyncio.sleep(8.0)
        outage_s = time.monotonic() - t_down
        lines = len(_log_text(side).splitlines()) - before
        assert side.proc is not None
        t0 = time.monotonic()
        side.proc.send_signal(signal.SIGTERM)
        try:
            code = side.proc.wait(20)
        except subprocess.TimeoutExpired:
            side.proc.kill()
            code = side.proc.wait()
        took = time.monotonic() - t0
        side.proc = None
        text = _log_text(side)
        said = "not committed" in text or "nothing was left to commit" in text or "had work to commit" in text
        broker.start()
        side2 = SidecarProc("t2", bootstrap, topic, f"g-{topic}", ctx.workdir, exactly_once=exactly_once)
        side2.start()
        await produce(bootstrap, topic, traffic.records[half:], 100.0)
        report = await settle(bootstrap, topic, exactly_once, check=side2.check)
        side2.stop()
        checks = {
            "exit 0": code == 0,
            "within --shutdown-timeout": took <= 10.5,
            "said what": said,
            "no traceback": "Traceback" not in text,
            "quiet outage": lines / outage_s < 5,
        }
        failed = [k for k, v in checks.items() if not v]
        note = (
            f"SIGTERM after {outage_s:.0f} s of outage: exit {code} in {took:.1f} s; {lines} log lines "
            f"during the outage ({lines / outage_s:.1f}/s) ({'EOS' if exactly_once else 'ALO'})"
        )
        if failed:
            note += "; FAILED: " + ", ".join(failed)
        return _result(
            kind, report, [side2], started, note=note, exactly_once=exactly_once, extra_ok=not failed
        )
    finally:
        broker.close()
