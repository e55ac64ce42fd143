"""The import-linter contracts in pyproject.toml hold, and they do fail on a violating import.

Each case copies the package into a temporary folder, adds one module that breaks a contract, and
runs `lint-imports` there with the project's own configuration: a contract that never fails would
prove nothing, so the test shows each kind of violation turning the exit status non-zero.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the package under `tree`, with the project's pyproject.toml."""
    code = "import sys\nfrom importlinter.cli import lint_imports_command\nsys.exit(lint_imports_command())"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "stream_pairer", tmp_path / "stream_pairer", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_its_contracts(tree: Path) -> None:
    done = lint_imports(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("where", "body", "broken"),
    [
        ("core/_bad.py", "import asyncio\n", "core, stream and errors import no Kafka client"),
        ("stream/_bad.py", "import prometheus_client\n", "core, stream and errors import no Kafka client"),
        ("core/_bad.py", "from stream_pairer.ops import metrics\n", "Layers:"),
        ("stream/_bad.py", "from stream_pairer.adapters.kafka import io\n", "Layers:"),
    ],
)
def test_a_violating_import_fails_the_contract(tree: Path, where: str, body: str, broken: str) -> None:
    (tree / "stream_pairer" / where).write_text(body)
    done = lint_imports(tree)
    assert done.returncode != 0
    assert broken in done.stdout and "BROKEN" in done.stdout
    assert "_bad" in done.stdout  # the report names the offending module
