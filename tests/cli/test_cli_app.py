"""cli/app.py: the lazy command registry. `pair` must not load the Kafka client, Prometheus or the
JSON Schema validator unless asked to (they cost start-up time and are not needed for files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stream_pairer.cli.app import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("aiokafka", "prometheus_client", "jsonschema_rs")


def loaded_after(code: str) -> set[str]:
    """Run `code` in a fresh interpreter (this tree first on the path); the heavy modules it loaded."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True, cwd=ROOT
    )
    return set(out.stdout.split())


def test_registry_entries_equal_their_modules() -> None:
    names = [c.name for c in COMMANDS]
    assert names == sorted(names) and len(names) >= 4
    for cmd in COMMANDS:
        mod = cmd.load()
        assert (cmd.name, cmd.help) == (mod.NAME, mod.HELP)
        assert callable(mod.add_arguments) and callable(mod.run)
    pkg = ROOT / "stream_pairer" / "cli" / "commands"
    on_disk = {p.stem for p in pkg.glob("*.py") if not p.stem.startswith("_")}
    assert on_disk == set(names)  # a new command module must be registered


def test_pair_help_imports_no_kafka_prometheus_or_jsonschema() -> None:
    code = (
        "import contextlib, io\nfrom stream_pairer.cli.app import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['pair', '--help'])"
    )
    assert loaded_after(code) == set()


def test_pair_run_imports_jsonschema_only_with_tool_schemas(tmp_path: Path) -> None:
    example = ROOT / "examples" / "mixed.jsonl"
    tools = ROOT / "examples" / "tools.json"
    run = "from stream_pairer.cli.app import main\nassert main({argv!r}) == 0"
    plain = ["pair", str(example), "--out", str(tmp_path / "a"), "-q"]
    assert loaded_after(run.format(argv=plain)) == set()
    tagged = ["pair", str(example), "--tool-schemas", str(tools), "--out", str(tmp_path / "b"), "-q"]
    assert loaded_after(run.format(argv=tagged)) == {"jsonschema_rs"}  # needed: the probe sees a real load


def test_run_still_loads_the_kafka_client() -> None:
    """The counter-check: the probe does see aiokafka when the chosen command needs it."""
    code = (
        "import contextlib, io\nfrom stream_pairer.cli.app import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['run', '--help'])"
    )
    assert "aiokafka" in loaded_after(code)


@pytest.mark.parametrize("load", [None, "pair"])
def test_top_level_help_lists_every_command(load: str | None) -> None:
    text = build_parser(load).format_help()
    assert all(c.name in text for c in COMMANDS)
