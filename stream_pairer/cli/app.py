"""`stream-pairer` command line: one subcommand per module in `stream_pairer.cli.commands`.

Discovery keeps each subcommand in its own small module (pair, run, report, audit...) so they can
grow independently; a module exposes NAME, HELP, add_arguments(parser) and run(args) -> exit code.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType

from stream_pairer import __version__
from stream_pairer.cli import commands


def _command_modules() -> list[ModuleType]:
    mods = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return mods


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-pairer",
        description="Pair AI tool calls with their results; keep every orphan; dead-letter bad input.",
    )
    parser.add_argument("--version", action="version", version=f"stream-pairer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args._run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
