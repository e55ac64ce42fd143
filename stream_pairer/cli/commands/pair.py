"""`stream-pairer pair INPUT... --out DIR`: the whole job on files, no broker needed."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from stream_pairer.adapters.files import OutputWriter, check_inputs, check_output_dir, read_lines
from stream_pairer.cli.options import (
    add_engine_arguments,
    engine_config_from_args,
    format_config_from_args,
    tagger_from_args,
)
from stream_pairer.core.engine import Engine
from stream_pairer.core.native import NativePipeline, choose_engine
from stream_pairer.core.pipeline import Pipeline, Summary
from stream_pairer.core.vocab import OrphanReason
from stream_pairer.errors import InputError, OutputRefused
from stream_pairer.ops.gctune import tune_gc

NAME = "pair"
HELP = "pair tool calls with results in JSONL files (gzip ok, - for stdin): pairs, orphans, dead letters"
PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL file (gzip ok) or - for stdin")
    parser.add_argument("--out", "-o", required=True, type=Path, help="output directory")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress line, no summary table")
    parser.add_argument(
        "--summary-json", type=Path, default=None, help="also write the summary as JSON to this file"
    )
    parser.add_argument(
        "--engine",
        choices=["auto", "python", "native"],
        default="auto",
        help="pairing engine: the compiled core (native) or the Python one; auto takes the compiled "
        "core when it is built and --no-tagging is given, else Python (same output records)",
    )
    parser.add_argument(
        "--no-tagging",
        action="store_true",
        help="no failure-point tagging: records carry no outcome/failure fields",
    )
    add_engine_arguments(parser)


def run(args: argparse.Namespace) -> int:
    tune_gc()  # held state makes CPython's default GC thresholds cost a third of the loop
    pipeline: Pipeline | NativePipeline
    try:
        engine_config = engine_config_from_args(args)
        format_config = format_config_from_args(args)
        if choose_engine(args.engine, tagging=not args.no_tagging) == "native":
            pipeline = NativePipeline(engine_config, format_config)
        else:
            tagger = None if args.no_tagging else tagger_from_args(args)
            pipeline = Pipeline(Engine(engine_config, tagger=tagger), format_config)
    except (OSError, ValueError) as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2
    if args.inputs.count("-") > 1:
        print("stream-pairer pair: stdin (-) can be given only once", file=sys.stderr)
        return 2
    try:
        check_output_dir(args.out, args.inputs)
        check_inputs(args.inputs)  # all of them, before anything is written
    except InputError as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2 if isinstance(err, OutputRefused) else 1
    started = time.monotonic()
    progress = _Progress(None if args.quiet else sys.stderr, started, lambda: pipeline.summary)
    try:
        with OutputWriter(args.out, args.inputs) as writer:
            # Both engines take the same input; the compiled one returns records already encoded.
            write: Callable[[Any], None] = (
                writer.write_encoded if isinstance(pipeline, NativePipeline) else writer.write
            )
            feed = pipeline.feed
            for name in args.inputs:
                source_name = "<stdin>" if name == "-" else name
                for lineno, line in read_lines(name):
                    write(feed(line, {"file": source_name, "line": lineno}))
                    progress.tick()
            # End of a finite input: an open call will never get its result, and a held result's
            # call will never come; both are kept as orphans, never dropped.
            write(pipeline.flush(OrphanReason.END_OF_INPUT.value, result_reason=OrphanReason.NO_CALL.value))
    except InputError as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2 if isinstance(err, OutputRefused) else 1
    progress.done()
    elapsed = time.monotonic() - started
    if args.summary_json is not None:
        import orjson  # noqa: PLC0415 - only needed for this option

        body = pipeline.summary.as_dict() | {"seconds": round(elapsed, 3)}
        args.summary_json.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2))
    if not args.quiet:
        print(render_summary(pipeline.summary, elapsed, args.out))
    return 0


class _Progress:
    """A progress line on stderr for long inputs: only after the first PROGRESS_EVERY_S seconds."""

    def __init__(self, stream: TextIO | None, started: float, summary: Callable[[], Summary]) -> None:
        self.stream = stream
        self.summary = summary  # called only when a line is printed (the native one is assembled)
        self.started = started
        self.next_at = started + PROGRESS_EVERY_S
        self.shown = False
        self._n = 0

    def tick(self) -> None:
        self._n += 1
        if self.stream is None or self._n & 1023:
            return
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + PROGRESS_EVERY_S
        summary = self.summary()
        rate = summary.records / max(now - self.started, 1e-9)
        end = "\r" if self.stream.isatty() else "\n"
        self.stream.write(f"stream-pairer: {summary.records:,} records, {rate:,.0f}/s{end}")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.stream is not None and self.shown and self.stream.isatty():
            self.stream.write("\n")


def render_summary(s: Summary, elapsed: float, out: Path) -> str:
    rows: list[tuple[str, int | str]] = [
        ("records read", s.records),
        ("  skipped (no tool events)", s.skipped),
        ("  dead letters", sum(s.dead_letters.values())),
        ("events read", sum(s.events.values())),
    ]
    rows += [(f"  {t}", n) for t, n in sorted(s.events.items())]
    rows += [(f"  format {f}", n) for f, n in sorted(s.events_by_format.items())]
    rows.append(("pairs", sum(s.pairs.values())))
    rows += [(f"  match {m}", n) for m, n in sorted(s.pairs.items())]
    rows.append(("orphans", sum(s.orphans.values())))
    rows += [(f"  {k} {r}", n) for (k, r), n in sorted(s.orphans.items())]
    rows.append(("dead letters by reason", sum(s.dead_letters.values())))
    rows += [(f"  {r}", n) for r, n in sorted(s.dead_letters.items())]
    if s.outcomes:
        rows.append(("outcomes", ""))
        rows += [(f"  {o}", n) for o, n in sorted(s.outcomes.items())]
    if s.failures:
        rows.append(("failure points", sum(s.failures.values())))
        rows += [(f"  {f}", n) for f, n in sorted(s.failures.items())]
    acc = s.accounted()
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value:>10}" if value != "" else label for label, value in rows]
    lines.append(
        f"conservation: {acc['events_in']} events in, {acc['events_out']} in pairs/orphans"
        f" ({'ok' if acc['events_in'] == acc['events_out'] else 'MISMATCH'})"
    )
    lines.append(f"outputs in {out}/ ({elapsed:.2f} s, {s.records / max(elapsed, 1e-9):,.0f} records/s)")
    return "\n".join(lines)
