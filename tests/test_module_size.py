"""No module of the package over 600 lines (the Rust crate's bound is tests/test_native_crate.py's).

Why a test: the bound was broken four times in one round (engine.py 807, tagging.py 653,
metrics.py 647, files.py 642) before anyone counted; a module that outgrows it is split by what it
is about (adapters/outputs.py from files.py, ops/names.py from metrics.py), not trimmed.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "stream_pairer"
MAX_LINES = 600


def test_no_package_module_is_over_600_lines() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50  # the package, not an empty glob
    over = {
        str(p.relative_to(PACKAGE)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert over == {}
