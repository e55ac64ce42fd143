"""External tools some tests drive (installed by `.ci/run`, optional on a laptop)."""

from __future__ import annotations

import os
import shutil

import pytest


def promtool() -> str:
    """Path of Prometheus's `promtool`. A laptop without it skips those tests; CI must not, or the
    alert rules would ship untested, so there its absence fails the test."""
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is required in CI (apt-get install prometheus)")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path
