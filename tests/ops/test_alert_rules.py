"""The alert rules, tested with Prometheus's own `promtool` on synthetic series.

deploy/prometheus/stream-pairer-rules.test.yml, stream-pairer-rules.baseline.test.yml (the
hour-vs-day alerts, evaluated every 5 minutes) and stream-pairer-rules.burn.test.yml (the burn-rate
orphan alerts' time to fire and to resolve, and an hour of healthy traffic during which no alert may
even go pending; written by make_burn_tests.py) hold the cases: each alert fires when it should and
stays silent when it should not. Passing is not enough: the mutation tests below rewrite a rule and
check that the cases notice, so that a case which would pass whatever the rule says is caught:

* each alert removed: every case expecting it to fire must fail;
* each alert made to fire always: every case expecting silence for it must fail;
* each guard of the orphan alerts (threshold, traffic floor, lifecycle reasons, baseline, floor)
  loosened: the one case written for that guard must fail.

promtool comes from the Debian package `prometheus`. Missing promtool skips these tests locally and
fails them in CI (CI=true).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ops.tool_helpers import promtool

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "stream-pairer-rules.yml"
RULE_TESTS = (
    RULES_DIR / "stream-pairer-rules.test.yml",
    RULES_DIR / "stream-pairer-rules.baseline.test.yml",
    RULES_DIR / "stream-pairer-rules.burn.test.yml",
)
SEVERITIES = {"page", "warning"}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def alerts() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in load(RULES)["groups"] for r in g["rules"] if "alert" in r}


def _alerts_check(expr: str, samples: list[dict[str, Any]], alert: str) -> bool | None:
    """A promql_expr_test on the ALERTS series: True when it expects `alert` firing, False when it
    expects it (or every alert, `ALERTS` without a name) silent, None when it is not about it."""
    named = re.search(r'alertname="([^"]+)"', expr)
    if "ALERTS" not in expr or (named is not None and named.group(1) != alert):
        return None
    if any(s.get("value") == 1 and "ALERTS{" in str(s.get("labels")) for s in samples):
        return True
    if not samples or all(s.get("value") == 0 for s in samples):
        return False
    return None


def cases_for(alert: str, *, firing: bool) -> list[str]:
    """Names of test cases with at least one evaluation of `alert` expecting it firing (or silent)."""
    names = []
    for case in (c for f in RULE_TESTS for c in load(f)["tests"]):
        checks = [
            bool(c.get("exp_alerts")) for c in case.get("alert_rule_test", []) if c["alertname"] == alert
        ]
        for check in case.get("promql_expr_test", []):
            verdict = _alerts_check(check["expr"], check.get("exp_samples", []), alert)
            if verdict is not None:
                checks.append(verdict)
        if firing in checks:
            names.append(case["name"])
    return names


def run_promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=300
    )


def run_mutant(tmp: Path, rules: dict[str, Any], case_names: list[str]) -> subprocess.CompletedProcess[str]:
    """promtool test rules with `rules` in place of the real file, on the named cases only."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / RULES.name).write_text(yaml.safe_dump(rules, sort_keys=False), encoding="utf-8")
    files, found = [], 0
    for path in RULE_TESTS:
        tests = load(path)
        tests["tests"] = [c for c in tests["tests"] if c["name"] in case_names]
        if tests["tests"]:
            found += len(tests["tests"])
            (tmp / path.name).write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
            files.append(path.name)
    assert found == len(set(case_names)), "unknown case name"
    return run_promtool("test", "rules", *files, cwd=tmp)


def failed_cases(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """Case names promtool reports as failed (`name: <case>,` lines of its report)."""
    out = proc.stdout + proc.stderr
    named = {m.group(1) for m in re.finditer(r"^\s*name: (.*?),\s*$", out, re.M)}
    # promql_expr_test failures name only their expression, which names its case in a comment.
    return named | {m.group(1) for m in re.finditer(r'# case: (.*?)", time: ', out)}


def mutate(alert: str, change: Any) -> dict[str, Any]:
    rules = load(RULES)
    for group in rules["groups"]:
        for i, rule in enumerate(group["rules"]):
            if alert in (rule.get("alert"), rule.get("record")):
                new = change(copy.deepcopy(rule))
                if new is None:
                    del group["rules"][i]
                else:
                    group["rules"][i] = new
                return rules
    raise AssertionError(alert)


# ------------------------------------------------------------------------------ structure (no tool)
def test_required_alerts_exist() -> None:
    required = {
        "StreamPairerOrphanRateHigh",  # absolute threshold
        "StreamPairerOrphanRateRising",  # slow burn against its own baseline
        "StreamPairerFifoShareRising",
        "StreamPairerDeadLetterRateHigh",
        "StreamPairerConsumerLagGrowing",
        "StreamPairerDown",
        "StreamPairerNotConsuming",
    }
    assert required <= set(alerts())


@pytest.mark.parametrize("name", sorted(alerts()))
def test_alert_is_complete(name: str) -> None:
    rule = alerts()[name]
    assert re.fullmatch(r"\d+[smh]", rule["for"]), (
        "every alert waits (`for:`) so one bad minute does not page"
    )
    assert rule["labels"]["severity"] in SEVERITIES
    ann = rule["annotations"]
    assert ann["summary"] and ann["description"]
    path, _, anchor = ann["runbook"].partition("#")
    assert anchor == name.lower(), "runbook anchors are the alert's heading"
    assert (ROOT / path).is_file(), f"runbook file {path} is missing"


def _slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("name", sorted(alerts()))
def test_alert_runbook_section_exists(name: str) -> None:
    """The runbook link of each alert lands on a section saying what to do when it fires."""
    path, _, anchor = alerts()[name]["annotations"]["runbook"].partition("#")
    doc = ROOT / path
    if not doc.is_file():
        pytest.fail(f"{doc} is missing")
    text = doc.read_text(encoding="utf-8")
    headings = {_slug(h): h for h in re.findall(r"^#+\s+(.+?)\s*$", text, re.M)}
    assert anchor in headings, f"{path} has no heading for #{anchor}"
    start = re.search(rf"^#+\s+{re.escape(headings[anchor])}\s*$", text, re.M)
    assert start
    section = text[start.end() :].split("\n#", 1)[0]
    assert len(section.split()) >= 20, f"{path}#{anchor}: say what to do when it fires"


@pytest.mark.parametrize("name", sorted(alerts()))
def test_alert_has_firing_and_silent_cases(name: str) -> None:
    assert cases_for(name, firing=True), f"{name}: no case where it fires"
    assert cases_for(name, firing=False), f"{name}: no case where it stays silent"


def test_test_files_load_the_rule_file_and_case_names_are_unique() -> None:
    for path in RULE_TESTS:
        assert load(path)["rule_files"] == [RULES.name]
    names = [c["name"] for f in RULE_TESTS for c in load(f)["tests"]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    "name, long, short",
    [("StreamPairerOrphanRateHigh", "3m", "1m"), ("StreamPairerOrphanRateRising", "30m", "5m")],
)
def test_orphan_alerts_are_multi_window_burn_rates(name: str, long: str, short: str) -> None:
    """Both windows against the same multiple of the baseline (SRE workbook): the long one says it
    is real, the short one that it is still happening (so the alert resolves soon after the end)."""
    expr = alerts()[name]["expr"]
    factors = set(
        re.findall(
            r"> on \(namespace, job\) ([\d.]+) \* namespace_job:stream_pairer_orphan_results:ratio_baseline",
            expr,
        )
    )
    assert len(factors) == 1, expr
    for window in (long, short):
        assert f"orphan_results:ratio_rate{window} > on (namespace, job)" in expr


# ------------------------------------------------------------------------------ promtool
@pytest.mark.tools
def test_promtool_check_rules() -> None:
    proc = run_promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = sum(len(g["rules"]) for g in load(RULES)["groups"])
    assert f"SUCCESS: {n} rules found" in proc.stdout


@pytest.mark.tools
def test_promtool_unit_tests_pass() -> None:
    proc = run_promtool("test", "rules", *(p.name for p in RULE_TESTS), cwd=RULES_DIR)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("SUCCESS") == len(RULE_TESTS)


@pytest.mark.tools
def test_every_case_can_fail(tmp_path: Path) -> None:
    """For each alert: removed -> its firing cases fail; always firing -> its silent cases fail."""

    def always(rule: dict[str, Any]) -> dict[str, Any]:
        rule["expr"] = "vector(1)"
        rule.pop("for", None)
        return rule

    jobs = []
    for name in alerts():
        jobs.append((f"{name}-removed", mutate(name, lambda _r: None), cases_for(name, firing=True)))
        jobs.append((f"{name}-always", mutate(name, always), cases_for(name, firing=False)))

    def run(job: tuple[str, dict[str, Any], list[str]]) -> tuple[str, list[str], set[str], str]:
        label, rules, cases = job
        proc = run_mutant(tmp_path / label, rules, cases)
        return label, cases, failed_cases(proc), proc.stdout[-2000:]

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(run, jobs))
    problems = [
        f"{label}: cases still passing: {sorted(set(cases) - failed)}\n{out}"
        for label, cases, failed, out in results
        if set(cases) - failed
    ]
    assert not problems, "\n".join(problems)


# Each guard of the paging alerts (or of a recording rule they use), loosened, and the case written
# to catch exactly that. `old` may occur more than once (both windows of a burn-rate alert).
BASELINE = "namespace_job:stream_pairer_orphan_results:ratio_baseline"
GUARDS = [
    (
        "StreamPairerOrphanRateHigh",
        "> on (namespace, job) 5 *",
        "> on (namespace, job) 2.5 *",
        "a sustained 3x rise (1% to 3%) warns but does not page",
    ),
    (
        "StreamPairerOrphanRateHigh",
        "namespace_job:stream_pairer_results:rate3m > 0.1",
        "namespace_job:stream_pairer_results:rate3m > 0",
        "a high ratio on a trickle of results stays silent (traffic floor)",
    ),
    (
        "StreamPairerOrphanRateHigh",
        "\nand namespace_job:stream_pairer_orphan_results:ratio_rate1m > on (namespace, job) 5 * " + BASELINE,
        "",
        "a spike from 0% to 23% of results pages within 3 minutes and resolves within 3 after it ends",
    ),
    (
        "StreamPairerOrphanRateHigh",
        [f"namespace_job:stream_pairer_orphan_results:ratio_rate{w} > on" for w in ("3m", "1m")],
        [
            f'(sum by (namespace, job) (rate(stream_pairer_orphans_total{{kind="orphan_result"}}[{w}]))'
            f" / namespace_job:stream_pairer_results:rate{w}) > on"
            for w in ("3m", "1m")
        ],
        "orphan results from shutdown, rebalance and end of input do not page",
    ),
    (
        BASELINE,
        "0.005",
        "0.0005",
        "tripling a tiny rate stays under the floor",
    ),
    (
        BASELINE,
        "clamp_min(",
        "clamp_min(0 * ",
        "a steady 3% orphan rate is its own baseline and neither pages nor warns",
    ),
    (
        "StreamPairerOrphanRateRising",
        "> on (namespace, job) 1.5 *",
        "> on (namespace, job) 2.5 *",
        "a sustained 2x rise (1% to 2%) warns within an hour and does not page",
    ),
    (
        "StreamPairerNotConsuming",
        "(stream_pairer_unprocessed_messages) > 0",
        "(stream_pairer_unprocessed_messages) >= 0",
        "idle input (nothing to consume) stays silent",
    ),
    (
        "StreamPairerConsumerLagGrowing",
        "delta(namespace_job_topic:stream_pairer_unprocessed_messages:sum[15m]) > 0",
        "delta(namespace_job_topic:stream_pairer_unprocessed_messages:sum[15m]) > -1e9",
        "high lag that is shrinking (catching up) stays silent",
    ),
    (
        "StreamPairerDown",
        "up == 0 and on (job, instance) max_over_time(stream_pairer_build_info[1d])",
        "up == 0",
        "a sidecar scraped under its application's job goes down",
    ),
    (
        "StreamPairerNotReady",
        " and stream_pairer_up offset 5m",
        "",
        "an hour of healthy bursty traffic with a rolling restart, a rebalance and a broker restart: "
        "no alert fires or goes pending",
    ),
]


@pytest.mark.tools
@pytest.mark.parametrize("alert, old, new, case", GUARDS, ids=[f"{g[0]}:{g[3][:30]}" for g in GUARDS])
def test_guard_is_tested(
    alert: str, old: str | list[str], new: str | list[str], case: str, tmp_path: Path
) -> None:
    def loosen(rule: dict[str, Any]) -> dict[str, Any]:
        for was, now in zip(
            [old] if isinstance(old, str) else old, [new] if isinstance(new, str) else new, strict=True
        ):
            assert rule["expr"].count(was) >= 1, f"{was!r} not found in {alert}"
            rule["expr"] = rule["expr"].replace(was, now)
        return rule

    proc = run_mutant(tmp_path, mutate(alert, loosen), [case])
    assert proc.returncode != 0 and case in failed_cases(proc), (
        f"loosening {alert} ({old!r} -> {new!r}) went unnoticed:\n{proc.stdout}"
    )
