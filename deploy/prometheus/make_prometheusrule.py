"""Wrap deploy/prometheus/stream-pairer-rules.yml in a Prometheus Operator `PrometheusRule`.

The plain rule file is the source (promtool tests it); the Kubernetes resource is derived from it
so that the two cannot drift (tests/ops/test_deploy.py compares this script's output with the file):

    python deploy/prometheus/make_prometheusrule.py > deploy/kubernetes/prometheusrule.yaml
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

RULES = Path(__file__).with_name("stream-pairer-rules.yml")
HEADER = """\
# GENERATED from deploy/prometheus/stream-pairer-rules.yml by deploy/prometheus/make_prometheusrule.py;
# edit the rule file and regenerate:
#   python deploy/prometheus/make_prometheusrule.py > deploy/kubernetes/prometheusrule.yaml
"""


class _Dumper(yaml.SafeDumper):
    """Multi-line PromQL stays a readable block scalar instead of a quoted one-liner."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def render() -> str:
    rules: dict[str, Any] = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "stream-pairer", "labels": {"app.kubernetes.io/name": "stream-pairer"}},
        "spec": rules,
    }
    return HEADER + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=200)


if __name__ == "__main__":
    sys.stdout.write(render())
