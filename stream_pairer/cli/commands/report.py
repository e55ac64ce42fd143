"""`stream-pairer report DIR_OR_FILES...`: the failure-point table from pairs/orphans output.

A thin shell over `stream_pairer.analysis.report`: argument parsing, input errors as a one-line reason and
exit 2, the table on stdout, warnings about unreadable lines on stderr.
"""

from __future__ import annotations

import argparse
import sys

from stream_pairer.analysis.outputs import DEFAULT_MAX_LINE_BYTES, OutputLines
from stream_pairer.analysis.report import FORMATS, Report, build, input_files, parse_time, render
from stream_pairer.errors import InputError

NAME = "report"
HELP = (
    "count tagged pairs/orphans by failure point and by tool (the weekly table); "
    "reads an output directory or pairs/orphans JSONL files (gzip ok)"
)


def _time(text: str) -> float:
    try:
        return parse_time(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from err


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="DIR_OR_FILE",
        help="output directory (its pairs*, orphans*, dead_letter* JSONL files) or JSONL files; - for stdin",
    )
    parser.add_argument(
        "--format", "-f", choices=FORMATS, default="table", help="output format (default: table)"
    )
    parser.add_argument(
        "--since",
        type=_time,
        default=None,
        metavar="ISO",
        help="only records whose event time (call ts, else result ts) is at or after this",
    )
    parser.add_argument(
        "--until",
        type=_time,
        default=None,
        metavar="ISO",
        help="only records whose event time is before this",
    )
    parser.add_argument(
        "--top-tools",
        type=_positive,
        default=3,
        metavar="N",
        help="tools listed per failure point (default: 3)",
    )
    parser.add_argument(
        "--examples",
        type=_positive,
        default=3,
        metavar="N",
        help="example record ids per failure point (default: 3)",
    )
    parser.add_argument(
        "--max-tool-rows",
        type=_positive,
        default=20,
        metavar="N",
        help="rows of the by-tool table; the rest fold into one '(other)' row (default: 20)",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=_positive,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help=f"output lines longer than this are skipped, not read (default: {DEFAULT_MAX_LINE_BYTES})",
    )


def run(args: argparse.Namespace) -> int:
    if args.since is not None and args.until is not None and args.until <= args.since:
        print("stream-pairer report: --until must be later than --since", file=sys.stderr)
        return 2
    if args.inputs.count("-") > 1:
        print("stream-pairer report: stdin (-) can be given only once", file=sys.stderr)
        return 2
    report = Report(
        args.since,
        args.until,
        top_tools=args.top_tools,
        examples=args.examples,
        max_tool_rows=args.max_tool_rows,
    )
    problems: list[str] = []
    reader = OutputLines(args.max_line_bytes)
    try:
        build(input_files(args.inputs), report, problems, reader)
    except InputError as err:
        print(f"stream-pairer report: {err}", file=sys.stderr)
        return 2
    data = report.data()
    if report.output_records == 0 and (
        data["totals"].get("other_records") or data["totals"].get("malformed_lines")
    ):
        print(
            "stream-pairer report: the input holds no stream-pairer output record (no record has kind "
            "pair, orphan_call, orphan_result or dead_letter): give the files that `stream-pairer pair` "
            "wrote (pairs.jsonl, orphans.jsonl), not the raw log",
            file=sys.stderr,
        )
        return 1
    for p in problems:
        print(f"stream-pairer report: skipped {p}", file=sys.stderr)
    for w in reader.warnings():
        print(f"stream-pairer report: {w}", file=sys.stderr)
    if data["totals"]["malformed_lines"] > len(problems):
        print(
            f"stream-pairer report: {data['totals']['malformed_lines']} malformed lines in all",
            file=sys.stderr,
        )
    sys.stdout.write(render(data, args.format))
    return 0
