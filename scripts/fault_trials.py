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

The trials themselves are in scripts/trials/ (traffic, the shared harness, one module per fault
family); this script is the plan and the command, and re-exports the names the tests call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from kafka_broker import KafkaBroker  # noqa: E402 - path set just above
from trials.crash import (  # noqa: E402
    trial_broker_restart,
    trial_cluster,
    trial_kill,
    trial_overload,
    trial_rebalance,
)
from trials.harness import CALL_TIMEOUT_S, RESULT_GRACE_S, SETTLE_TIMEOUT_S, Context, TrialResult  # noqa: E402
from trials.produce_side import (  # noqa: E402
    trial_bad_lineage_header,
    trial_checkpoint_topic_wrong,
    trial_dead_letter_topic_deleted,
    trial_limit_lowered_before_first_commit,
    trial_long_ids,
    trial_repartition_big_record,
    trial_sigterm_broker_down,
    trial_small_output_limit,
)

__all__ = [
    "CALL_TIMEOUT_S",
    "LONG",
    "PRODUCE_SIDE",
    "RESULT_GRACE_S",
    "SETTLE_TIMEOUT_S",
    "SHARED_BROKER",
    "SHORT",
    "TRIALS",
    "Context",
    "TrialResult",
    "main",
    "run_trials",
    "table",
    "trial_bad_lineage_header",
    "trial_broker_restart",
    "trial_checkpoint_topic_wrong",
    "trial_cluster",
    "trial_dead_letter_topic_deleted",
    "trial_kill",
    "trial_limit_lowered_before_first_commit",
    "trial_long_ids",
    "trial_overload",
    "trial_rebalance",
    "trial_repartition_big_record",
    "trial_sigterm_broker_down",
    "trial_small_output_limit",
]


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
