#!/usr/bin/env python3
"""Part 4 (soak): the sidecar at a steady rate with call timeouts expiring, under a memory bound.

The traffic (bench/rate_producer.py) spreads over many conversations, so a conversation is revisited
only every `conversations / rate` seconds, far past the short `--call-timeout`: most calls time out
(orphan_call timeout) and their late results become orphans too, while the held-bytes limit is
the binding bound. Every `--sample` seconds the sidecar's RSS (/proc) and its
`stream_pairer_held_bytes` gauge are recorded. Reported: held bytes against the configured bound
(must stay within 10 %), RSS over time, and the RSS slope over the second half (creep).

    python bench/soak.py --duration 600                      # the full 10-minute soak
    python bench/soak.py --duration 120 --rate 2000          # a short one
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import kafkabench as kb
from latency import scrape, wait_ready

PY = sys.executable


def gauge(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def slope_mib_per_min(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of RSS over time."""
    n = len(samples)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in samples) / n
    mr = sum(r for _, r in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    cov = sum((t - mt) * (r - mr) for t, r in samples)
    return (cov / var) * 60 / 2**20 if var else 0.0


def rss_per_minute(samples: list[tuple[float, int]]) -> list[int]:
    """RSS (MiB) of the first sample at or after each whole minute."""
    out: list[int] = []
    for t, r in samples:
        if t >= 60 * (len(out) + 1):
            out.append(r >> 20)
    return out


def orphans_by_reason(text: str) -> dict[str, float]:
    """Bounding the closed ids trades late_result / duplicate_result diagnoses for no_call ones once
    an id is forgotten; these counts make that trade visible."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("stream_pairer_orphans_total{"):
            labels, value = line.rsplit(" ", 1)
            kind = labels.split('kind="', 1)[1].split('"', 1)[0]
            reason = labels.split('reason="', 1)[1].split('"', 1)[0]
            if float(value):
                out[f"{kind}:{reason}"] = float(value)
    return out


def sidecar_cmd(args: argparse.Namespace, b: str, topic: str, trace: Path) -> list[str]:
    """The sidecar's command line; under tracemalloc (bench/traced_run.py) with --trace."""
    runner = (
        ["stream-pairer"]
        if args.trace is None
        else [PY, "bench/traced_run.py", "--every", str(args.trace), "--baseline",
              str(args.trace_baseline), "--out", str(trace), *shlex.split(args.trace_args), "--"]
    )  # fmt: skip
    cmd = [
        *runner,
        "run",
        "--bootstrap-servers",
        b,
        "--input-topic",
        topic,
        "--group-id",
        f"soak-{uuid.uuid4().hex[:6]}",
        "--http-port",
        str(args.http_port),
        "--log-level",
        "WARNING",
        "--call-timeout",
        str(args.call_timeout),
        "--result-grace",
        "5",
        "--max-held-bytes",
        str(args.max_held_bytes),
        "--max-conversations",
        str(args.max_conversations),
    ]
    if args.exactly_once:
        cmd.append("--exactly-once")
    return cmd


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers")
    p.add_argument("--duration", type=float, default=600.0, help="seconds of steady traffic")
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--conversations", type=int, default=100_000)
    p.add_argument("--call-timeout", type=float, default=20.0, help="seconds (event time)")
    p.add_argument("--max-held-bytes", type=int, default=16 * 2**20)
    p.add_argument("--max-conversations", type=int, default=100_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--sample", type=float, default=5.0)
    p.add_argument("--exactly-once", action="store_true")
    p.add_argument("--http-port", type=int, default=19490)
    p.add_argument(
        "--trace", type=float, metavar="SECONDS",
        help="run the sidecar under tracemalloc (bench/traced_run.py), a sample every SECONDS, the "
        "baseline after --trace-baseline seconds; written to bench data dir <topic>.trace.txt",
    )  # fmt: skip
    p.add_argument("--trace-baseline", type=float, default=120.0)
    p.add_argument(
        "--warmup", type=float, default=120.0,
        help="seconds excluded from the growth figure (RSS at the end against RSS at this time): "
        "state fills until its bounds are reached (see BENCHMARKS.md, RSS creep)",
    )  # fmt: skip
    p.add_argument(
        "--trace-args", default="--gc-probe",
        help="more bench/traced_run.py options, e.g. '--frames 5 --gc-probe'",
    )  # fmt: skip
    return p.parse_args()


def main() -> int:
    args = parse_args()
    broker = kb.Broker(args.bootstrap_servers)
    b = broker.bootstrap
    topic = f"bench-soak-{uuid.uuid4().hex[:6]}"
    kb.create_topics(
        b, [topic, f"{topic}.pairs", f"{topic}.orphans", f"{topic}.dead-letter"], args.partitions
    )
    trace = kb.DATA_DIR / f"{topic}.trace.txt"
    log = kb.DATA_DIR / f"{topic}.log"
    side = kb.spawn(sidecar_cmd(args, b, topic, trace), log)
    samples: list[dict[str, Any]] = []
    try:
        wait_ready(args.http_port)
        prod = kb.spawn(
            [
                PY,
                "bench/rate_producer.py",
                "--bootstrap-servers",
                b,
                "--topic",
                topic,
                "--rate",
                str(args.rate),
                "--duration",
                str(args.duration),
                "--conversations",
                str(args.conversations),
            ],
            log,
        )
        t0 = time.monotonic()
        print(
            f"soak: {args.rate}/s for {args.duration:.0f}s over {args.conversations:,} conversations, "
            f"call timeout {args.call_timeout}s, max held bytes {args.max_held_bytes / 2**20:.0f} MiB; "
            f"load {common.loadavg()}" + (f"; tracemalloc samples in {trace}" if args.trace else ""),
            flush=True,
        )
        while prod.poll() is None:
            time.sleep(args.sample)
            text = scrape(args.http_port)
            s = {
                "t": round(time.monotonic() - t0, 1),
                "rss": common.rss_bytes(side.pid),
                "held_bytes": gauge(text, "stream_pairer_held_bytes"),
                "open_calls": gauge(text, "stream_pairer_open_calls"),
                "open_conversations": gauge(text, "stream_pairer_open_conversations"),
                "load": common.loadavg(),
            }
            samples.append(s)
            if len(samples) % max(1, int(60 / args.sample)) == 0:
                print(
                    f"  t={s['t']:.0f}s RSS {s['rss'] / 2**20:.0f} MiB, "
                    f"held {(s['held_bytes'] or 0) / 2**20:.1f} MiB, open calls {s['open_calls']}, "
                    f"conversations {s['open_conversations']}; "
                    f"load {s['load']}",
                    flush=True,
                )
        final_metrics = scrape(args.http_port)
    finally:
        kb.stop([side])
    bound = args.max_held_bytes
    held = [s["held_bytes"] or 0 for s in samples]
    rss = [(s["t"], s["rss"]) for s in samples]
    half = [x for x in rss if x[0] >= rss[-1][0] / 2] if rss else []
    evicted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in final_metrics.splitlines()
        if line.startswith("stream_pairer_evictions_total")
    )
    timeouts = sum(
        float(line.rsplit(" ", 1)[1])
        for line in final_metrics.splitlines()
        if line.startswith("stream_pairer_orphans_total") and 'reason="timeout"' in line
    )
    per_minute = rss_per_minute(rss)
    at_warmup = next((r for t, r in rss if t >= args.warmup), None)
    growth = (rss[-1][1] / at_warmup - 1) if rss and at_warmup else None
    row = {
        "partitions": args.partitions,
        "rss_per_minute_mib": per_minute,
        "warmup_s": args.warmup,
        "rss_growth_after_warmup": round(growth, 4) if growth is not None else None,
        "duration_s": args.duration,
        "rate": args.rate,
        "conversations": args.conversations,
        "call_timeout_s": args.call_timeout,
        "max_held_bytes": bound,
        "held_max_mib": round(max(held) / 2**20, 2) if held else None,
        "held_max_over_bound": round(max(held) / bound, 3) if held else None,
        "rss_first_mib": round(rss[0][1] / 2**20) if rss else None,
        "rss_mid_mib": round(rss[len(rss) // 2][1] / 2**20) if rss else None,
        "rss_last_mib": round(rss[-1][1] / 2**20) if rss else None,
        "rss_max_mib": round(max(r for _, r in rss) / 2**20) if rss else None,
        "rss_slope_second_half_mib_per_min": round(slope_mib_per_min(half), 2),
        "evictions": evicted,
        "timeout_orphans": timeouts,
        "orphans_by_reason": orphans_by_reason(final_metrics),
        "exactly_once": args.exactly_once,
        "traced": args.trace is not None,
        "samples": samples,
        "kafka": broker.version,
    }
    common.record("soak", row)
    print(
        f"soak result: held bytes max {row['held_max_mib']} MiB = {row['held_max_over_bound']} of the bound; "
        f"RSS first/mid/last/max {row['rss_first_mib']}/{row['rss_mid_mib']}/{row['rss_last_mib']}/"
        f"{row['rss_max_mib']} MiB; RSS slope over the second half "
        f"{row['rss_slope_second_half_mib_per_min']} MiB/min; evictions {evicted:.0f}, "
        f"timeout orphans {timeouts:.0f}; load {common.loadavg()}\n"
        f"RSS per minute (MiB): {', '.join(map(str, per_minute))}; growth after the "
        f"{args.warmup:.0f} s warm-up: "
        + (f"{growth * 100:+.1f} %" if growth is not None else "n/a")
        + "\norphans by reason: "
        + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(row["orphans_by_reason"].items())),
        flush=True,
    )
    kb.delete_topics(b, topic)
    broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
