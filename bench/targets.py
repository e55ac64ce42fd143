#!/usr/bin/env python3
"""Issue 15's targets in one table, from the result lines that `make bench-targets` just appended.

Every figure comes from `bench/results/*.jsonl` rows written at one git commit (the checkout's
HEAD unless `--git` names another), the latest row of each kind, so one `make bench-targets` run
gives one table; a target whose rows are missing is printed as "not measured", never guessed.

    python bench/targets.py            # after: make bench-targets
    python bench/targets.py --git 1a2b3c4

Targets (issue 15): the compiled core (tagging on, as `--engine auto` runs it) at most 1.5x the CPU
time of `orjson.loads` + `orjson.dumps` of the same records at 1k, 100k and 1M open conversations;
sidecar at-least-once >= 0.5x an aiokafka `send_batch` passthrough; exactly-once >= 0.7x
at-least-once; >= 3x the Quix Streams peer in both modes; p99 arrival-to-ack latency at half of the
peak rate <= 50 ms; RSS within 10 % over a 10-minute soak after warm-up. Asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common


def rows(name: str, git: str) -> Iterator[dict[str, Any]]:
    path = common.RESULTS / f"{name}.jsonl"
    if not path.exists():
        return
    for line in path.read_bytes().splitlines():
        if line.strip():
            row = orjson.loads(line)
            if any(str(row.get("git", "")).startswith(g) for g in git.split(",")):
                yield row


def verdict(value: float | None, goal: float, at_most: bool) -> str:
    if value is None:
        return "not measured"
    ok = value <= goal if at_most else value >= goal
    if ok:
        return "met"
    return f"MISSED by {abs(value - goal):.2f}"


def engine(git: str) -> list[tuple[str, str, str, str]]:
    latest: dict[tuple[int, str], dict[str, Any]] = {}
    for r in rows("native", git):
        if r.get("format") == "mix":
            latest[(r["conversations"], r["variant"])] = r
    out = []
    for k in (1_000, 100_000, 1_000_000):
        r = latest.get((k, "native_tag")) or latest.get((k, "native"))
        ratio = r.get("ratio_vs_orjson") if r else None
        what = f"engine at {k:,} conversations ({r['variant'] if r else 'native_tag'}) / orjson round trip"
        fig = "-"
        if r and ratio:
            fig = f"{ratio:.2f}x ({r['us_per_record']:.2f} us/record, load {r['loadavg']})"
        out.append((what, fig, "<= 1.5x", verdict(ratio, 1.5, at_most=True)))
    return out


def e2e(git: str) -> list[tuple[str, str, str, str]]:
    best: dict[str, dict[str, Any]] = {}
    for r in rows("e2e", git):
        if r.get("processes", 1) != 1 or not r.get("complete"):
            continue
        rate = float(r.get("steady_records_per_s") or 0)
        if rate >= float(best.get(r["runner"], {}).get("steady_records_per_s") or 0):
            best[r["runner"]] = r
    out = []
    for what, num, den, goal in (
        ("sidecar ALO / aiokafka send_batch passthrough", "sidecar", "aiokafka-batch", 0.5),
        ("sidecar EOS / sidecar ALO", "sidecar-eos", "sidecar", 0.7),
        ("sidecar ALO / Quix Streams ALO", "sidecar", "quix", 3.0),
        ("sidecar EOS / Quix Streams EOS", "sidecar-eos", "quix-eos", 3.0),
    ):
        a, b = best.get(num), best.get(den)
        if a and b:
            ra, rb = float(a["steady_records_per_s"]), float(b["steady_records_per_s"])
            ratio: float | None = ra / rb
            fig = f"{ratio:.2f} ({ra:,.0f} / {rb:,.0f} records/s, {a['records']:,} records)"
        else:
            ratio, fig = None, "-"
        out.append((what, fig, f">= {goal}", verdict(ratio, goal, at_most=False)))
    return out


def latency(git: str) -> list[tuple[str, str, str, str]]:
    latest: dict[str, dict[str, Any]] = {}
    for r in rows("latency", git):
        latest[r["mode"]] = r
    out = []
    for mode in ("alo", "eos"):
        r = latest.get(mode)
        p99 = float(r["ack_p99_ms"]) if r else None
        fig = "-"
        if r:
            fig = f"{p99:.0f} ms at {r['rate']:,} records/s (visible p99 {r.get('visible_p99_ms')} ms)"
        what = f"p99 arrival-to-ack at half of peak, {mode}"
        out.append((what, fig, "<= 50 ms", verdict(p99, 50, at_most=True)))
    return out


def soak(git: str, warmup_s: float) -> list[tuple[str, str, str, str]]:
    latest: dict[str, dict[str, Any]] = {}
    for r in rows("soak", git):
        latest[r.get("engine", "auto")] = r
    out = []
    for eng, r in sorted(latest.items()):
        samples = [(s["t"], s["rss"]) for s in r.get("samples", [])]
        warm = float(r.get("warmup_s") or warmup_s)  # the soak's own warm-up when it names one
        after = [rss for t, rss in samples if t >= warm]
        growth = (max(after) / after[0] - 1) * 100 if len(after) > 1 else None
        fig = (
            f"+{growth:.1f} % ({after[0] / 2**20:.0f} -> max {max(after) / 2**20:.0f} MiB "
            f"after {warm:.0f} s, {r['duration_s']:.0f} s soak)"
            if growth is not None
            else "-"
        )
        what = f"RSS growth after warm-up, engine {eng}"
        out.append((what, fig, "<= 10 %", verdict(growth, 10, at_most=True)))
    return out or [("RSS growth after warm-up", "-", "<= 10 %", "not measured")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--git", default=common.git_rev(),
        help="commit(s) whose result rows are read (prefixes, comma-separated; latest row wins)",
    )  # fmt: skip
    p.add_argument("--warmup", type=float, default=120.0, help="soak seconds before RSS is compared")
    a = p.parse_args()
    table = engine(a.git) + e2e(a.git) + latency(a.git) + soak(a.git, a.warmup)
    print(f"issue 15 targets at {a.git}:\n")
    print("| target | measured | goal | verdict |\n| --- | --- | --- | --- |")
    for row in table:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
