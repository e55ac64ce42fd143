"""Writes deploy/prometheus/stream-pairer-rules.burn.test.yml: the promtool cases of the burn-rate
alerts (time to fire, time to resolve, and silence through an hour of healthy, bursty traffic with a
rolling restart, a rebalance and a broker restart).

Why generated: those cases need 15 s samples over hours, with bursts and jitter; promtool's series
notation (`a+bxn`) cannot write jitter, and thousands of hand-written numbers could not be reviewed.
The generator is the reviewable form; the YAML is committed so `promtool test rules` needs no
Python. Run: python3 deploy/prometheus/make_burn_tests.py (a fixed seed: the output is stable).
"""

# ruff: noqa: E501  (series selectors and case names read better unbroken)
import random
from pathlib import Path
from typing import Any

import yaml

rnd = random.Random(25)
STEP = 15  # seconds per sample


def counter(rates, start=0.0):
    """rates: increments per sample (None = no sample / series gone)."""
    out, v = [], start
    for r in rates:
        if r is None:
            out.append("_")
            continue
        if r == "reset":
            v = 0.0
            out.append("0")
            continue
        v += r
        out.append(f"{v:g}")
    return " ".join(out)


def gauge(vals):
    return " ".join("_" if v is None else (f"{v:g}" if not isinstance(v, str) else v) for v in vals)


def m(minutes):
    return int(minutes * 60 // STEP)


def firing(alert, job="app", state="firing", severity="page"):
    return {
        "expr": f'ALERTS{{alertname="{alert}", alertstate="{state}"}}',
        "exp_samples": [
            {
                "labels": f'ALERTS{{alertname="{alert}", alertstate="{state}", job="{job}", severity="{severity}"}}',
                "value": 1,
            }
        ],
    }


def silent(alert, window="60m"):
    return {
        "expr": f'count(max_over_time(ALERTS{{alertname="{alert}"}}[{window}])) or vector(0)',
        "exp_samples": [{"labels": "{}", "value": 0}],
    }


def orphan_case(name, minutes, base_orph, base_pairs, at_min, spike_orph, checks, end_min=None):  # noqa: PLR0917
    n = m(minutes)
    pairs = [base_pairs] * n
    orph = []
    for i in range(n):
        t = i * STEP / 60
        in_spike = at_min <= t and (end_min is None or t < end_min)
        orph.append(spike_orph if in_spike else base_orph)
    return {
        "name": name,
        "interval": f"{STEP}s",
        "input_series": [
            {
                "series": 'stream_pairer_pairs_total{job="app", instance="a", match="id", fifo_by="none"}',
                "values": counter([0, *pairs]),
            },
            {
                "series": 'stream_pairer_orphans_total{job="app", instance="a", kind="orphan_result", reason="no_call"}',
                "values": counter([0, *orph]),
            },
        ],
        "promql_expr_test": checks,
    }


def at(t, check):
    return {**check, "eval_time": t}


tests = []
HIGH, RISING = "StreamPairerOrphanRateHigh", "StreamPairerOrphanRateRising"
# name, minutes, orphans and pairs per sample before, when the change starts (min), orphans per
# sample after, the checks, when it ends (min, None: never). Pairs per sample stay the same.
CASES: list[tuple[str, int, float, float, float, float, list[dict[str, Any]], float | None]] = [
    # 1. The drill: 0 % -> 23 % of results.
    ("a spike from 0% to 23% of results pages within 3 minutes and resolves within 3 after it ends",
     100, 0, 100, 60, 30,
     [at("60m", silent(HIGH, "60m")), at("63m", firing(HIGH)), at("79m", firing(HIGH)),
      at("82m", {"expr": 'ALERTS{alertname="StreamPairerOrphanRateHigh"}', "exp_samples": []})], 80),
    # 2. 10x a 1 % baseline.
    ("a jump to 10x a 1% baseline pages within 3 minutes", 190, 1, 99, 180, 11,
     [at("180m", silent(HIGH, "180m")), at("183m", firing(HIGH))], None),
    # 3. 3x: warns, never pages.
    ("a sustained 3x rise (1% to 3%) warns but does not page", 250, 1, 99, 180, 3,
     [at("250m", silent(HIGH, "250m")), at("215m", firing(RISING, severity="warning"))], None),
    # 4. 2x within an hour (a job younger than 5 minutes may go pending: the window starts at 100m).
    ("a sustained 2x rise (1% to 2%) warns within an hour and does not page", 250, 1, 99, 180, 2,
     [at("190m", silent(RISING, "90m")), at("240m", firing(RISING, severity="warning")),
      at("250m", silent(HIGH, "250m"))], None),
    # 5. Steady 3 %: its own baseline.
    ("a steady 3% orphan rate is its own baseline and neither pages nor warns", 300, 3, 97, 10_000, 0,
     [at("300m", silent(HIGH, "220m")), at("300m", silent(RISING, "220m"))], None),
    # 6. Tiny baseline tripled: under the floor.
    ("tripling a tiny rate stays under the floor", 250, 0.1, 99.9, 180, 0.3,
     [at("250m", silent(HIGH, "250m")), at("250m", silent(RISING, "250m"))], None),
    # 7. A trickle: traffic floor.
    ("a high ratio on a trickle of results stays silent (traffic floor)", 60, 0, 0.5, 30, 0.25,
     [at("60m", silent(HIGH, "60m"))], None),
]  # fmt: skip
for name, minutes, orph, pairs, start, spike, checks, end in CASES:
    tests.append(orphan_case(name, minutes, orph, pairs, start, spike, checks, end_min=end))
# 8. Lifecycle orphans do not page.
case = orphan_case(
    "orphan results from shutdown, rebalance and end of input do not page", 60, 0, 100, 100, 0, []
)
for reason in ("shutdown", "rebalance", "end_of_input"):
    case["input_series"].append(
        {
            "series": f'stream_pairer_orphans_total{{job="app", instance="a", kind="orphan_result", reason="{reason}"}}',
            "values": counter([0] + [40 if 30 <= i * STEP / 60 < 35 else 0 for i in range(m(60))]),
        }
    )
case["promql_expr_test"] = [at("60m", silent("StreamPairerOrphanRateHigh", "60m"))]
tests.append(case)
# 9. Orphan calls are not orphan results.
case = orphan_case("orphan calls do not count as orphan results", 60, 0, 100, 100, 0, [])
case["input_series"].append(
    {
        "series": 'stream_pairer_orphans_total{job="app", instance="a", kind="orphan_call", reason="timeout"}',
        "values": counter([0] + [30] * m(60)),
    }
)
case["promql_expr_test"] = [at("60m", silent("StreamPairerOrphanRateHigh", "60m"))]
tests.append(case)

# 9b. The ratio is the job's, across instances: one instance with only pairs, one with orphans.
case = orphan_case("the ratio is computed over the whole job, across instances", 30, 0, 100, 100, 0, [])
case["input_series"][1]["series"] = case["input_series"][1]["series"].replace('instance="a"', 'instance="b"')
case["input_series"][1]["values"] = counter([0] + [0 if i * STEP / 60 < 20 else 40 for i in range(m(30))])
case["promql_expr_test"] = [
    at("20m", silent("StreamPairerOrphanRateHigh", "20m")),
    at("23m", firing("StreamPairerOrphanRateHigh")),
]
tests.append(case)

# 10. An hour of healthy, bursty traffic: rolling restart, rebalance, broker restart. No alert of
#     any kind fires or goes pending.
T = m(75)


def minute(i):
    return i * STEP / 60


series = []


def burst(i):
    # bursts of 10x traffic for one minute in five, jitter on top
    return (400 if int(minute(i)) % 5 == 0 else 40) * rnd.uniform(0.7, 1.3)


def broker_down(i):
    return 40 <= minute(i) < 42


for inst, alive in (
    ("a", lambda t: t < 20),
    ("c", lambda t: t >= 20),
    ("b", lambda t: t < 25),
    ("d", lambda t: t >= 25),
):
    pairs, orph, life, read, errs, up, ready, lag, consumed, build = (
        [0],
        [0],
        [0],
        [0],
        [0],
        [1],
        [1],
        [10],
        [0],
        [1],
    )
    for i in range(1, T + 1):
        t = minute(i)
        if not alive(t):
            for col in (pairs, orph, life, read, errs, up, ready, lag, consumed, build):
                col.append(None)
            continue
        if broker_down(t):  # nothing flows, produce errors, not ready; then a catch-up burst
            r = 0
            errs.append(3)
            ready.append(0)
            lag.append(min(900, (lag[-1] or 0) + 60))
        else:
            r = burst(i) + (600 if 42 <= t < 43 else 0)
            errs.append(0)
            ready.append(0 if (inst == "c" and 20 <= t < 20.5) or (inst == "d" and 25 <= t < 25.5) else 1)
            lag.append(max(5, (lag[-1] or 0) * 0.3))
        pairs.append(r)
        orph.append(r * 0.003 * rnd.uniform(0.5, 1.5))  # the baseline: 0.3 % give or take
        life.append(200 if (inst in ("c", "d") and 30 <= t < 30.25) else 0)  # a rebalance flush
        read.append(2 * r)
        up.append(1)
        build.append(1)
        consumed.append(i * STEP if r else (consumed[-1] or 0))
    lbl = f'job="app", instance="{inst}"'
    series += [
        {
            "series": f'stream_pairer_pairs_total{{{lbl}, match="id", fifo_by="none"}}',
            "values": counter(pairs),
        },
        {
            "series": f'stream_pairer_orphans_total{{{lbl}, kind="orphan_result", reason="no_call"}}',
            "values": counter(orph),
        },
        {
            "series": f'stream_pairer_orphans_total{{{lbl}, kind="orphan_result", reason="rebalance"}}',
            "values": counter(life),
        },
        {"series": f"stream_pairer_records_read_total{{{lbl}}}", "values": counter(read)},
        {
            "series": f'stream_pairer_dead_letters_total{{{lbl}, reason="not_json"}}',
            "values": counter([0] * (T + 1)),
        },
        {"series": f"stream_pairer_produce_errors_total{{{lbl}}}", "values": counter(errs)},
        {
            "series": f"stream_pairer_commit_errors_total{{{lbl}}}",
            "values": counter([0 if e is not None else None for e in errs]),
        },
        {"series": f"up{{{lbl}}}", "values": gauge(up)},
        {"series": f'stream_pairer_build_info{{{lbl}, version="0.1.0"}}', "values": gauge(build)},
        {"series": f"stream_pairer_up{{{lbl}}}", "values": gauge(ready)},
        {
            "series": f'stream_pairer_unprocessed_messages{{{lbl}, topic="tool-events", partition="0"}}',
            "values": gauge([None if v is None else round(v) for v in lag]),
        },
        {"series": f"stream_pairer_last_consumed_timestamp_seconds{{{lbl}}}", "values": gauge(consumed)},
    ]
tests.append(
    {
        "name": "an hour of healthy bursty traffic with a rolling restart, a rebalance and a broker restart: no alert fires or goes pending",
        "interval": f"{STEP}s",
        "input_series": series,
        "promql_expr_test": [
            {
                "eval_time": "75m",
                "expr": "count(max_over_time(ALERTS[75m])) or vector(0)",
                "exp_samples": [{"labels": "{}", "value": 0}],
            },
        ],
    }
)

# 11. Down within 2 minutes.
tests.append(
    {
        "name": "a killed sidecar pages StreamPairerDown within 2 minutes",
        "interval": "30s",
        "input_series": [
            {"series": 'up{job="checkout", instance="10.0.0.7:9464"}', "values": "1x20 0x20"},
            {
                "series": 'stream_pairer_build_info{job="checkout", instance="10.0.0.7:9464", version="0.1.0"}',
                "values": "1x20 stale",
            },
        ],
        "promql_expr_test": [
            {"eval_time": "10m", "expr": 'ALERTS{alertname="StreamPairerDown"}', "exp_samples": []},
            {
                "eval_time": "12m",
                "expr": 'ALERTS{alertname="StreamPairerDown", alertstate="firing"}',
                "exp_samples": [
                    {
                        "labels": 'ALERTS{alertname="StreamPairerDown", alertstate="firing", job="checkout", instance="10.0.0.7:9464", severity="page"}',
                        "value": 1,
                    }
                ],
            },
        ],
    }
)

# Each check names its case in a PromQL comment: promtool reports a failed expression test by its
# expression only, and tests/ops/test_alert_rules.py must know which case failed.
for case in tests:
    for check in case["promql_expr_test"]:
        check["expr"] = f"{check['expr']} # case: {case['name']}"

doc = {
    "rule_files": ["stream-pairer-rules.yml"],
    "evaluation_interval": "30s",
    "tests": tests,
}
header = """# promtool unit tests of the time-to-fire and the silence of the burn-rate alerts (issue 25):
#   promtool test rules deploy/prometheus/stream-pairer-rules.burn.test.yml
# Series are sampled every 15 s and the rules evaluated every 30 s, as a production scrape would.
# `count(max_over_time(ALERTS{...}[w])) or vector(0)` = 0 means the alert was neither pending nor
# firing at any evaluation in the window. Explicit series written by a small generator (bursts and
# jitter from a fixed seed); the traffic and timings of each case are in its name.
"""
with (Path(__file__).resolve().parent / "stream-pairer-rules.burn.test.yml").open("w") as f:
    f.write(header + "\n")
    yaml.safe_dump(doc, f, sort_keys=False, width=10_000)
