"""`stream-pairer` command line: an explicit, lazy registry of subcommands.

Each subcommand lives in its own module under `stream_pairer.cli.commands` (pair, run, report,
audit) exposing NAME, HELP, add_arguments(parser) and run(args) -> exit code. The registry below
names them without importing them: `stream-pairer pair` must not pay for (or depend on) aiokafka,
prometheus_client and jsonschema_rs, which only `run`, `audit` and the tagger's schemas need. Only
the chosen command's module is imported; `stream-pairer --help` imports none. A test keeps each
entry's NAME and HELP equal to its module's.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from stream_pairer import __version__
from stream_pairer.errors import EnvOptionError, NativeUnavailable


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    module: str

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


_PKG = "stream_pairer.cli.commands"
COMMANDS: tuple[Command, ...] = (
    Command(
        "audit",
        "check that every input event is in exactly one output record (files or Kafka topics)",
        f"{_PKG}.audit",
    ),
    Command(
        "formats",
        "list every input format reader: how a record is detected as it, and a sample record",
        f"{_PKG}.formats",
    ),
    Command(
        "pair",
        "pair tool calls with results in log files (JSONL or JSON documents, gzip ok; directories, "
        "globs, - for stdin): pairs, orphans, dead letters",
        f"{_PKG}.pair",
    ),
    Command(
        "report",
        "count tagged pairs/orphans by failure point and by tool (the weekly table); "
        "reads an output directory or pairs/orphans JSONL files (gzip ok)",
        f"{_PKG}.report",
    ),
    Command(
        "run",
        "run as a Kafka sidecar: consume tool events, produce pairs, orphans and dead letters",
        f"{_PKG}.run",
    ),
)


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line: the first argument that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(load: str | None = "*") -> argparse.ArgumentParser:
    """The parser. `load` names the one command whose module (and options) to import; "*" loads them
    all (for tests and tools that parse several command lines), None loads none (top-level help)."""
    parser = argparse.ArgumentParser(
        prog="stream-pairer",
        description="Pair AI tool calls with their results; keep every orphan; dead-letter bad input.",
    )
    parser.add_argument("--version", action="version", version=f"stream-pairer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        if load in ("*", cmd.name):
            mod = cmd.load()
            mod.add_arguments(p)
            p.set_defaults(_run=mod.run)
    return parser


# Exit status when stdout is closed early (`stream-pairer report out/ | head`): 128 + SIGPIPE, what
# the shell reports for any tool that the same pipe killed, so `set -o pipefail` scripts see it as
# they see it from `cat`. Files written before the pipe broke are complete (outputs are renamed into
# place before the summary is printed); only stdout output was cut short.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    chosen = _chosen(args_in)
    try:
        parser = build_parser(chosen if chosen in {c.name for c in COMMANDS} else None)
    except EnvOptionError as err:  # a STREAM_PAIRER_* variable a flag would have refused too
        print(err, file=sys.stderr)
        return 2
    except NativeUnavailable as err:  # the compiled core is not built: say what to do, no traceback
        print(f"stream-pairer: {err}", file=sys.stderr)
        return 2
    args = parser.parse_args(args_in)
    try:
        code: int = args._run(args)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at interpreter exit
    except BrokenPipeError:
        # Python's documented recipe: point stdout at devnull so the interpreter's own flush at
        # exit does not raise again, then exit quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
