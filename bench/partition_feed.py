"""A Kafka partition's feed (stream/partition.py) without a broker: the fetch in one call into the
compiled core (`feed_messages`) against record by record, CPU per record.

Why: the sidecar's own work per record, apart from the Kafka client's, is PartitionState.feed;
this isolates it (issue 23, item 4). Fetches of `--fetch` messages built from the bench data.

    python3 bench/partition_feed.py --records 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from common import loadavg, record  # type: ignore[import-not-found]
from datagen import generate  # type: ignore[import-not-found]
from prometheus_client import CollectorRegistry

from stream_pairer.core.config import TaggingConfig
from stream_pairer.core.native import NativePipeline
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.partition import OutputTopics, PartitionState
from tests.engine_helpers import Msg, OneByOne


def run(msgs: list[Msg], fetch: int, batched: bool, tagging: bool = False, metrics: bool = False) -> float:
    observer = Metrics(CollectorRegistry()) if metrics else None  # the sidecar's observer
    pipeline: Any = NativePipeline(
        routed=True, tagger=TaggingConfig() if tagging else None, observer=observer
    )
    if not batched:
        pipeline = OneByOne(pipeline)
    st = PartitionState("in", 0, pipeline, OutputTopics.for_input("in"), start_offset=0)
    t = time.process_time()
    for i in range(0, len(msgs), fetch):
        st.feed(msgs[i : i + fetch], 0.0)
    return (time.process_time() - t) / len(msgs) * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--fetch", type=int, default=500)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tagging", action="store_true", help="with the failure tagger (the sidecar's default)")
    p.add_argument("--metrics", action="store_true", help="with the Prometheus observer (as the sidecar)")
    a = p.parse_args()
    data = generate(a.conversations, a.records).all
    msgs = [Msg(i, key, value, 1_750_000_000_000 + i) for i, (key, value) in enumerate(data)]
    best = {True: float("inf"), False: float("inf")}
    for _ in range(a.repeat):
        for batched in (False, True):
            best[batched] = min(best[batched], run(msgs, a.fetch, batched, a.tagging, a.metrics))
    parts = ", tagging" * a.tagging + ", metrics" * a.metrics
    print(f"records: {len(msgs):,}, fetches of {a.fetch}{parts} (load {loadavg()}, best of {a.repeat})")
    print(f"PartitionState.feed, record by record: {best[False]:6.2f} us CPU/record")
    print(f"PartitionState.feed, one call a fetch: {best[True]:6.2f} us CPU/record")
    record(
        "partition_feed",
        {
            "records": len(msgs),
            "tagging": a.tagging,
            "metrics": a.metrics,
            "one_by_one_us": round(best[False], 3),
            "batched_us": round(best[True], 3),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
