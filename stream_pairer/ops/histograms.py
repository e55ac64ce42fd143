"""Histogram observations in bulk for the sidecar's metrics (ops/metrics.py).

Why: the sidecar observes a batch of latencies at a time; prometheus_client's `observe` takes a
lock per observation. This adds a batch with one add per bucket touched, through the histogram's
own value slots, checked at import so that a prometheus_client that changed them fails at start.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from prometheus_client import Histogram


def observe_many(hist: Histogram, values: Iterable[float], weight: int = 1) -> None:
    """`hist.observe(v)` for each value (`weight` times each), with one add per bucket touched and
    one add to the sum, instead of a locked add per observation. Same bucket rule as `observe`
    (the first bucket whose upper bound is >= the value; NaN counts in the sum and in no bucket).
    Uses the histogram's value slots (prometheus_client's `_upper_bounds`, `_buckets`, `_sum`,
    checked when Metrics is built), as `observe` itself does."""
    bounds = hist._upper_bounds
    counts = [0] * len(bounds)
    total = 0.0
    n = 0
    for v in values:
        total += v
        n += 1
        if v == v:  # noqa: PLR0124 - NaN is in no bucket
            counts[bisect_left(bounds, v)] += weight
    if n == 0:
        return
    hist._sum.inc(total * weight)
    buckets = hist._buckets
    for i, c in enumerate(counts):
        if c:
            buckets[i].inc(c)


def _check_histogram_slots() -> None:
    """Fail at import, not on the first delivered batch, if prometheus_client changed its internals."""
    probe = Histogram("stream_pairer_slots_probe_seconds", "probe", registry=None)
    if not all(hasattr(probe, a) for a in ("_upper_bounds", "_buckets", "_sum")):
        raise RuntimeError("this prometheus_client's Histogram lacks the slots observe_many uses")


_check_histogram_slots()
