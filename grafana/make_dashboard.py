"""Build the stream-pairer Grafana dashboard JSON.

The dashboard is generated rather than hand-edited so that every panel uses the same label
selector and data source variable, and so that the orphan-rate threshold comes from one constant
that must equal the StreamPairerOrphanRateHigh alert (tests/ops/test_dashboard.py checks both, and
that the committed JSON is exactly this script's output):

    python grafana/make_dashboard.py > grafana/dashboards/stream-pairer.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

SEL = 'namespace=~"$namespace", job=~"$job", instance=~"$instance"'
DS = {"type": "prometheus", "uid": "${datasource}"}
# = the StreamPairerOrphanRateHigh threshold where the baseline is ~0: its factor (5) x the baseline
# floor (0.005) in deploy/prometheus/stream-pairer-rules.yml
ORPHAN_RATIO_HIGH = 0.025
NOT_CONSUMING_SECONDS = 300  # = the StreamPairerNotConsuming threshold
OR_KIND = 'kind="orphan_result"'
ORPHAN_NUM = 'kind="orphan_result", reason!~"shutdown|rebalance|end_of_input"'
FIFO_MATCH = 'match="fifo"'
GREEN = [{"color": "green", "value": None}]

Panel = dict[str, Any]
Targets = list[tuple[str, str]]


class Builder:
    """Lays panels out top to bottom on Grafana's 24-column grid, numbering them."""

    def __init__(self) -> None:
        self.panels: list[Panel] = []
        self.y = 0

    def _add(self, panel: Panel) -> None:
        panel["id"] = len(self.panels) + 1
        self.panels.append(panel)

    def row(self, title: str) -> None:
        grid = {"h": 1, "w": 24, "x": 0, "y": self.y}
        self._add({"type": "row", "title": title, "collapsed": False, "gridPos": grid, "panels": []})
        self.y += 1

    def next_line(self, height: int) -> None:
        self.y += height

    def timeseries(
        self,
        title: str,
        desc: str,
        targets: Targets,
        x: int,
        *,
        w: int = 12,
        h: int = 8,
        unit: str = "short",
        stack: bool = False,
        thresholds: list[dict[str, Any]] | None = None,
        overrides: list[dict[str, Any]] | None = None,
    ) -> None:
        custom: dict[str, Any] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
            "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        }
        if thresholds:
            custom["thresholdsStyle"] = {"mode": "line+area"}
        defaults = {
            "unit": unit,
            "min": 0,
            "custom": custom,
            "thresholds": {"mode": "absolute", "steps": thresholds or GREEN},
        }
        self._add(
            {
                "type": "timeseries",
                "title": title,
                "description": desc,
                "datasource": DS,
                "gridPos": {"h": h, "w": w, "x": x, "y": self.y},
                "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
                "options": {
                    "legend": {
                        "displayMode": "table",
                        "placement": "bottom",
                        "showLegend": True,
                        "calcs": ["mean", "max", "lastNotNull"],
                    },
                    "tooltip": {"mode": "multi", "sort": "desc"},
                },
                "targets": [_target(e, legend, i) for i, (e, legend) in enumerate(targets)],
            }
        )

    def stat(
        self,
        title: str,
        desc: str,
        expr: str,
        x: int,
        *,
        unit: str = "short",
        steps: list[dict[str, Any]] | None = None,
    ) -> None:
        self._add(
            {
                "type": "stat",
                "title": title,
                "description": desc,
                "datasource": DS,
                "gridPos": {"h": 4, "w": 4, "x": x, "y": self.y},
                "fieldConfig": {
                    "defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps or GREEN}},
                    "overrides": [],
                },
                "options": {
                    "colorMode": "value",
                    "graphMode": "area",
                    "justifyMode": "auto",
                    "textMode": "auto",
                    "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                },
                "targets": [_target(expr, "", 0, instant=True)],
            }
        )

    def table(self, title: str, desc: str, expr: str, x: int, *, unit: str = "short") -> None:
        self._add(
            {
                "type": "table",
                "title": title,
                "description": desc,
                "datasource": DS,
                "gridPos": {"h": 8, "w": 12, "x": x, "y": self.y},
                "fieldConfig": {
                    "defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": GREEN}},
                    "overrides": [],
                },
                "options": {"showHeader": True, "sortBy": [{"displayName": "Value", "desc": True}]},
                "transformations": [{"id": "organize", "options": {"excludeByName": {"Time": True}}}],
                "targets": [_target(expr, "", 0, instant=True, fmt="table")],
            }
        )


def _target(expr: str, legend: str, i: int, *, instant: bool = False, fmt: str | None = None) -> Panel:
    t: Panel = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(65 + i)}
    if instant:
        t["instant"] = True
        t["range"] = False
    else:
        t["range"] = True
    if fmt:
        t["format"] = fmt
    return t


def sel(metric: str, extra: str = "") -> str:
    return f"{metric}{{{extra + ', ' if extra else ''}{SEL}}}"


def rate(metric: str, extra: str = "", window: str = "$__rate_interval", fn: str = "rate") -> str:
    return f"{fn}({sel(metric, extra)}[{window}])"


def orphan_ratio(window: str) -> str:
    """The recording rule's ratio, for the selected namespace/job/instance."""
    return (
        f"sum({rate('stream_pairer_orphans_total', ORPHAN_NUM, window)})\n/\n"
        f"(sum({rate('stream_pairer_pairs_total', '', window)})"
        f" + sum({rate('stream_pairer_orphans_total', OR_KIND, window)}))"
    )


def orphan_threshold(factor: float) -> str:
    """An orphan alert's threshold: `factor` x the baseline (the day before the last hour, the
    rules' floor at least), as namespace_job:stream_pairer_orphan_results:ratio_baseline has it."""
    day = orphan_ratio("1d").replace("[1d])", "[1d] offset 1h)")
    return f"{factor:g} * clamp_min(({day}), {ORPHAN_RATIO_HIGH / 5:g})"


def quantiles(metric: str) -> Targets:
    return [
        (f"histogram_quantile({q}, sum by (le) ({rate(metric)}))", f"p{round(q * 100)}")
        for q in (0.5, 0.9, 0.99)
    ]


def build_panels() -> list[Panel]:
    b = Builder()
    b.row("Overview")
    results_5m = (
        f"sum({rate('stream_pairer_pairs_total', window='5m')})"
        f" + sum({rate('stream_pairer_orphans_total', OR_KIND, '5m')})"
    )
    b.stat(
        "Results / s",
        "Tool results reaching an output (pairs + orphan results).",
        results_5m,
        0,
        unit="reqps",
    )
    b.stat(
        "Orphan result rate (3m)",
        "Orphan results (reason not shutdown, rebalance or end_of_input) / results over the page "
        "alert's long window. Red at the StreamPairerOrphanRateHigh threshold where the baseline is ~0.",
        orphan_ratio("3m"),
        4,
        unit="percentunit",
        steps=[*GREEN, {"color": "red", "value": ORPHAN_RATIO_HIGH}],
    )
    b.stat(
        "FIFO share (1h)",
        "Pairs matched by FIFO instead of by id.",
        f"sum({rate('stream_pairer_pairs_total', FIFO_MATCH, '1h')})"
        f" / sum({rate('stream_pairer_pairs_total', window='1h')})",
        8,
        unit="percentunit",
    )
    b.stat(
        "Dead letters / s",
        "Input records that could not be read.",
        f"sum({rate('stream_pairer_dead_letters_total', window='5m')})",
        12,
        unit="reqps",
        steps=[*GREEN, {"color": "orange", "value": 0.01}],
    )
    b.stat(
        "Ready instances",
        "Instances reporting ready (stream_pairer_up == 1).",
        f"sum({sel('stream_pairer_up')})",
        16,
    )
    b.stat(
        "Unprocessed messages",
        "Messages not yet read and paired (high watermark minus the next offset to process), all "
        "partitions: ~0 when caught up. StreamPairerConsumerLagGrowing and NotConsuming use it.",
        f"sum({sel('stream_pairer_unprocessed_messages')})",
        20,
    )
    b.next_line(4)

    b.row("Throughput")
    b.timeseries(
        "Events read",
        "Tool events read per second by format and event type, and readable records without tool events.",
        [
            (f"sum by (format, type) ({rate('stream_pairer_events_read_total')})", "{{format}} {{type}}"),
            (f"sum({rate('stream_pairer_records_skipped_total')})", "records without tool events"),
        ],
        0,
        unit="reqps",
    )
    b.timeseries(
        "Output records",
        "Records emitted per second: pairs, orphans by kind, dead letters.",
        [
            (f"sum({rate('stream_pairer_pairs_total')})", "pairs"),
            (f"sum by (kind) ({rate('stream_pairer_orphans_total')})", "{{kind}}"),
            (f"sum({rate('stream_pairer_dead_letters_total')})", "dead letters"),
        ],
        12,
        unit="reqps",
    )
    b.next_line(8)

    b.row("Matching and orphans")
    b.timeseries(
        "Match types",
        "Pairs per second by how they were matched. FIFO is a fallback rule, not evidence: "
        "its share rising means ids are disappearing from producers.",
        [(f"sum by (match, fifo_by) ({rate('stream_pairer_pairs_total')})", "{{match}} {{fifo_by}}")],
        0,
        unit="reqps",
        stack=True,
    )
    b.timeseries(
        "Orphan result rate",
        "Orphan results (reason not shutdown, rebalance or end_of_input) over all results, over the "
        "windows of the burn-rate alerts: 3m for StreamPairerOrphanRateHigh (page), 30m for "
        "StreamPairerOrphanRateRising (warning). The dashed series are their thresholds (5x and 1.5x "
        "the baseline: the day before the last hour, 0.5 % at least); the red line is the page "
        "threshold where the baseline is ~0.",
        [
            (orphan_ratio("3m"), "orphan result rate (3m)"),
            (orphan_ratio("30m"), "last 30 minutes"),
            (orphan_threshold(5), "page threshold (5x baseline)"),
            (orphan_threshold(1.5), "warning threshold (1.5x baseline)"),
        ],
        12,
        unit="percentunit",
        thresholds=[*GREEN, {"color": "red", "value": ORPHAN_RATIO_HIGH}],
        overrides=[
            {
                "matcher": {"id": "byName", "options": name},
                "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
            }
            for name in ("page threshold (5x baseline)", "warning threshold (1.5x baseline)")
        ],
    )
    b.next_line(8)
    b.timeseries(
        "Orphans by kind and reason",
        "Orphan records per second. orphan_result/no_call: a result without a call; "
        "orphan_call/timeout: a call that never got its result; evicted: a state limit was reached.",
        [(f"sum by (kind, reason) ({rate('stream_pairer_orphans_total')})", "{{kind}} {{reason}}")],
        0,
        unit="reqps",
        stack=True,
    )
    b.timeseries(
        "Dead letters by reason",
        "Unreadable input records per second, by reason code.",
        [(f"sum by (reason) ({rate('stream_pairer_dead_letters_total')})", "{{reason}}")],
        12,
        unit="reqps",
        stack=True,
    )
    b.next_line(8)

    b.row("State and limits")
    b.timeseries(
        "Open conversations vs limit",
        "Conversations held (summed over the instance's partitions) against the limit times its "
        "assigned partitions (the limit applies per partition); past it the least recently used "
        "conversation's open events are evicted as orphans.",
        [
            (f"sum by (instance) ({sel('stream_pairer_open_conversations')})", "{{instance}} open"),
            (f"max by (instance) ({sel('stream_pairer_open_conversations_limit')})", "{{instance}} limit"),
        ],
        0,
        w=8,
    )
    b.timeseries(
        "Held bytes (estimated memory) vs limit",
        "Estimated memory held by open calls and pending results (~5x their raw size), summed over "
        "the instance's partitions, against the limit times its assigned partitions (the limit "
        "applies per partition).",
        [
            (f"sum by (instance) ({sel('stream_pairer_held_bytes')})", "{{instance}} held"),
            (f"max by (instance) ({sel('stream_pairer_held_bytes_limit')})", "{{instance}} limit"),
        ],
        8,
        w=8,
        unit="bytes",
    )
    b.timeseries(
        "Open calls, pending results, evictions",
        "Open calls and results waiting for a late call (gauges), the per-conversation call limit, "
        "and evictions per second by limit.",
        [
            (f"sum by (instance) ({sel('stream_pairer_open_calls')})", "{{instance}} open calls"),
            (f"sum by (instance) ({sel('stream_pairer_pending_results')})", "{{instance}} pending results"),
            (
                f"max by (instance) ({sel('stream_pairer_calls_per_conversation_limit')})",
                "{{instance}} calls/conversation limit",
            ),
            (f"sum by (limit) ({rate('stream_pairer_evictions_total')})", "evictions/s ({{limit}})"),
        ],
        16,
        w=8,
    )
    b.next_line(8)

    b.row("Latency")
    b.timeseries(
        "Tool latency (event time)",
        "Call timestamp to result timestamp of paired calls, over all tools.",
        [
            *quantiles("stream_pairer_tool_latency_seconds_bucket"),
            (
                f"sum({rate('stream_pairer_tool_latency_seconds_sum')})"
                f" / sum({rate('stream_pairer_tool_latency_seconds_count')})",
                "mean",
            ),
        ],
        0,
        w=8,
        unit="s",
    )
    b.timeseries(
        "Emit latency (wall time)",
        "From a result's arrival to the commit that made its output durable (includes the wait "
        "for the next commit, --commit-interval).",
        quantiles("stream_pairer_emit_latency_seconds_bucket"),
        8,
        w=8,
        unit="s",
    )
    b.timeseries(
        "Clock skew",
        "Pairs per second whose result is timestamped before its call (kept out of the latency histogram).",
        [(f"sum by (instance) ({rate('stream_pairer_tool_latency_negative_total')})", "{{instance}}")],
        16,
        w=8,
        unit="reqps",
    )
    b.next_line(8)

    b.row("Kafka")
    b.timeseries(
        "Consumer lag by partition",
        "Two lags per partition. unprocessed: high watermark minus the next offset to process (what "
        "is left to pair; the alerts use it). committed: high watermark minus the group's committed "
        "offset, which Burrow and kafka_exporter show: calls held for their results pin it, so it "
        "stays up on a caught-up sidecar by what the held window spans (README, Two lags).",
        [
            (
                f"sum by (topic, partition) ({sel('stream_pairer_unprocessed_messages')})",
                "unprocessed {{topic}}/{{partition}}",
            ),
            (
                f"sum by (topic, partition) ({sel('stream_pairer_consumer_lag_messages')})",
                "committed {{topic}}/{{partition}}",
            ),
        ],
        0,
        w=8,
    )
    b.timeseries(
        "Assigned partitions and rebalances",
        "Partitions each instance owns, and rebalances it saw per rate interval.",
        [
            (f"sum by (instance) ({sel('stream_pairer_assigned_partitions')})", "{{instance}} partitions"),
            (
                f"sum by (instance) ({rate('stream_pairer_rebalances_total', fn='increase')})",
                "{{instance}} rebalances",
            ),
        ],
        8,
        w=8,
    )
    b.timeseries(
        "Commit and produce errors",
        "Failed offset commits and failed produces per second.",
        [
            (f"sum by (instance) ({rate('stream_pairer_commit_errors_total')})", "{{instance}} commit"),
            (f"sum by (instance) ({rate('stream_pairer_produce_errors_total')})", "{{instance}} produce"),
        ],
        16,
        w=8,
        unit="reqps",
    )
    b.next_line(8)
    b.timeseries(
        "Seconds since last consumed",
        "Wall time since each instance last consumed input; StreamPairerNotConsuming fires above the "
        "red line while the instance has lag.",
        [
            (
                f"time() - max by (instance) ({sel('stream_pairer_last_consumed_timestamp_seconds')})",
                "{{instance}}",
            )
        ],
        0,
        unit="s",
        thresholds=[*GREEN, {"color": "red", "value": NOT_CONSUMING_SECONDS}],
    )
    b.timeseries(
        "Ready",
        "1 while an instance is ready (what /readyz reports).",
        [(f"max by (instance) ({sel('stream_pairer_up')})", "{{instance}}")],
        12,
    )
    b.next_line(8)

    b.row("Failure points")
    b.timeseries(
        "Failure points",
        "Calls tagged with the point where they went wrong: argument_construction, execution, "
        "result_interpretation, termination, tool_selection.",
        [(f"sum by (point) ({rate('stream_pairer_tool_failures_total')})", "{{point}}")],
        0,
        unit="reqps",
        stack=True,
    )
    b.timeseries(
        "Outcomes",
        "Tool results by outcome: ok, empty, error.",
        [(f"sum by (outcome) ({rate('stream_pairer_tool_outcomes_total')})", "{{outcome}}")],
        12,
        unit="reqps",
        stack=True,
    )
    b.next_line(8)
    in_range = {"window": "$__range", "fn": "increase"}
    b.table(
        "Failure points in range: share of calls",
        "Failures per point over the dashboard time range, divided by all calls that ended in the range.",
        f"sum by (point) ({rate('stream_pairer_tool_failures_total', **in_range)})\n"
        f"/ scalar(sum({rate('stream_pairer_tool_calls_total', **in_range)}))",
        0,
        unit="percentunit",
    )
    b.table(
        "Top tools by failure point in range",
        "The twenty (tool, point) combinations with most failures over the time range. "
        "tool=other folds the names past the label cap; tool=unknown is a call without a name.",
        f"topk(20, sum by (tool, point) ({rate('stream_pairer_tool_failures_total', **in_range)}))",
        12,
    )
    return b.panels


def _variable(name: str, label: str, query: str) -> Panel:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "refresh": 2,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "hide": 0,
        "options": [],
        "regex": "",
    }


def build() -> Panel:
    datasource_var = {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }
    return {
        "id": None,
        "uid": "stream-pairer",
        "title": "stream-pairer",
        "description": "Tool call / result pairing: throughput, match types, orphan rate against its alert "
        "threshold, state vs limits, latency, Kafka lag, failure points.",
        "tags": ["stream-pairer", "kafka", "ai-tools"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {
            "list": [
                datasource_var,
                _variable("namespace", "Namespace", "label_values(stream_pairer_build_info, namespace)"),
                _variable(
                    "job", "Job", 'label_values(stream_pairer_build_info{namespace=~"$namespace"}, job)'
                ),
                _variable(
                    "instance",
                    "Instance",
                    'label_values(stream_pairer_build_info{namespace=~"$namespace", job=~"$job"}, instance)',
                ),
            ]
        },
        "panels": build_panels(),
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
