"""Helpers for the sidecar's integration tests: produce input, read outputs, count event identities.

The conservation check used everywhere: every input event is identified by (topic, partition,
offset, block) from the lineage the outputs carry; a dead letter by (topic, partition, offset, None).
Counting those identities over the pairs, orphans and dead-letter topics (read_committed) says
"nothing lost" (every expected identity present) and "nothing duplicated" (each exactly once).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from stream_pairer.adapters.kafka.sidecar import Sidecar, SidecarConfig
from tests.reference.engine import EngineConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from kafka_broker import free_ports as _free_ports

Identity = tuple[str, int, int, int | None]


def now_ms() -> int:
    return int(time.time() * 1000)


def event(conv: str, kind: str, cid: str | None = None, name: str | None = "search", **extra: Any) -> bytes:
    body: dict[str, Any] = {"conversation_id": conv, "type": kind, "ts": now_ms(), **extra}
    if cid is not None:
        body["id"] = cid
    if name is not None:
        body["name"] = name
    if kind == "tool_result":
        body.setdefault("content", "ok")
    return orjson.dumps(body)


def config(bootstrap: str, topic: str | list[str], group: str, **kw: Any) -> SidecarConfig:
    """A sidecar configured for quick tests: short timers, an ephemeral HTTP port."""
    engine = kw.pop("engine", EngineConfig(call_timeout_ms=3_000, result_grace_ms=1_000))
    base = SidecarConfig(
        bootstrap_servers=bootstrap,
        input_topics=tuple([topic] if isinstance(topic, str) else topic),
        group_id=group,
        engine=engine,
        tick_interval_s=0.2,
        commit_interval_s=0.2,
        poll_timeout_s=0.1,
        http_port=0,
        http_host="127.0.0.1",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        backoff_initial_s=0.2,
        backoff_max_s=2.0,
        shutdown_timeout_s=20.0,
    )
    return replace(base, **kw)


async def produce(
    bootstrap: str, topic: str, items: Iterable[tuple[bytes | None, bytes | None]]
) -> list[tuple[int, int]]:
    """Send (key, value) pairs in order; return each one's (partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in items]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return [(m.partition, m.offset) for m in metas]


async def trickle(
    bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]], chunk: int, pause_s: float
) -> list[tuple[int, int]]:
    """Produce `items` a few at a time with pauses, so that a kill lands while input is still
    arriving (mid-batch, mid-transaction) rather than after a single burst."""
    out: list[tuple[int, int]] = []
    for i in range(0, len(items), chunk):
        out += await produce(bootstrap, topic, items[i : i + chunk])
        await asyncio.sleep(pause_s)
    return out


class OutputReader:
    """Reads the three output topics of one input topic from the start, read_committed."""

    def __init__(self, bootstrap: str, topic: str, isolation_level: str = "read_committed") -> None:
        self.topics = [f"{topic}.pairs", f"{topic}.orphans", f"{topic}.dead-letter"]
        self.consumer = AIOKafkaConsumer(
            *self.topics,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            isolation_level=isolation_level,
            enable_auto_commit=False,
            metadata_max_age_ms=1000,
        )
        self.messages: list[Any] = []

    async def __aenter__(self) -> OutputReader:
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def poll(self, timeout_ms: int = 200) -> None:
        for batch in (await self.consumer.getmany(timeout_ms=timeout_ms)).values():
            self.messages.extend(batch)

    @property
    def records(self) -> list[dict[str, Any]]:
        return [orjson.loads(m.value) for m in self.messages]

    async def until(self, done: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done(self.records):
            if time.monotonic() > deadline:
                raise AssertionError(f"outputs incomplete after {timeout_s}s: {summary(self.records)}")
            await self.poll()

    async def settle(self, quiet_s: float = 1.0) -> None:
        """Keep reading until nothing new arrived for `quiet_s` (catches late duplicates)."""
        n = -1
        while n != len(self.messages):
            n = len(self.messages)
            deadline = time.monotonic() + quiet_s
            while time.monotonic() < deadline:
                await self.poll(100)


def identities(records: Iterable[dict[str, Any]]) -> Counter[Identity]:
    seen: Counter[Identity] = Counter()
    for r in records:
        if r["kind"] == "dead_letter":
            s = r["source"]
            seen[(s["topic"], s["partition"], s["offset"], None)] += 1
            continue
        for side in [r["call"], r["result"]] if r["kind"] == "pair" else [r["event"]]:
            s = side["source"]
            seen[(s["topic"], s["partition"], s["offset"], side["block"])] += 1
    return seen


def summary(records: Iterable[dict[str, Any]]) -> Counter[str]:
    c: Counter[str] = Counter()
    for r in records:
        c[r["kind"] + (f":{r['reason']}" if "reason" in r and r["kind"] != "dead_letter" else "")] += 1
    return c


async def wait_for(pred: Callable[[], bool], timeout_s: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s}s")
        await asyncio.sleep(0.05)


async def wait_async(
    pred: Callable[[], Awaitable[bool]], timeout_s: float = 30.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s}s")
        await asyncio.sleep(0.1)


def http_get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


async def started(cfg: SidecarConfig, ready_timeout_s: float = 30.0) -> Sidecar:
    sidecar = Sidecar(cfg)
    await sidecar.start()
    await wait_for(lambda: sidecar.ready, ready_timeout_s, "sidecar ready")
    return sidecar


class SidecarProcess:
    """`stream-pairer run` as a child process (what a container runs), for SIGTERM and kill -9 trials."""

    def __init__(self, log_path: Path, bootstrap: str, topic: str, group: str, *extra: str) -> None:
        (self.http_port,) = _free_ports(1)
        self.log_path = log_path
        self.args = [
            sys.executable, "-m", "stream_pairer", "run",
            "--bootstrap-servers", bootstrap, "--input-topic", topic, "--group-id", group,
            "--http-host", "127.0.0.1", "--http-port", str(self.http_port),
            "--tick-interval", "0.2", "--commit-interval", "0.2", "--poll-timeout", "0.1",
            "--session-timeout", "6", "--backoff-max", "2", "--call-timeout", "20", "--result-grace", "2",
            *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SidecarProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_PAIRER_")}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    def ready(self) -> bool:
        try:
            return http_get(self.http_port, "/readyz")[0] == 200
        except OSError:
            return False

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not await asyncio.to_thread(self.ready):
            assert self.proc is not None
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"sidecar process not ready:\n{self.log_tail()}")
            await asyncio.sleep(0.2)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    async def terminate(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, timeout_s)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


Traffic = list[tuple[bytes | None, bytes | None]]


def interleave(scripts: dict[str, list[bytes]], seed: int) -> Traffic:
    """Conversations mixed at random, each in its own order, keyed by conversation id."""
    rnd = random.Random(seed)
    queues = {conv: list(values) for conv, values in scripts.items() if values}
    out: Traffic = []
    while queues:
        conv = rnd.choice(sorted(queues))
        out.append((conv.encode(), queues[conv].pop(0)))
        if not queues[conv]:
            del queues[conv]
    return out


def two_phase_traffic(n_convs: int, calls: int, seed: int, prefix: str = "conv") -> tuple[Traffic, Traffic]:
    """Phase 1 leaves one call open per conversation (answered in phase 2) and pairs the rest, by id
    and (one per conversation) FIFO; phase 2 answers the open calls and adds new pairs."""
    one: dict[str, list[bytes]] = {}
    two: dict[str, list[bytes]] = {}
    for n in range(n_convs):
        c = f"{prefix}{n}"
        script = [event(c, "tool_call", None, name="lookup"), event(c, "tool_result", None, name="lookup")]
        for i in range(calls):
            script.append(event(c, "tool_call", f"{c}-{i}"))
            if i < calls - 1:
                script.append(event(c, "tool_result", f"{c}-{i}"))
        one[c] = script
        two[c] = [event(c, "tool_result", f"{c}-{calls - 1}"), event(c, "tool_call", f"{c}-x"),
                  event(c, "tool_result", f"{c}-x")]  # fmt: skip
    return interleave(one, seed), interleave(two, seed + 1)


def expected_identities(topic: str, placed: list[tuple[int, int]]) -> set[Identity]:
    """One event (block 0) per produced record: what two_phase_traffic writes."""
    return {(topic, p, o, 0) for p, o in placed}
