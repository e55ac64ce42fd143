"""The Grafana dashboard and the alert rules query only what stream-pairer really exports.

Every PromQL expression of the dashboard (panel targets and template variables) and of the rule
file is parsed twice: with `promql-parser` (PyPI; Python bindings of the Rust port of the Prometheus
parser), whose AST gives the metric names, and with Prometheus's own parser through
`promtool check rules` on a generated rule file (marked `tools`). The metric names must exist in the
registry of a freshly built `Metrics()`: the running code, not a hand list.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stream_pairer.ops.metrics import Metrics
from stream_pairer.ops.names import metric_names
from tests.ops.tool_helpers import promtool

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "grafana" / "dashboards" / "stream-pairer.json"
RULES = ROOT / "deploy" / "prometheus" / "stream-pairer-rules.yml"
PROVISIONING = ROOT / "grafana" / "provisioning"

# Series Prometheus itself synthesizes per target: allowed in rules although no code exports them.
PROMETHEUS_SERIES = frozenset({"up"})

# Grafana's built-in interval variables, replaced by a duration so the expression is valid PromQL.
GRAFANA_DURATIONS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def rules() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return data


def all_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def dashboard_expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable's metric selector."""
    out = []
    for panel in all_panels(dashboard()["panels"]):
        for target in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for var in dashboard()["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["query"]["query"], re.DOTALL)
        assert m, f"variable {var['name']}: not a label_values(selector, label) query"
        out.append((f"variable {var['name']}", m.group(1)))
    return out


def rule_expressions() -> list[tuple[str, str]]:
    return [
        (rule.get("alert") or rule["record"], rule["expr"])
        for group in rules()["groups"]
        for rule in group["rules"]
    ]


def recorded_names() -> set[str]:
    return {rule["record"] for group in rules()["groups"] for rule in group["rules"] if "record" in rule}


def substitute(expr: str) -> str:
    """Grafana template variables -> concrete PromQL (durations, and `.*` for label variables)."""
    for var, duration in GRAFANA_DURATIONS.items():
        expr = expr.replace(var, duration)
    return _VARIABLE.sub(".*", expr)


def metric_names_in(expr: str) -> set[str]:
    """Names of all vector selectors, via the parser's AST (`foo` and `{__name__="foo"}`)."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            for m in node.matchers.matchers:
                if m.name == "__name__":
                    names.add(m.value)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return metric_names(Metrics().registry)


# ------------------------------------------------------------------------------ helpers are sound
def test_name_extraction_sees_through_functions_and_operators() -> None:
    expr = (
        'histogram_quantile(0.9, sum by (le) (rate(a_bucket{x="1"}[5m]))) / on(job) group_left '
        'max_over_time({__name__="b_total"}[1h:1m]) and label_replace(c, "l", "v", "", "")'
    )
    assert metric_names_in(expr) == {"a_bucket", "b_total", "c"}


def test_substitution_leaves_no_grafana_variable() -> None:
    got = substitute('rate(x{job=~"$job", i=~"${instance:regex}", n=~"[[ns]]"}[$__rate_interval])')
    assert got == 'rate(x{job=~".*", i=~".*", n=~".*"}[5m])'
    promql_parser.parse(got)


def test_registry_names_match_what_the_service_exposes() -> None:
    """`metric_names` (used below) agrees with the real text exposition once every family has a child."""
    m = Metrics()
    m.observe_record_read("anthropic", 1, 1)
    m.observe_skipped("turn_context")
    m.observe_output({"kind": "pair", "match": "id", "fifo_by": None, "tool": "t", "latency_ms": 5.0,
                      "outcome": "error", "failure": "execution"})  # fmt: skip
    m.observe_output({"kind": "orphan_call", "reason": "timeout", "tool": "t"})
    m.observe_output({"kind": "dead_letter", "reason": "invalid_json"})
    m.observe_emit_latency(0.01)
    m.set_lag("in", 0, 3, 1)
    text = generate_latest(m.registry).decode()
    exposed = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    expected = metric_names(m.registry)
    if os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "").lower() == "true":
        expected = {n for n in expected if not n.endswith("_created")}
    assert exposed == expected


# ------------------------------------------------------------------------------ dashboard structure
def test_dashboard_is_importable() -> None:
    d = dashboard()
    assert d["id"] is None, "an importable dashboard carries no database id"
    assert d["uid"] == "stream-pairer" and d["title"] and isinstance(d["schemaVersion"], int)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    panels = list(all_panels(d["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, f"{p['title']}: outside the 24-column grid"
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], f"{p['title']}: no query"
        for t in p["targets"]:
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), f"{p['title']}: duplicate refId"
    for v in variables.values():
        if v["type"] == "query":
            assert v["datasource"]["uid"] == "${datasource}", v["name"]


def test_dashboard_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for p in all_panels(dashboard()["panels"]):
        g = p["gridPos"]
        for y in range(g["y"], g["y"] + g["h"]):
            for x in range(g["x"], g["x"] + g["w"]):
                assert (x, y) not in cells, f"{p['title']!r} overlaps {cells[(x, y)]!r} at {(x, y)}"
                cells[(x, y)] = p["title"]


def test_dashboard_json_is_the_generator_output() -> None:
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("make_dashboard", ROOT / "grafana" / "make_dashboard.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text(encoding="utf-8") == module.render(), (
        "regenerate: python grafana/make_dashboard.py > grafana/dashboards/stream-pairer.json"
    )


def _panels_using(*names: str) -> list[str]:
    """Titles of panels whose queries use every one of `names`."""
    titles = []
    for p in all_panels(dashboard()["panels"]):
        used: set[str] = set()
        for t in p.get("targets", []):
            used |= metric_names_in(substitute(t["expr"]))
        if set(names) <= used:
            titles.append(p["title"])
    return titles


@pytest.mark.parametrize(
    "what, names",
    [
        ("throughput", ["stream_pairer_events_read_total"]),
        ("output throughput", ["stream_pairer_pairs_total", "stream_pairer_dead_letters_total"]),
        ("orphan rate", ["stream_pairer_orphans_total", "stream_pairer_pairs_total"]),
        (
            "conversations vs limit",
            ["stream_pairer_open_conversations", "stream_pairer_open_conversations_limit"],
        ),
        ("held bytes vs limit", ["stream_pairer_held_bytes", "stream_pairer_held_bytes_limit"]),
        ("open calls and evictions", ["stream_pairer_open_calls", "stream_pairer_evictions_total"]),
        ("tool latency", ["stream_pairer_tool_latency_seconds_bucket"]),
        ("emit latency", ["stream_pairer_emit_latency_seconds_bucket"]),
        ("lag", ["stream_pairer_consumer_lag_messages", "stream_pairer_unprocessed_messages"]),
        ("failure points", ["stream_pairer_tool_failures_total"]),
        ("failure share of calls", ["stream_pairer_tool_failures_total", "stream_pairer_tool_calls_total"]),
        ("outcomes", ["stream_pairer_tool_outcomes_total"]),
        ("kafka errors", ["stream_pairer_commit_errors_total", "stream_pairer_produce_errors_total"]),
    ],
)
def test_dashboard_has_panel_for(what: str, names: list[str]) -> None:
    assert _panels_using(*names), f"no panel shows {what} ({', '.join(names)})"


def test_match_types_panel_splits_by_match() -> None:
    exprs = [
        t["expr"]
        for p in all_panels(dashboard()["panels"])
        if p["title"] == "Match types"
        for t in p["targets"]
    ]
    assert exprs and all("by (match, fifo_by)" in e for e in exprs)


def _alert(name: str) -> dict[str, Any]:
    for group in rules()["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return dict(rule)
    raise AssertionError(f"alert {name} not in {RULES}")


def _thresholds(expr: str, lhs_name: str) -> list[float]:
    """Numbers compared with `>` against the selector `lhs_name` in `expr` (from the AST)."""
    found: list[float] = []

    def visit(node: Any) -> None:
        if (
            isinstance(node, promql_parser.BinaryExpr)
            and str(node.op) == ">"
            and isinstance(node.lhs, promql_parser.VectorSelector)
            and node.lhs.name == lhs_name
            and isinstance(node.rhs, promql_parser.NumberLiteral)
        ):
            found.append(node.rhs.val)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_orphan_rate_panel_draws_the_alert_threshold() -> None:
    """The red line is StreamPairerOrphanRateHigh's threshold where the baseline is ~0: the alert's
    factor times the floor of the baseline recording rule."""
    expr = _alert("StreamPairerOrphanRateHigh")["expr"]
    baseline = "namespace_job:stream_pairer_orphan_results:ratio_baseline"
    factors = set(re.findall(rf"> on \(namespace, job\) ([\d.]+) \* {baseline}", expr))
    assert len(factors) == 1, expr
    rule = next(r["expr"] for g in rules()["groups"] for r in g["rules"] if r.get("record") == baseline)
    floor = re.search(r",\s*([\d.]+)\s*\)\s*$", rule)
    assert floor, rule
    threshold = float(factors.pop()) * float(floor.group(1))
    for title in ("Orphan result rate", "Orphan result rate (3m)"):
        (panel,) = [p for p in all_panels(dashboard()["panels"]) if p["title"] == title]
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        red = [s["value"] for s in steps if s["color"] == "red"]
        assert red == [pytest.approx(threshold)], title


def test_not_consuming_panel_draws_the_alert_threshold() -> None:
    expr = _alert("StreamPairerNotConsuming")["expr"]
    assert "time() - stream_pairer_last_consumed_timestamp_seconds > 300" in expr
    (panel,) = [p for p in all_panels(dashboard()["panels"]) if p["title"] == "Seconds since last consumed"]
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps if s["color"] == "red"] == [300]


def test_dashboard_orphan_ratio_matches_the_recording_rule_filters() -> None:
    """Same numerator filter as the alert, so the panel shows what pages."""
    rule = next(
        r["expr"]
        for g in rules()["groups"]
        for r in g["rules"]
        if r.get("record") == "namespace_job:stream_pairer_orphan_results:rate5m"
    )
    rule_filter = re.search(r'reason!~"([^"]+)"', rule)
    assert rule_filter
    (panel,) = [p for p in all_panels(dashboard()["panels"]) if p["title"] == "Orphan result rate"]
    for t in panel["targets"]:
        assert f'reason!~"{rule_filter.group(1)}"' in t["expr"]


# ------------------------------------------------------------------------------ names and parsing
@pytest.mark.parametrize("where, expr", dashboard_expressions(), ids=lambda v: str(v)[:60])
def test_dashboard_expression_uses_exported_metrics(where: str, expr: str, exported: set[str]) -> None:
    concrete = substitute(expr)
    assert "$" not in concrete, f"{where}: unresolved variable in {concrete}"
    names = metric_names_in(concrete)  # raises ValueError when it does not parse
    assert names, f"{where}: no metric"
    unknown = names - exported
    assert not unknown, f"{where}: not exported by stream_pairer.ops.metrics: {sorted(unknown)}"


@pytest.mark.parametrize("where, expr", rule_expressions(), ids=lambda v: str(v)[:60])
def test_rule_expression_uses_exported_metrics(where: str, expr: str, exported: set[str]) -> None:
    names = metric_names_in(expr)
    unknown = names - exported - recorded_names() - PROMETHEUS_SERIES
    assert not unknown, f"{where}: not exported by stream_pairer.ops.metrics: {sorted(unknown)}"


def test_a_misspelt_metric_is_caught(exported: set[str]) -> None:
    """The check above can fail: a counter queried without its `_total` suffix is not exported."""
    assert "stream_pairer_pairs_total" in exported
    assert metric_names_in("rate(stream_pairer_pairs[5m])") - exported == {"stream_pairer_pairs"}


def test_a_syntax_error_is_caught() -> None:
    with pytest.raises(ValueError):
        metric_names_in("sum(rate(stream_pairer_pairs_total[5m])")


@pytest.mark.tools
def test_every_expression_parses_with_promtool(tmp_path: Path) -> None:
    """Prometheus's own parser: each expression becomes a recording rule that promtool checks."""
    exprs = dashboard_expressions() + rule_expressions()
    rule_file = {
        "groups": [
            {
                "name": "expressions",
                "rules": [
                    {"record": f"check:expr_{i}", "expr": substitute(e)} for i, (_, e) in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "expressions.yml"
    path.write_text(yaml.safe_dump(rule_file), encoding="utf-8")
    proc = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in proc.stdout


@pytest.mark.tools
def test_promtool_rejects_a_broken_expression(tmp_path: Path) -> None:
    path = tmp_path / "broken.yml"
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "sum(rate(x[5m])"}]}]}),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0


# ------------------------------------------------------------------------------ provisioning
def test_dashboard_provisioning_file() -> None:
    doc = yaml.safe_load((PROVISIONING / "dashboards" / "stream-pairer.yaml").read_text(encoding="utf-8"))
    assert doc["apiVersion"] == 1
    (provider,) = doc["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")


def test_datasource_provisioning_file() -> None:
    doc = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yaml").read_text(encoding="utf-8"))
    assert doc["apiVersion"] == 1
    assert [d["type"] for d in doc["datasources"]] == ["prometheus"]
