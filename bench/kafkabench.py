"""Shared Kafka plumbing for the end-to-end benchmarks: broker, topics, loading, measuring outputs.

How a run is measured (the same for every runner, so their ratios are fair):
* the input topic is loaded *before* the runner starts (kcat, from a cached key<TAB>value file);
* every output topic is created with `message.timestamp.type=LogAppendTime`, so each output message
  carries the broker's clock at the moment it was appended (with one broker and acks=all, that is
  when the producer's send was acknowledged);
* the runner is started, the harness polls end offsets until the outputs are complete, stops it;
* the outputs are then read back with kcat (`read_committed`): count, first and last timestamp.
  steady rate = input records / (last - first output timestamp): start-up and group join excluded;
  wall rate = input records / (last output timestamp - runner start): everything included.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common
import datagen
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

sys.path.insert(0, str(common.ROOT / "scripts"))
import kafka_broker

DATA_DIR = Path(os.environ.get("BENCH_DATA_DIR", "/tmp/stream-pairer-bench"))
KCAT = shutil.which("kcat") or shutil.which("kafkacat") or "kcat"


@dataclass(slots=True)
class DataFile:
    path: Path
    records: int
    expected_pairs: int
    conversations: int
    describe: str


def data_file(conversations: int, records: int, seed: int = 42) -> DataFile:
    """The benchmark records as `key<TAB>value` lines, generated once and cached by parameters.
    Every answerable call is answered (drain), so the expected number of pairs is exact."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"records-k{conversations}-n{records}-s{seed}.tsv"
    meta = path.with_suffix(".meta")
    if path.exists() and meta.exists():
        n, pairs, desc = meta.read_text().split("\n", 2)
        return DataFile(path, int(n), int(pairs), conversations, desc)
    t0 = time.perf_counter()
    ds = datagen.generate(conversations, records, seed=seed, drain=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for k, v in ds.all:
            f.write(k + b"\t" + v + b"\n")
    tmp.rename(path)
    n = len(ds.warmup) + len(ds.records)
    desc = ds.describe()
    meta.write_text(f"{n}\n{ds.stats['results']}\n{desc}")
    print(f"data: {desc} -> {path} ({time.perf_counter() - t0:.0f}s)", flush=True)
    return DataFile(path, n, ds.stats["results"], conversations, desc)


class Broker:
    """A running broker: ours (started here, stopped at exit) or one given by --bootstrap-servers."""

    def __init__(self, bootstrap: str | None) -> None:
        self._own: Any = None
        if bootstrap:
            self.bootstrap = bootstrap
        else:
            t0 = time.monotonic()
            self._own = kafka_broker.KafkaBroker(DATA_DIR / f"broker-{uuid.uuid4().hex[:6]}").start()
            self.bootstrap = self._own.bootstrap
            print(f"broker: Kafka {self._own.version} at {self.bootstrap} ({time.monotonic() - t0:.0f}s)")
        self.version = self._own.version if self._own else os.environ.get("KAFKA_VERSION", "?")

    def pid(self) -> int | None:
        return self._own.proc.pid if self._own and self._own.proc else None

    def close(self) -> None:
        if self._own:
            self._own.close()
            shutil.rmtree(self._own.dir, ignore_errors=True)


async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    return admin


def create_topics(bootstrap: str, names: Sequence[str], partitions: int, log_append: bool = True) -> None:
    async def go() -> None:
        admin = await _admin(bootstrap)
        try:
            cfg = {"message.timestamp.type": "LogAppendTime"} if log_append else {}
            await admin.create_topics([NewTopic(n, partitions, 1, topic_configs=cfg) for n in names])
        finally:
            await admin.close()

    asyncio.run(go())


def delete_topics(bootstrap: str, prefix: str) -> None:
    """Free the disk of a finished run (1M records are ~1 GiB per topic)."""

    async def go() -> None:
        admin = await _admin(bootstrap)
        try:
            names = [t for t in await admin.list_topics() if t.startswith(prefix)]
            if names:
                await admin.delete_topics(names)
        finally:
            await admin.close()

    with contextlib.suppress(Exception):
        asyncio.run(go())


def load(bootstrap: str, topic: str, data: DataFile) -> float:
    """Produce the data file into `topic` with kcat (keyed: a conversation stays on one partition)."""
    t0 = time.perf_counter()
    cmd = [
        KCAT,
        "-P",
        "-q",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-K",
        "\t",
        "-z",
        "none",
        "-X",
        "linger.ms=20",
        "-X",
        "batch.num.messages=10000",
        "-l",
        str(data.path),
    ]
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


class _Offsets:
    """One long-lived metadata consumer (a consumer started and stopped per poll trips over an
    aiokafka 0.14 cancellation in stop()); its own event loop, driven synchronously."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.consumers: dict[str, AIOKafkaConsumer] = {}

    def get(self, bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
        return self.loop.run_until_complete(self._get(bootstrap, topics))

    async def _get(self, bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
        c = self.consumers.get(bootstrap)
        if c is None:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
            await c.start()
            self.consumers[bootstrap] = c
        md = await c._client.fetch_all_metadata()  # fresh metadata: the topics may be new
        tps = [TopicPartition(t, p) for t in topics for p in (md.partitions_for_topic(t) or ())]
        ends = await c.end_offsets(tps) if tps else {}
        out = dict.fromkeys(topics, 0)
        for tp, o in ends.items():
            out[tp.topic] += o
        return out

    def close(self) -> None:
        for c in self.consumers.values():
            self.loop.run_until_complete(c.stop())
        self.consumers.clear()


_OFFSETS = _Offsets()
atexit.register(_OFFSETS.close)


def end_offsets(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    return _OFFSETS.get(bootstrap, topics)


def read_back(bootstrap: str, topic: str, fmt: str = "%T\\n") -> list[bytes]:
    """Every committed message of a topic, formatted by kcat (default: its timestamp)."""
    cmd = [
        KCAT,
        "-C",
        "-q",
        "-e",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-o",
        "beginning",
        "-f",
        fmt,
        "-X",
        "isolation.level=read_committed",
    ]
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    return out.splitlines()


def wait_outputs(  # noqa: PLR0917
    bootstrap: str,
    proc: subprocess.Popen[bytes] | None,
    topic: str,
    expected: int,
    timeout: float,
    settle: float = 2.0,
    procs: Sequence[subprocess.Popen[bytes]] = (),
) -> bool:
    """Poll the end offset of `topic` until it holds `expected` messages and stops growing (with
    transactions, end offsets include commit markers, hence the settle), or until `timeout`."""
    deadline = time.monotonic() + timeout
    last, last_change = -1, time.monotonic()
    everyone = [p for p in (proc, *procs) if p is not None]
    while time.monotonic() < deadline:
        n = end_offsets(bootstrap, [topic])[topic]
        now = time.monotonic()
        if n != last:
            last, last_change = n, now
        if n >= expected and now - last_change >= settle:
            return True
        if everyone and all(p.poll() is not None for p in everyone) and now - last_change >= settle:
            return n >= expected  # every runner exited (kcat does at end of input)
        time.sleep(0.5)
    return False


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def stop(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 30.0) -> None:
    """SIGTERM each runner's process group. A runner under py-spy: only the profiled child gets it,
    so that py-spy sees its target exit and writes the profile."""
    for p in procs:
        if p.poll() is None and isinstance(p.args, list) and p.args and p.args[0] == "py-spy":
            for child in _children(p.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout)
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def spawn(cmd: Sequence[str] | str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a runner in its own process group (so a shell pipeline stops as a whole)."""
    with open(log, "ab") as f:
        return subprocess.Popen(
            cmd,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            shell=isinstance(cmd, str),
            env={**os.environ, **(env or {})},
            cwd=common.ROOT,
        )


def measure(bootstrap: str, topic: str, t_start: float, n_in: int) -> dict[str, Any]:
    """Count and time the outputs of a finished run from the broker's append timestamps."""
    ts = [int(x) for x in read_back(bootstrap, topic) if x.strip()]
    if not ts:
        return {"outputs": 0}
    first, last = min(ts) / 1000, max(ts) / 1000
    steady = n_in / (last - first) if last > first else float("nan")
    return {
        "outputs": len(ts),
        "first_output_after_s": round(first - t_start, 2),
        "span_s": round(last - first, 2),
        "steady_records_per_s": round(steady),
        "wall_records_per_s": round(n_in / (last - t_start)),
    }
