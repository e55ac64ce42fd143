"""Where the sidecar's latency goes, stage by stage: `stream_pairer_stage_seconds{stage}` (issue 25).

Why its own histogram: the end-to-end figures (arrival to acknowledgement, arrival to visible to
read_committed readers) mixed the harness's saturation with the sidecar's own linger, commit and
transaction intervals, so a latency target could not be traced to the setting that misses it. The
consume loop observes each stage of each fetch:

* `fetch_wait`: from the oldest record's timestamp (the producer's, or the broker's append time)
  to the fetch response being in hand: broker, network, `--poll-timeout` and the loop's own turn;
* `engine`: parsing and pairing one partition's records;
* `linger`: from the fetch to the moment its outputs are handed to the producer (the rest of the
  loop turn: other partitions, the tick);
* `produce`: handing the outputs to the client (`send`/`flush`, not waiting for the broker);
* `commit`: one commit, from its start in the loop to its outcome (at-least-once: the
  acknowledgements, the checkpoint and the offset commit; exactly-once: the whole transaction). It
  runs beside the loop (adapters/kafka/committer.py), so it no longer adds to the other stages.

bench/latency.py prints their quantiles beside the end-to-end ones.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Histogram

STAGES: Final = ("fetch_wait", "engine", "linger", "produce", "commit")
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class StageMetrics:
    """One histogram child per stage, resolved once (the loop observes several per fetch)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        hist = Histogram(
            "stream_pairer_stage_seconds",
            "Seconds spent per stage of the consume loop, per fetch (fetch_wait, engine, linger, "
            "produce) or per commit step (commit); see stream_pairer/ops/stages.py.",
            ["stage"],
            buckets=BUCKETS,
            registry=registry,
        )
        self._child = {stage: hist.labels(stage) for stage in STAGES}

    def observe(self, stage: str, seconds: float) -> None:
        self._child[stage].observe(max(seconds, 0.0))
