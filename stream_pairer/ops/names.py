"""The sample names a Prometheus registry exposes: what the dashboard and the rules may query.

Why apart from metrics.py: the dashboard and rule tests read the names of a registry without
building the sidecar's metrics, and metrics.py stays under the 600-line bound.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry


def metric_names(registry: CollectorRegistry) -> set[str]:
    """Every sample name a registry exposes, read from its collectors (what dashboards may query).

    Names come from the metric type, not from current samples, because a labelled family has no
    samples until its first child exists: counters expose `<name>_total` and `<name>_created`,
    histograms `_bucket`, `_sum`, `_count`, `_created`, gauges their bare name. A counter's bare
    family name is *not* a series, so it is deliberately absent.
    """
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    names: set[str] = set()
    for family in registry.collect():
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return names
