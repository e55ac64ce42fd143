#!/usr/bin/env python3
"""Parts 2, 3 and 6: end to end through a real local Kafka broker, against the machine's ceilings.

Runners, each reading the same records from a fresh multi-partition input topic:
  kcat            kcat -C | kcat -P passthrough (librdkafka in C): the machine's ceiling
  aiokafka        consume -> produce -> commit passthrough in Python: the Python ceiling
  aiokafka-eos    the same with a transaction per batch
  aiokafka-1mib   the at-least-once passthrough with 1 MiB producer batches instead of aiokafka's 16 KiB
                  (the sidecar's own producer setting since kafka_io.MAX_BATCH_BYTES)
  aiokafka-eos-1mib  the exactly-once passthrough with 1 MiB producer batches
  aiokafka-batch  the at-least-once passthrough with create_batch/send_batch per output partition
                  (the client's fastest Python path: issue 15's reference for the sidecar)
  aiokafka-eos-batch  the same with a transaction per batch
  sidecar         stream-pairer run (at-least-once)
  sidecar-eos     stream-pairer run --exactly-once
  quix            the pairing job written in Quix Streams (bench/peers/quix_pairer.py)
  quix-eos        the same with processing_guarantee="exactly-once"

    python bench/e2e.py                                      # all runners, 1M records, 4 partitions
    python bench/e2e.py --records 200000 --runners kcat aiokafka sidecar
    python bench/e2e.py --scaling 1 2 4 --runners sidecar    # P partitions, P sidecar processes

Measurement: see kafkabench.py (broker append timestamps of the outputs; start-up excluded from the
steady rate, included in the wall rate). Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import kafkabench as kb

PY = sys.executable


@dataclass(slots=True)
class Plan:
    """What a runner needs started and what the harness must wait for."""

    cmds: list[list[str] | str]
    done_topic: str  # completion is judged on this topic's message count
    expected: int
    outputs: list[str] = field(default_factory=list)  # created up front with LogAppendTime
    env: dict[str, str] = field(default_factory=dict)


def sidecar_args(args: argparse.Namespace) -> list[str]:
    """Engine limits for the benchmark: room for every conversation of the data (so the run measures
    pairing, not eviction); the default 10-minute call timeout (event time) lets the 1 % unanswered
    calls expire during the run, as they would in production."""
    return [
        "--max-conversations",
        str(max(100_000, 2 * args.conversations)),
        "--max-held-bytes",
        str(2 * 2**30),
        *(["--max-records", str(args.sidecar_max_records)] if args.sidecar_max_records else []),
    ]


def plan_kcat(b: str, t: str, p: int, n: int, pairs: int, a: argparse.Namespace) -> Plan:  # noqa: PLR0917
    out = f"{t}.kcat"
    consume = (
        f"{kb.KCAT} -C -q -e -b {b} -t {t} -o beginning -f '%k\\t%s\\n' -X isolation.level=read_committed"
    )
    produce = f"{kb.KCAT} -P -q -b {b} -t {out} -K '\\t' -z none -X linger.ms=5 -X acks=all"
    return Plan([f"{consume} | {produce}"], out, n, [out])


def plan_aiokafka(eos: bool, batch_bytes: int = 16384, send_batch: bool = False) -> Callable[..., Plan]:
    def plan(b: str, t: str, p: int, n: int, pairs: int, a: argparse.Namespace) -> Plan:  # noqa: PLR0917
        out = f"{t}.passthrough"
        cmd = [
            PY,
            "bench/passthrough_aiokafka.py",
            "--bootstrap-servers",
            b,
            "--input-topic",
            t,
            "--output-topic",
            out,
            "--batch-bytes",
            str(batch_bytes),
            "--group",
            f"passthrough-{uuid.uuid4().hex[:6]}",
        ]
        if eos:
            cmd.append("--exactly-once")
        if send_batch:
            cmd.append("--send-batch")
        return Plan([cmd] * (a.processes or 1), out, n, [out])

    return plan


def plan_sidecar(eos: bool) -> Callable[..., Plan]:
    def plan(b: str, t: str, p: int, n: int, pairs: int, a: argparse.Namespace) -> Plan:  # noqa: PLR0917
        cmd = ["stream-pairer", "run", "--bootstrap-servers", b, "--input-topic", t, *sidecar_args(a)]
        if eos:
            cmd.append("--exactly-once")
        cmds: list[list[str] | str] = []
        group = f"bench-{uuid.uuid4().hex[:6]}"
        if a.profile:
            prof = kb.DATA_DIR / f"pyspy-{t}.raw"
            cmd = ["py-spy", "record", "--nonblocking", "-r", "100", "-f", "raw", "-o", str(prof), "--", *cmd]
            print(f"  profiling the sidecar with py-spy -> {prof}", flush=True)
        for i in range(a.processes or 1):
            port = str(a.metrics_port + i)
            cmds.append(
                [
                    *cmd,
                    "--group-id",
                    group,
                    "--http-port",
                    port,
                    "--instance-id",
                    f"bench{i}",
                    "--log-level",
                    "WARNING",
                ]
            )
        outs = [f"{t}.pairs", f"{t}.orphans", f"{t}.dead-letter"]
        return Plan(cmds, f"{t}.pairs", pairs, outs)

    return plan


def plan_quix(eos: bool) -> Callable[..., Plan]:
    def plan(b: str, t: str, p: int, n: int, pairs: int, a: argparse.Namespace) -> Plan:  # noqa: PLR0917
        cmd = [
            PY,
            "bench/peers/quix_pairer.py",
            "--bootstrap-servers",
            b,
            "--input-topic",
            t,
            "--state-dir",
            str(kb.DATA_DIR / f"quix-state-{uuid.uuid4().hex[:6]}"),
        ]
        outs = [f"{t}.quix-pairs", f"{t}.quix-orphans"]
        return Plan([cmd + (["--exactly-once"] if eos else [])], f"{t}.quix-pairs", pairs, outs)

    return plan


RUNNERS: dict[str, Callable[..., Plan]] = {
    "kcat": plan_kcat,
    "aiokafka": plan_aiokafka(False),
    "aiokafka-eos": plan_aiokafka(True),
    "aiokafka-1mib": plan_aiokafka(False, 1 << 20),
    "aiokafka-eos-1mib": plan_aiokafka(True, 1 << 20),
    # 1 MiB batches: the sidecar's producer setting, so the reference differs from it only in work
    "aiokafka-batch": plan_aiokafka(False, 1 << 20, send_batch=True),
    "aiokafka-eos-batch": plan_aiokafka(True, 1 << 20, send_batch=True),
    "sidecar": plan_sidecar(False),
    "sidecar-eos": plan_sidecar(True),
    "quix": plan_quix(False),
    "quix-eos": plan_quix(True),
}


def cpu_seconds(procs: list[Any]) -> float:
    """CPU time (user + system) used so far by the runner processes and their descendants, read
    from /proc before they are stopped: less sensitive to the shared machine's load than rates.
    It includes start-up (imports, group join), which the steady rate leaves out."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    todo = [p.pid for p in procs]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime, stime, cutime, cstime (stat fields 14-17): live children are read below, the
        # children already reaped are in cutime/cstime.
        total += sum(int(x) for x in fields[11:15])
        todo.extend(kb._children(pid))
    return total / tick


def run_one(
    broker: kb.Broker, name: str, data: kb.DataFile, partitions: int, args: argparse.Namespace
) -> dict[str, Any]:
    b = broker.bootstrap
    topic = f"bench-{name}-p{partitions}-{uuid.uuid4().hex[:6]}"
    kb.create_topics(b, [topic], partitions)
    load_s = kb.load(b, topic, data)
    plan = RUNNERS[name](b, topic, partitions, data.records, data.expected_pairs, args)
    kb.create_topics(b, plan.outputs, partitions)
    log = kb.DATA_DIR / f"{topic}.log"
    load_before = common.loadavg()
    t_start = time.time()
    procs = [kb.spawn(c, log, plan.env) for c in plan.cmds]
    ok = kb.wait_outputs(b, None, plan.done_topic, plan.expected, args.timeout, procs=procs)
    cpu_s = cpu_seconds(procs)
    load_after = common.loadavg()
    kb.stop(procs)
    m = kb.measure(b, plan.done_topic, t_start, data.records)
    row = {
        "runner": name,
        "records": data.records,
        "conversations": data.conversations,
        "partitions": partitions,
        "processes": len(plan.cmds),
        "expected_outputs": plan.expected,
        "complete": ok and m.get("outputs", 0) >= plan.expected,
        **m,
        "load_s": round(load_s, 1),
        "runner_cpu_s": round(cpu_s, 2),
        "runner_cpu_us_per_record": round(1e6 * cpu_s / data.records, 1),
        "load_before": load_before,
        "load_after": load_after,
        "kafka": broker.version,
        "log": str(log),
    }
    if name.startswith(("sidecar", "quix")):
        for extra in plan.outputs[1:]:
            row[f"n_{extra.rsplit('.', 1)[1]}"] = len(kb.read_back(b, extra))
    common.record("e2e", row)
    status = "" if row["complete"] else f"  INCOMPLETE: {m.get('outputs')} of {plan.expected} (see {log})"
    print(
        f"{name:13s} P={partitions} procs={len(plan.cmds)}: "
        f"steady {common.fmt_rate(m.get('steady_records_per_s', 0))} "
        f"records/s, wall {common.fmt_rate(m.get('wall_records_per_s', 0))} records/s "
        f"(outputs {m.get('outputs')}, span {m.get('span_s')}s, first output after "
        f"{m.get('first_output_after_s')}s); runner CPU {cpu_s:.1f} s = "
        f"{row['runner_cpu_us_per_record']} us/record; load {load_before} -> {load_after}{status}",
        flush=True,
    )
    if not args.keep_topics:
        kb.delete_topics(b, topic)
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    p.add_argument("--records", type=int, default=1_000_000, help="records (after warm-up) to generate")
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--runners", nargs="+", default=list(RUNNERS), choices=list(RUNNERS))
    p.add_argument("--scaling", type=int, nargs="+", help="partition counts; P runner processes each")
    p.add_argument(
        "--single-process", action="store_true", help="with --scaling: one runner process whatever P"
    )
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument(
        "--sidecar-max-records", type=int, help="the sidecar's --max-records (default: its own default)"
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for one run's outputs")
    p.add_argument("--metrics-port", type=int, default=19400)
    p.add_argument("--keep-topics", action="store_true")
    p.add_argument("--profile", action="store_true", help="run the sidecar under py-spy (raw stacks)")
    args = p.parse_args()
    args.processes = 1
    print(f"machine: {common.machine()}; load {common.loadavg()}", flush=True)
    data = kb.data_file(args.conversations, args.records)
    print(f"data: {data.describe}", flush=True)
    broker = kb.Broker(args.bootstrap_servers)
    rows: list[dict[str, Any]] = []
    try:
        if args.scaling:
            for parts in args.scaling:
                args.processes = 1 if args.single_process else parts
                for name in args.runners:
                    for _ in range(args.repeat):
                        rows.append(run_one(broker, name, data, parts, args))
        else:
            for _ in range(args.repeat):
                for name in args.runners:
                    rows.append(run_one(broker, name, data, args.partitions, args))
    finally:
        broker.close()
    summary(rows)
    return 0


def summary(rows: list[dict[str, Any]]) -> None:
    best: dict[tuple[str, int], float] = {}
    for r in rows:
        key = (r["runner"], r["partitions"])
        best[key] = max(best.get(key, 0.0), float(r.get("steady_records_per_s") or 0))
    print("\nsteady records/s (best of runs) and ratios:")
    for (name, parts), rate in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ratios = []
        eos = name.endswith("-eos") or name.endswith("-eos-1mib")
        refs = (
            ("aiokafka-eos", "aiokafka-eos-1mib", "aiokafka-eos-batch")
            if eos
            else ("aiokafka", "aiokafka-1mib", "aiokafka-batch")
        )
        for ref in (*refs, "kcat"):
            base = best.get((ref, parts))
            if base and name != ref:
                ratios.append(f"{rate / base:.2f} of {ref}")
        print(f"  P={parts} {name:17s} {common.fmt_rate(rate):>10s}  {', '.join(ratios)}")
    targets(best)


# Issue 15's end-to-end targets: (what, numerator runner, denominator runner, at least).
TARGETS = (
    ("sidecar / aiokafka send_batch passthrough, at-least-once", "sidecar", "aiokafka-batch", 0.5),
    ("sidecar-eos / sidecar (exactly-once vs at-least-once)", "sidecar-eos", "sidecar", 0.7),
    ("sidecar / Quix Streams peer, at-least-once", "sidecar", "quix", 3.0),
    ("sidecar-eos / Quix Streams peer, exactly-once", "sidecar-eos", "quix-eos", 3.0),
)


def targets(best: dict[tuple[str, int], float]) -> None:
    """The issue's ratios, each from rates of this one run (a missing runner: not measured)."""
    print("\nissue 15 targets (ratios of steady rates in this run):")
    for parts in sorted({p for _, p in best}):
        for what, num, den, goal in TARGETS:
            a, b = best.get((num, parts)), best.get((den, parts))
            if not a or not b:
                continue
            ratio = a / b
            verdict = "met" if ratio >= goal else f"MISSED by {goal - ratio:.2f}"
            print(f"  P={parts} {what}: {ratio:.2f} (target >= {goal}) {verdict}")


if __name__ == "__main__":
    sys.exit(main())
