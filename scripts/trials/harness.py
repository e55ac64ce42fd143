"""What every fault trial shares: topics, producing, settling and auditing, the `stream-pairer run`
subprocess (`SidecarProc`), and the trial's result.

Why apart: the trial families (crash.py, produce_side.py) differ in the fault they make, not in how
they start a sidecar or prove conservation with `stream-pairer audit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import kafka_broker
from kafka_broker import KafkaBroker, free_ports

from stream_pairer.analysis.audit import Auditor, AuditReport, render
from stream_pairer.cli.commands.audit import audit_topics
from stream_pairer.errors import AuditReadError

ROOT = Path(__file__).resolve().parents[2]

# Trial timings. Calls that never get a result are emitted after CALL_TIMEOUT_S of their
# conversation's event time or of the partition's processing time (the wall-clock tick), so a trial
# is complete a few seconds after its input stops.
CALL_TIMEOUT_S = 4.0
RESULT_GRACE_S = 2.0
SETTLE_TIMEOUT_S = 120.0


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
