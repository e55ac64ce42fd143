"""Live alert drill: Kafka, the sidecar, Prometheus and Alertmanager (the Debian packages) and a
webhook receiver, all on 127.0.0.1; prints the time to fire and the time to resolve of each alert.

Why a drill besides the promtool cases: promtool proves the rules' arithmetic on synthetic series;
only real components show what an on-call engineer gets: the sidecar's real counters, scrape and
evaluation intervals, Alertmanager's grouping, a real SIGKILL. The rules are the shipped ones with
every duration divided by --speedup (windows, offsets, `for:`, evaluation and scrape intervals), so
a drill of a few minutes stands for one of --speedup times as long; the table gives both.

Phases: healthy traffic (no alert may fire) -> orphan results jump to --spike of all results (as in
issue 25: 0 % -> 23 %) until StreamPairerOrphanRateHigh fires -> healthy again until it resolves ->
SIGKILL the sidecar until StreamPairerDown fires -> start it again until it resolves.

    python3 scripts/alert_drill.py            # ~4 minutes at --speedup 6
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiokafka import AIOKafkaProducer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from kafka_broker import KafkaBroker, create_topic, free_ports  # noqa: E402  (a script beside us)

RULES = ROOT / "deploy" / "prometheus" / "stream-pairer-rules.yml"
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION = re.compile(r"(\d+)(ms|[smhd])")


def shrink(text: str, k: float) -> str:
    """Every duration in `text` divided by k, in milliseconds (Prometheus accepts `1500ms`)."""

    def one(m: re.Match[str]) -> str:
        return f"{max(1, round(int(m.group(1)) * UNITS[m.group(2)] * 1000 / k))}ms"

    return DURATION.sub(one, text)


def compressed_rules(k: float) -> dict[str, Any]:
    rules: dict[str, Any] = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        if "interval" in group:
            group["interval"] = shrink(group["interval"], k)
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"\[[^\]]+\]|offset \w+", lambda m: shrink(m.group(0), k), rule["expr"])
            if "for" in rule:
                rule["for"] = shrink(rule["for"], k)
    return rules


class Webhook:
    """Alertmanager's webhook receiver: (monotonic time, alertname, status) per notified alert."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []
        events = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                now = time.monotonic()
                for alert in body.get("alerts", []):
                    events.append((now, alert["labels"]["alertname"], alert["status"]))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None: ...

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def first(self, alert: str, status: str, after: float) -> float | None:
        return next((t for t, a, s in self.events if a == alert and s == status and t >= after), None)

    def fired_between(self, start: float, end: float) -> list[str]:
        return sorted({a for t, a, s in self.events if s == "firing" and start <= t < end})


def event(conv: str, kind: str, cid: str) -> bytes:
    body = {"conversation_id": conv, "type": kind, "ts": int(time.time() * 1000), "id": cid, "name": "search"}
    if kind == "tool_result":
        body["content"] = "ok"
    return orjson.dumps(body)


class Traffic:
    """Calls and their results at `rate` results/s; a share `orphans` of the results have no call."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.orphans = 0.0
        self.sent = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await producer.start()
        rnd = random.Random(25)
        try:
            n = 0
            while not self._stop.is_set():
                started = time.monotonic()
                for _ in range(max(1, int(self.rate / 10))):
                    n += 1
                    conv = f"c{n % 50}"
                    cid = f"t{n}"
                    if rnd.random() >= self.orphans:
                        await producer.send(self.topic, event(conv, "tool_call", cid), key=conv.encode())
                    await producer.send(self.topic, event(conv, "tool_result", cid), key=conv.encode())
                    self.sent += 1
                await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        finally:
            await producer.stop()

    def stop(self) -> None:
        self._stop.set()


def start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
            if resp.status == 200:
                return
        time.sleep(0.5)
    raise SystemExit(f"{url} not answering after {timeout}s")


async def until(pred: Any, limit_s: float) -> float | None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = pred()
        if found is not None:
            return float(found)
        await asyncio.sleep(0.2)
    return None


async def phases(
    args: argparse.Namespace, watch: tuple[Webhook, int], traffic: Traffic, run_sidecar: Any, sidecar: Any
) -> tuple[list[tuple[str, str, float | None, float | None]], list[str], Any]:
    """Healthy, spike, healthy, kill, restart: (alert, phase, to fire, to resolve) per alert. The
    healthy phase's noise: alerts notified, and alerts Prometheus had pending (never notified)."""
    hook, prom = watch
    rows: list[tuple[str, str, float | None, float | None]] = []

    t0 = time.monotonic()
    print(f"healthy traffic ({args.rate:.0f} results/s) for {args.healthy:.0f}s ...", flush=True)
    await asyncio.sleep(args.healthy)
    noise = hook.fired_between(t0, time.monotonic()) + pending(prom, args.healthy)

    print(f"orphan results at {args.spike:.0%} of all results ...", flush=True)
    traffic.orphans = args.spike
    spike = time.monotonic()
    fired = await until(lambda: hook.first("StreamPairerOrphanRateHigh", "firing", spike), args.cap)
    await asyncio.sleep(args.hold)
    traffic.orphans = 0.0
    calm = time.monotonic()
    print("healthy again ...", flush=True)
    resolved = await until(lambda: hook.first("StreamPairerOrphanRateHigh", "resolved", calm), args.cap)
    rows.append((f"StreamPairerOrphanRateHigh (0% -> {args.spike:.0%})", "spike",
                 None if fired is None else fired - spike,
                 None if resolved is None else resolved - calm))  # fmt: skip

    print("SIGKILL the sidecar ...", flush=True)
    sidecar.kill()
    sidecar.wait()
    killed = time.monotonic()
    fired = await until(lambda: hook.first("StreamPairerDown", "firing", killed), args.cap)
    sidecar = run_sidecar()
    back = time.monotonic()
    print("sidecar started again ...", flush=True)
    resolved = await until(lambda: hook.first("StreamPairerDown", "resolved", back), args.cap)
    rows.append(("StreamPairerDown (SIGKILL)", "kill", None if fired is None else fired - killed,
                 None if resolved is None else resolved - back))  # fmt: skip
    return rows, noise, sidecar


def pending(prom: int, window_s: float) -> list[str]:
    """Alerts pending or firing at any evaluation of the last `window_s` (Prometheus's ALERTS)."""
    query = urllib.parse.quote(f"count by (alertname, alertstate) (max_over_time(ALERTS[{window_s:.0f}s]))")
    with urllib.request.urlopen(f"http://127.0.0.1:{prom}/api/v1/query?query={query}", timeout=5) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return [f"{r['metric']['alertname']} ({r['metric']['alertstate']})" for r in result]


def write_configs(work: Path, k: float, ports: tuple[int, int, int], hook: int) -> str:
    """The compressed rules, Prometheus (scraping the sidecar) and Alertmanager (to the webhook)."""
    http, _, am = ports
    (work / "rules.yml").write_text(yaml.safe_dump(compressed_rules(k), sort_keys=False))
    scrape = shrink("30s", k)
    (work / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": scrape, "evaluation_interval": scrape},
        "rule_files": [str(work / "rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am}"]}]}]},
        "scrape_configs": [{"job_name": "stream-pairer-drill",
                            "static_configs": [{"targets": [f"127.0.0.1:{http}"]}]}],
    }))  # fmt: skip
    (work / "alertmanager.yml").write_text(yaml.safe_dump({
        "route": {"receiver": "hook", "group_by": ["alertname"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "hook", "webhook_configs": [
            {"url": f"http://127.0.0.1:{hook}/", "send_resolved": True}]}],
    }))  # fmt: skip
    return scrape


async def drill(args: argparse.Namespace, work: Path) -> int:
    k = args.speedup
    hook = Webhook()
    broker = KafkaBroker(work / "kafka").start()
    procs: list[subprocess.Popen[bytes]] = []
    sidecar: subprocess.Popen[bytes] | None = None
    try:
        topic = await create_topic(broker.bootstrap, 2, 1, "drill", wait_s=30.0)
        http, prom, am = free_ports(3)
        scrape = write_configs(work, k, (http, prom, am), hook.port)
        procs.append(start([
            "prometheus-alertmanager", f"--config.file={work / 'alertmanager.yml'}",
            f"--storage.path={work / 'am'}", f"--web.listen-address=127.0.0.1:{am}",
            "--cluster.listen-address=",
        ], work / "alertmanager.log"))  # fmt: skip
        procs.append(start([
            "prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom}",
        ], work / "prometheus.log"))  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        sidecar_cmd = [
            sys.executable, "-m", "stream_pairer", "run", "--bootstrap-servers", broker.bootstrap,
            "--input-topic", topic, "--group-id", "drill", "--http-host", "127.0.0.1",
            "--http-port", str(http), "--result-grace", "0.5", "--call-timeout", "30",
            "--commit-interval", "0.5", "--log-level", "WARNING",
        ]  # fmt: skip

        def run_sidecar() -> subprocess.Popen[bytes]:
            with (work / "sidecar.log").open("ab") as out:
                return subprocess.Popen(sidecar_cmd, stdout=out, stderr=subprocess.STDOUT, env=env)

        sidecar = run_sidecar()
        wait_http(f"http://127.0.0.1:{http}/readyz")
        wait_http(f"http://127.0.0.1:{prom}/-/ready")
        wait_http(f"http://127.0.0.1:{am}/-/ready")
        traffic = Traffic(broker.bootstrap, topic, args.rate)
        sender = asyncio.create_task(traffic.run())
        rows, noise, sidecar = await phases(args, (hook, prom), traffic, run_sidecar, sidecar)
        traffic.stop()
        await sender

        def fmt(s: float | None) -> str:
            return "never" if s is None else f"{s:6.1f}s"

        def real(s: float | None) -> str:
            return "never" if s is None else f"{s * k / 60:5.1f} min"

        print(
            f"\nrules compressed {k:g}x (scrape and evaluation every {scrape}); {traffic.sent} results sent"
        )
        print(f"alerts notified during the {args.healthy:.0f}s healthy phase: {noise or 'none'}")
        head = f"{'alert':42} {'to fire':>9} {'to resolve':>11} |"
        print(f"{head} {'shipped rules: to fire':>23} {'to resolve':>11}")
        for name, _, fire, res in rows:
            print(f"{name:42} {fmt(fire):>9} {fmt(res):>11} | {real(fire):>23} {real(res):>11}")
        late = [r for r in rows if r[2] is None or r[3] is None]
        return 1 if late or noise else 0
    finally:
        if sidecar is not None and sidecar.poll() is None:
            sidecar.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                sidecar.wait(20)
        for proc in procs:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        broker.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--speedup", type=float, default=6.0, help="divide every rule duration by this")
    parser.add_argument("--rate", type=float, default=100.0, help="results per second")
    parser.add_argument("--spike", type=float, default=0.23, help="share of results without a call")
    parser.add_argument("--healthy", type=float, default=75.0, help="seconds of healthy traffic first")
    parser.add_argument("--hold", type=float, default=10.0, help="seconds the spike lasts after firing")
    parser.add_argument("--cap", type=float, default=120.0, help="give up waiting for an alert after this")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args()
    for tool in ("prometheus", "prometheus-alertmanager"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found (Debian: apt-get install prometheus prometheus-alertmanager)")
    work = Path(tempfile.mkdtemp(prefix="stream-pairer-drill-"))
    try:
        return asyncio.run(drill(args, work))
    finally:
        if args.keep:
            print(f"logs in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
