#!/usr/bin/env python3
"""Fault trials for the Kafka sidecar: crash it, take the broker away, rebalance it, overload it, then
prove with `stream-pairer audit` that nothing was lost (and, in exactly-once mode, nothing doubled).

Every trial runs against real Apache Kafka brokers on 127.0.0.1 (scripts/kafka_broker.py) and real
`stream-pairer run` processes; nothing is simulated. A trial writes realistic mixed traffic (several
formats, parallel calls, FIFO-only formats, unanswered calls, duplicate and unknown results,
unreadable records) to a fresh input topic while the fault happens, waits until the sidecar has
emitted everything (unanswered calls time out after --call-timeout), and audits inputs against
outputs (read_committed). Trial types:

  kill-alo / kill-eos  kill -9 of the sidecar at random points (1-3 kills per trial), restart
  repartition-alo/-eos the same with unkeyed input and --repartition (two stages)
  broker-restart       the broker stopped (or killed) and restarted mid-run; the sidecar keeps running
  cluster-kill         3 KRaft brokers, topics with replication factor 3, one broker killed mid-run
  rebalance-alo/-eos   two sidecars in one group: a second one added mid-run, then the first killed
  overload             a backlog far beyond the state limits: held bytes (from /metrics) stay at the
                       bound, evictions are emitted and counted, nothing is lost

    python scripts/fault_trials.py --short        # CI: a few trials, a few minutes
    python scripts/fault_trials.py                # long: 20 kill trials per delivery mode, and the rest
    python scripts/fault_trials.py --only kill-eos --trials 5 --seed 3 --json trials.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import kafka_broker  # noqa: E402 - path set just above
from kafka_broker import KafkaBroker, KafkaCluster, free_ports  # noqa: E402

from stream_pairer.analysis.audit import Auditor, AuditReport, render  # noqa: E402
from stream_pairer.cli.commands.audit import audit_topics  # noqa: E402
from stream_pairer.errors import AuditReadError  # noqa: E402

# Trial timings. Calls that never get a result are emitted after CALL_TIMEOUT_S of their
# conversation's event time or of the partition's processing time (the wall-clock tick), so a trial
# is complete a few seconds after its input stops.
CALL_TIMEOUT_S = 4.0
RESULT_GRACE_S = 2.0
SETTLE_TIMEOUT_S = 120.0


# ============================================================================================ traffic


@dataclass(slots=True)
class Traffic:
    """Input records in production order: (key, value-maker). Values take their event time at send
    time, so each conversation's clock follows the wall clock the way real traffic does."""

    records: list[tuple[bytes, Callable[[float], bytes]]] = field(default_factory=list)
    unreadable: int = 0  # (the audit counts the events from the topic itself)

    def __len__(self) -> int:
        return len(self.records)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def make_traffic(
    rng: random.Random,
    conversations: int,
    *,
    turns: tuple[int, int] = (2, 6),
    parallel: tuple[int, ...] = (1, 1, 1, 2, 3),
    unanswered: float = 0.05,
    bad: float = 0.01,
    payload_bytes: int = 200,
) -> Traffic:
    """Interleaved multi-conversation traffic in five input formats.

    Per conversation, a format is chosen; each turn is one assistant record with 1-3 parallel calls
    and the records with their results (sometimes reordered, sometimes missing, duplicated or
    pointing at an unknown id); a few records are unreadable. Conversations are interleaved at
    random but each keeps its own order (one message key per conversation -> one partition).
    """
    traffic = Traffic()
    per_conv: list[list[tuple[bytes, Callable[[float], bytes]]]] = []
    pad = "x" * payload_bytes
    for c in range(conversations):
        cid = f"conv-{c:06d}-{rng.randrange(1 << 30):08x}"
        fmt = rng.choice(["canonical", "anthropic", "claude_code", "openai_chat", "openai_legacy", "gemini"])
        recs: list[tuple[bytes, Callable[[float], bytes]]] = []
        key = cid.encode()
        for t in range(rng.randint(*turns)):
            n = rng.choice(parallel)
            ids = [f"call_{c}_{t}_{i}_{rng.randrange(1 << 20):05x}" for i in range(n)]
            names = [rng.choice(["search", "fetch", "weather", "calc"]) for _ in range(n)]
            answered = [rng.random() >= unanswered for _ in range(n)]
            calls, results = _turn(fmt, cid, ids, names, answered, pad=pad, rng=rng)
            recs += [(key, f) for f in calls]
            recs += [(key, f) for f in results]
            if rng.random() < bad:
                recs.append((key, lambda ts: b'{"conversation_id": "broken'))
                traffic.unreadable += 1
        per_conv.append(recs)
    # Interleave: repeatedly take the next record of a random conversation still holding some.
    live = [list(reversed(r)) for r in per_conv if r]
    while live:
        i = rng.randrange(len(live))
        traffic.records.append(live[i].pop())
        if not live[i]:
            live[i] = live[-1]
            live.pop()
    return traffic


def _turn(
    fmt: str,
    cid: str,
    ids: list[str],
    names: list[str],
    answered: list[bool],
    *,
    pad: str,
    rng: random.Random,
) -> tuple[list[Callable[[float], bytes]], list[Callable[[float], bytes]]]:
    """Makers for one turn's call record(s) and result record(s) in format `fmt`."""
    n = len(ids)
    order = [i for i in range(n) if answered[i]]
    rng.shuffle(order)  # results of parallel calls come back in any order
    extra = rng.random()
    calls: list[Callable[[float], bytes]] = []
    results: list[Callable[[float], bytes]] = []

    def ts_ms(ts: float) -> int:
        return int(ts * 1000)

    if fmt == "canonical":
        for i in range(n):
            calls.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "type": "tool_call",
                        "id": ids[i],
                        "name": names[i],
                        "arguments": {"q": pad},
                        "ts": ts_ms(ts),
                    }
                )
            )
        for i in order:
            results.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "type": "tool_result",
                        "id": ids[i],
                        "content": f"ok {pad}",
                        "ts": ts_ms(ts),
                    }
                )
            )
        if extra < 0.05 and order:  # a duplicate result
            results.append(results[0])
        elif extra < 0.08:  # a result whose call never existed
            results.append(
                lambda ts: _dumps(
                    {
                        "conversation_id": cid,
                        "type": "tool_result",
                        "id": "ghost-" + ids[0],
                        "content": "?",
                        "ts": ts_ms(ts),
                    }
                )
            )
    elif fmt in ("anthropic", "claude_code"):

        def wrap(role: str, content: list[Any], ts: float) -> bytes:
            if fmt == "claude_code":
                return _dumps(
                    {
                        "type": "assistant" if role == "assistant" else "user",
                        "sessionId": cid,
                        "timestamp": ts_ms(ts),
                        "message": {"role": role, "content": content},
                    }
                )
            return _dumps(
                {"conversation_id": cid, "ts": ts_ms(ts), "message": {"role": role, "content": content}}
            )

        blocks = [{"type": "text", "text": "working on it"}] + [
            {"type": "tool_use", "id": ids[i], "name": names[i], "input": {"q": pad}} for i in range(n)
        ]
        calls.append(lambda ts: wrap("assistant", blocks, ts))
        if order:
            res = [
                {
                    "type": "tool_result",
                    "tool_use_id": ids[i],
                    "content": f"ok {pad}",
                    "is_error": rng.random() < 0.1,
                }
                for i in order
            ]
            results.append(lambda ts: wrap("user", res, ts))
    elif fmt == "openai_chat":
        tcs = [
            {
                "id": ids[i],
                "type": "function",
                "function": {"name": names[i], "arguments": json.dumps({"q": pad})},
            }
            for i in range(n)
        ]
        calls.append(
            lambda ts: _dumps(
                {
                    "conversation_id": cid,
                    "created": ts,
                    "role": "assistant",
                    "content": None,
                    "tool_calls": tcs,
                }
            )
        )
        for i in order:
            results.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "created": ts,
                        "role": "tool",
                        "tool_call_id": ids[i],
                        "content": f"ok {pad}",
                    }
                )
            )
    elif fmt == "openai_legacy":  # no ids at all: FIFO by name, one call per turn
        for i in range(n):
            calls.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "created": ts,
                        "role": "assistant",
                        "function_call": {"name": names[i], "arguments": "{}"},
                    }
                )
            )
        for i in order:
            results.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "created": ts,
                        "role": "function",
                        "name": names[i],
                        "content": f"ok {pad}",
                    }
                )
            )
    else:  # gemini without ids: FIFO by function name
        parts = [{"functionCall": {"name": names[i], "args": {"q": pad}}} for i in range(n)]
        calls.append(
            lambda ts: _dumps({"conversation_id": cid, "ts": ts_ms(ts), "role": "model", "parts": parts})
        )
        if order:
            rparts = [{"functionResponse": {"name": names[i], "response": {"output": pad}}} for i in order]
            results.append(
                lambda ts: _dumps({"conversation_id": cid, "ts": ts_ms(ts), "role": "user", "parts": rparts})
            )
    return calls, results


# ============================================================================================ Kafka I/O


async def create_topic(bootstrap: str, partitions: int, replication: int = 1, prefix: str = "trial") -> str:
    return await kafka_broker.create_topic(bootstrap, partitions, replication, prefix)


async def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, Callable[[float], bytes]]],
    rate: float | None,
) -> float:
    """Send the records in order at about `rate` records/s (None: as fast as possible); returns the
    achieved rate. acks=all + idempotence: what is acknowledged is in the log exactly once."""
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=256 * 1024,
        request_timeout_ms=60_000,
    )
    await producer.start()
    started = time.monotonic()
    try:
        futures = []
        for i, (key, make) in enumerate(records):
            futures.append(await producer.send(topic, make(time.time()), key=key))
            if rate is not None and i % 50 == 49:
                ahead = started + (i + 1) / rate - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return len(records) / max(time.monotonic() - started, 1e-9)


async def audit_once(bootstrap: str, topic: str, exactly_once: bool) -> AuditReport:
    auditor = Auditor(exactly_once=exactly_once, max_samples=50)
    return await audit_topics(
        auditor,
        bootstrap,
        [topic],
        [f"{topic}.pairs", f"{topic}.orphans", f"{topic}.dead-letter"],
        timeout_s=120,
    )


async def settle(
    bootstrap: str,
    topic: str,
    exactly_once: bool,
    timeout_s: float = SETTLE_TIMEOUT_S,
    check: Callable[[], None] | None = None,
) -> AuditReport:
    """Audit until nothing is missing (held calls time out a few seconds after the input stops),
    then once more after a pause, so that late duplicates are seen too. Returns the last report."""
    deadline = time.monotonic() + timeout_s
    report: AuditReport | None = None
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            report = await audit_once(bootstrap, topic, exactly_once)
        except AuditReadError as err:
            print(f"    (audit retry: {err})", flush=True)
            await asyncio.sleep(2)
            continue
        if report.lost == 0:
            await asyncio.sleep(3)
            return await audit_once(bootstrap, topic, exactly_once)
        await asyncio.sleep(2)
    if report is None:
        report = await audit_once(bootstrap, topic, exactly_once)
    return report


# ============================================================================================ sidecar


class SidecarProc:
    """One `stream-pairer run` subprocess; restartable; its /metrics read over HTTP."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        group: str,
        workdir: Path,
        *,
        exactly_once: bool,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.http_port = free_ports(1)[0]
        self.log_path = workdir / f"sidecar-{topic}-{name}.log"
        self.cmd = [
            sys.executable,
            "-m",
            "stream_pairer",
            "run",
            "--bootstrap-servers",
            bootstrap,
            "--input-topic",
            topic,
            "--group-id",
            group,
            "--instance-id",
            name,
            "--http-host",
            "127.0.0.1",
            "--http-port",
            str(self.http_port),
            "--call-timeout",
            str(CALL_TIMEOUT_S),
            "--result-grace",
            str(RESULT_GRACE_S),
            "--tick-interval",
            "0.5",
            "--commit-interval",
            "0.5",
            "--session-timeout",
            "6",
            "--backoff-max",
            "2",
            "--shutdown-timeout",
            "20",
            *(["--exactly-once"] if exactly_once else []),
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0
        self.crashes = 0  # exits nobody asked for, and graceful stops that failed
        self.exit_codes: list[int] = []

    def start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start {self.starts + 1}: {' '.join(self.cmd)}\n".encode())
            self.proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
            )
        self.starts += 1

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Count an unrequested exit as a crash, and restart (what a container supervisor does)."""
        if self.proc is not None and self.proc.poll() is not None:
            self.crashes += 1
            self.exit_codes.append(self.proc.returncode)
            print(
                f"    !! sidecar {self.name} exited by itself ({self.proc.returncode}); see {self.log_path}",
                flush=True,
            )
            self.proc = None
            self.start()

    def kill(self) -> None:
        """kill -9: no shutdown hook, no flush, no commit."""
        self.check()
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1
        self.proc = None

    def stop(self, timeout: float = 40.0) -> int | None:
        """SIGTERM and wait: a clean stop exits 0 within the bound; anything else counts as a crash."""
        self.check()
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            print(f"    !! sidecar {self.name} did not stop within {timeout}s", flush=True)
        self.exit_codes.append(code)
        if code != 0:
            self.crashes += 1
            print(
                f"    !! sidecar {self.name} stopped with exit code {code}; see {self.log_path}", flush=True
            )
        self.proc = None
        return code

    def metrics(self) -> dict[str, float]:
        """Prometheus text -> {series: value}, where a series is `name{labels}` as exposed;
        {} if the endpoint is unreachable. `metric()` sums the series of one name."""
        try:
            url = f"http://127.0.0.1:{self.http_port}/metrics"
            with urllib.request.urlopen(url, timeout=2) as resp:
                text = resp.read().decode()
        except OSError:
            return {}
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                series, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[series] = float(value)
        return out

    def rss_bytes(self) -> int:
        if self.proc is None:
            return 0
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return 0
        m = re.search(r"VmRSS:\s+(\d+) kB", status)
        return int(m.group(1)) * 1024 if m else 0

    def tracebacks(self) -> int:
        return self.log_path.read_text(errors="replace").count("Traceback") if self.log_path.exists() else 0


def metric(series: dict[str, float], name: str, **labels: str) -> float:
    """Sum of the series of `name` whose labels include `labels`."""
    total = 0.0
    for key, value in series.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += value
    return total


# ============================================================================================ trials


@dataclass
class TrialResult:
    kind: str
    ok: bool
    records: int = 0
    events: int = 0
    lost: int = 0
    duplicated: int = 0
    crashes: int = 0
    seconds: float = 0.0
    note: str = ""
    problems: list[str] = field(default_factory=list)


def _result(
    kind: str,
    report: AuditReport,
    sidecars: list[SidecarProc],
    started: float,
    *,
    note: str,
    exactly_once: bool,
    extra_ok: bool = True,
) -> TrialResult:
    crashes = sum(s.crashes for s in sidecars)
    ok = report.ok and crashes == 0 and extra_ok and (not exactly_once or report.duplicated == 0)
    return TrialResult(
        kind=kind,
        ok=ok,
        records=report.inputs["records"],
        events=report.inputs["calls"] + report.inputs["results"],
        lost=report.lost,
        duplicated=report.duplicated,
        crashes=crashes,
        seconds=time.monotonic() - started,
        note=note,
        problems=[] if report.ok else render(report, 10).splitlines(),
    )


@dataclass
class Context:
    workdir: Path
    broker: KafkaBroker | None = None  # the shared broker of the kill/rebalance/overload trials


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


# ===================================================================== produce-side faults (issue 13)


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


# ============================================================================================ runner

TrialFn = Callable[[Context, random.Random], Awaitable[TrialResult]]
TRIALS: dict[str, TrialFn] = {
    "kill-alo": lambda ctx, rng: trial_kill(ctx, rng, False, "kill-alo"),
    "kill-eos": lambda ctx, rng: trial_kill(ctx, rng, True, "kill-eos"),
    "repartition-alo": lambda ctx, rng: trial_kill(ctx, rng, False, "repartition-alo", True),
    "repartition-eos": lambda ctx, rng: trial_kill(ctx, rng, True, "repartition-eos", True),
    "broker-restart": lambda ctx, rng: trial_broker_restart(ctx, rng, rng.random() < 0.5, "broker-restart"),
    "cluster-kill": lambda ctx, rng: trial_cluster(ctx, rng, rng.random() < 0.5, "cluster-kill"),
    "rebalance-alo": lambda ctx, rng: trial_rebalance(ctx, rng, False, "rebalance-alo"),
    "rebalance-eos": lambda ctx, rng: trial_rebalance(ctx, rng, True, "rebalance-eos"),
    "overload": lambda ctx, rng: trial_overload(ctx, rng, "overload"),
    "dlq-deleted": lambda ctx, rng: trial_dead_letter_topic_deleted(ctx, rng, "dlq-deleted"),
    "long-ids": lambda ctx, rng: trial_long_ids(ctx, rng, "long-ids"),
    "small-limit-alo": lambda ctx, rng: trial_small_output_limit(ctx, rng, False, "small-limit-alo"),
    "small-limit-eos": lambda ctx, rng: trial_small_output_limit(ctx, rng, True, "small-limit-eos"),
    "limit-before-commit": lambda ctx, rng: trial_limit_lowered_before_first_commit(
        ctx, rng, "limit-before-commit"
    ),
    "repartition-big-alo": lambda ctx, rng: trial_repartition_big_record(
        ctx, rng, False, "repartition-big-alo"
    ),
    "repartition-big-eos": lambda ctx, rng: trial_repartition_big_record(
        ctx, rng, True, "repartition-big-eos"
    ),
    "bad-header-alo": lambda ctx, rng: trial_bad_lineage_header(ctx, rng, False, "bad-header-alo"),
    "bad-header-eos": lambda ctx, rng: trial_bad_lineage_header(ctx, rng, True, "bad-header-eos"),
    "checkpoint-topic-wrong": lambda ctx, rng: trial_checkpoint_topic_wrong(
        ctx, rng, "checkpoint-topic-wrong"
    ),
    "sigterm-broker-down": lambda ctx, rng: trial_sigterm_broker_down(
        ctx, rng, rng.random() < 0.5, "sigterm-broker-down"
    ),
}
PRODUCE_SIDE = (
    "dlq-deleted", "long-ids", "small-limit-alo", "small-limit-eos", "limit-before-commit",
    "repartition-big-alo", "repartition-big-eos", "bad-header-alo", "bad-header-eos",
    "checkpoint-topic-wrong", "sigterm-broker-down",
)  # fmt: skip
SHORT = {"kill-alo": 2, "kill-eos": 2, "broker-restart": 1}
LONG = {
    "kill-alo": 20,
    "kill-eos": 20,
    "repartition-alo": 2,
    "repartition-eos": 2,
    "broker-restart": 4,
    "cluster-kill": 2,
    "rebalance-alo": 3,
    "rebalance-eos": 3,
    "overload": 1,
    **dict.fromkeys(PRODUCE_SIDE, 1),
}
SHARED_BROKER = {
    *(k for k in PRODUCE_SIDE if k != "sigterm-broker-down"),
    "kill-alo",
    "kill-eos",
    "repartition-alo",
    "repartition-eos",
    "rebalance-alo",
    "rebalance-eos",
    "overload",
}


async def run_trials(
    plan: dict[str, int], seed: int, workdir: Path, on_result: Callable[[TrialResult], None] | None = None
) -> list[TrialResult]:
    rng = random.Random(seed)
    ctx = Context(workdir)
    results: list[TrialResult] = []
    try:
        if SHARED_BROKER & {k for k, n in plan.items() if n}:
            ctx.broker = KafkaBroker(workdir / "broker").start()
        for kind, n in plan.items():
            for i in range(n):
                trial_rng = random.Random(rng.randrange(1 << 30))
                print(f"--- {kind} {i + 1}/{n}", flush=True)
                try:
                    result = await TRIALS[kind](ctx, trial_rng)
                except (
                    Exception
                ) as err:  # a trial that cannot finish is a failed trial, not a crash of the run
                    result = TrialResult(kind, False, note=f"trial error: {type(err).__name__}: {err}")
                print(
                    f"    {'ok  ' if result.ok else 'FAIL'} {result.events} events, lost {result.lost}, "
                    f"duplicated {result.duplicated}, crashes {result.crashes}, {result.seconds:.0f} s; "
                    f"{result.note}",
                    flush=True,
                )
                for line in result.problems:
                    print(f"      {line}", flush=True)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    finally:
        if ctx.broker is not None:
            ctx.broker.close()
    return results


def table(results: list[TrialResult]) -> str:
    """The Markdown table of RELIABILITY.md: one row per trial type, sums over its trials."""
    rows: dict[str, list[TrialResult]] = {}
    for r in results:
        rows.setdefault(r.kind, []).append(r)
    cols = ("trial", "trials", "failed", "events", "lost", "duplicated", "crashes")
    lines = [
        "| " + " | ".join(cols) + " |",
        "|" + "|".join("---:" if c != "trial" else "---" for c in cols) + "|",
    ]
    for kind, rs in rows.items():
        cells = [
            kind,
            len(rs),
            sum(not r.ok for r in rs),
            f"{sum(r.events for r in rs):,}",
            sum(r.lost for r in rs),
            sum(r.duplicated for r in rs),
            sum(r.crashes for r in rs),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    parser.add_argument(
        "--short",
        action="store_true",
        help="the CI version: " + ", ".join(f"{n} {k}" for k, n in SHORT.items()),
    )
    parser.add_argument("--only", action="append", choices=sorted(TRIALS), help="run only this trial type")
    parser.add_argument("--trials", type=int, default=None, help="trials per type (default: short/long plan)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    parser.add_argument("--json", type=Path, default=None, help="write every trial's result here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, broker data)")
    args = parser.parse_args(argv)
    plan = dict(SHORT if args.short else LONG)
    if args.only:
        plan = {k: plan.get(k, 1) for k in args.only}
    if args.trials is not None:
        plan = {k: args.trials for k in plan}
    # The trial script's own clients (producer, audit) reconnect through the broker faults on
    # purpose; aiokafka logs each attempt at ERROR, which would bury the table.
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    seed = args.seed if args.seed is not None else int(time.time())
    workdir = Path(tempfile.mkdtemp(prefix="stream-pairer-trials-"))
    print(f"fault trials: seed {seed}, plan {plan}, work dir {workdir}", flush=True)
    started = time.monotonic()
    results = asyncio.run(run_trials(plan, seed, workdir))
    elapsed = time.monotonic() - started
    print()
    print(table(results))
    print(f"\n{len(results)} trials, {sum(not r.ok for r in results)} failed, {elapsed:.0f} s, seed {seed}")
    if args.json is not None:
        args.json.write_text(
            json.dumps({"seed": seed, "seconds": elapsed, "results": [asdict(r) for r in results]}, indent=2)
        )
    failed = any(not r.ok for r in results)
    if args.keep or failed:
        print(f"logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
