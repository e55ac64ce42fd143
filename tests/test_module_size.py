"""No module over 600 lines: the package, and the scripts, benchmarks and tests around it (the Rust
crate's bound is tests/test_native_crate.py's).

Why a test: the bound was broken four times in one round (engine.py 807, tagging.py 653,
metrics.py 647, files.py 642) before anyone counted; a module that outgrows it is split by what it
is about (adapters/outputs.py from files.py, ops/names.py from metrics.py), not trimmed. The
scripts and tests had drifted the same way while only the package was counted
(scripts/fault_trials.py 1,429 lines, tests/core/test_native_differential.py 1,397), so they are
held to it too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600

# Each tree, and how many modules it holds at least: a moved or renamed folder must fail here,
# not pass over an empty glob.
TREES = {"stream_pairer": 50, "scripts": 8, "bench": 20, "tests": 100}


def _over(tree: str, at_least: int) -> dict[str, int]:
    modules = sorted((ROOT / tree).rglob("*.py"))
    assert len(modules) >= at_least, f"{tree}: {len(modules)} modules"
    return {
        str(p.relative_to(ROOT)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }


def test_no_package_module_is_over_600_lines() -> None:
    assert _over("stream_pairer", TREES["stream_pairer"]) == {}


@pytest.mark.parametrize("tree", ["scripts", "bench", "tests"])
def test_no_script_benchmark_or_test_module_is_over_600_lines(tree: str) -> None:
    assert _over(tree, TREES[tree]) == {}
