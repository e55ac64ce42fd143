"""Small helpers every benchmark script shares: machine facts, load average, RSS, result lines.

Every figure a script prints is also appended as one JSON line to `bench/results/<name>.jsonl`
together with the load average at the time, so that BENCHMARKS.md can quote exactly what was
measured (and under what load: the benchmark machine is shared with other work).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# Benchmark this checkout, whatever `pip install -e` last pointed the installed package at: the
# scripts import stream_pairer after this module, and child processes get it through PYTHONPATH.
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)


def loadavg() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size from /proc (Linux): what the kernel actually holds for the process."""
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    mem = 0
    with open("/proc/meminfo", "rb") as f:
        for line in f:
            if line.startswith(b"MemTotal:"):
                mem = int(line.split()[1]) * 1024
    cpu = ""
    with open("/proc/cpuinfo", "rb") as f:
        for line in f:
            if line.startswith(b"model name"):
                cpu = line.split(b":", 1)[1].strip().decode()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_gib": round(mem / 2**30, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "orjson": version("orjson"),
        "aiokafka": version("aiokafka"),
        "quixstreams": version("quixstreams"),
        "confluent-kafka": version("confluent-kafka"),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "stream_pairer": _package_path(),
    }


def _package_path() -> str:
    import stream_pairer  # noqa: PLC0415 - imported late, after sys.path points at this checkout

    return str(Path(stream_pairer.__file__).parent)


def git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout.strip()
    except OSError:
        return ""


def record(name: str, row: dict[str, Any]) -> None:
    """Append one result row (with load average, time and command line) and print it."""
    row = {
        "bench": name,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "loadavg": loadavg(),
        "git": git_rev(),
        "argv": " ".join(sys.argv),
        **row,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{name}.jsonl", "ab") as f:
        f.write(orjson.dumps(row) + b"\n")


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"
