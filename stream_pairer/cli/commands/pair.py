"""`stream-pairer pair INPUT... --out DIR`: the whole job on files, no broker needed."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from stream_pairer.adapters.files import expand_inputs
from stream_pairer.adapters.outputs import (
    OutputWriter,
    check_extra_output,
    check_inputs,
    check_output_dir,
    write_private_file,
)
from stream_pairer.api import Pairer
from stream_pairer.cli.options import (
    add_engine_arguments,
    add_option,
    engine_config_from_args,
    env_name,
    format_config_from_args,
    tagger_from_args,
)
from stream_pairer.core.pipeline import Summary
from stream_pairer.errors import InputError, NativeUnavailable, OutputRefused
from stream_pairer.ops.gctune import tune_gc

NAME = "pair"
HELP = (
    "pair tool calls with results in log files (JSONL or JSON documents, gzip ok; directories, "
    "globs, - for stdin): pairs, orphans, dead letters"
)
PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="JSONL or JSON document file (gzip ok), a directory (walked recursively), a glob, "
        "or - for stdin",
    )
    add_option(
        parser,
        "--out",
        short="-o",
        type=Path,
        required=os.environ.get(env_name("--out")) is None,
        help="output directory",
    )
    add_option(
        parser,
        "--quiet",
        short="-q",
        action="store_true",
        default=False,
        help="no progress line, no summary table",
    )
    add_option(parser, "--summary-json", type=Path, help="also write the summary as JSON to this file")
    add_option(
        parser,
        "--conversation-id",
        help="conversation id of the records that carry none (default: one conversation per input "
        "file, named by its path; a Codex session_meta id or a document's own id refines it)",
    )
    add_engine_arguments(parser)


def run(args: argparse.Namespace) -> int:
    tune_gc()  # held state makes CPython's default GC thresholds cost a third of the loop
    try:
        tagger = tagger_from_args(args)
        format_config = format_config_from_args(args)
        pairer = Pairer(engine_config_from_args(args), format_config, tagging=tagger)
    except (OSError, ValueError, NativeUnavailable) as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2
    if args.inputs.count("-") > 1:
        print("stream-pairer pair: stdin (-) can be given only once", file=sys.stderr)
        return 2
    try:
        inputs = expand_inputs(args.inputs, skip_dir=args.out)
        check_output_dir(args.out, inputs)
        if args.summary_json is not None:
            check_extra_output(args.summary_json, "--summary-json", args.out, inputs)
        check_inputs(inputs)  # all of them, before anything is written
    except InputError as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2 if isinstance(err, OutputRefused) else 1
    started = time.monotonic()
    progress = _Progress(None if args.quiet else sys.stderr, started)
    try:
        with OutputWriter(args.out, inputs) as writer:
            for name in inputs:
                pairer.feed_file(name, conversation_id=args.conversation_id, sink=writer, tick=progress.tick)
            # End of a finite input: an open call will never get its result, and a held result's
            # call will never come; both are kept as orphans, never dropped.
            writer.write(pairer.flush())
    except InputError as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2 if isinstance(err, OutputRefused) else 1
    progress.done()
    elapsed = time.monotonic() - started
    crossings = pairer.crossings
    summary = pairer.stats
    size = OutputSize(pairer.input_bytes, dict(writer.bytes_by_kind))
    if args.summary_json is not None:
        import orjson  # noqa: PLC0415 - only needed for this option

        body = (
            summary.as_dict()
            | {
                "loop_cap_crossings": crossings,
                "history_ids_forgotten": pairer.pipeline.dedup.forgotten,
                "seconds": round(elapsed, 3),
            }
            | size.as_dict()
        )
        try:
            write_private_file(args.summary_json, orjson.dumps(body, option=orjson.OPT_INDENT_2))
        except InputError as err:
            print(f"stream-pairer pair: {err}", file=sys.stderr)
            return 2 if isinstance(err, OutputRefused) else 1
    if not args.quiet:
        print(render_summary(summary, elapsed, args.out, crossings, size))
    return 0


@dataclass(frozen=True, slots=True)
class OutputSize:
    """Output bytes per input byte of one run (README, Output size). Both sides count record bytes
    as the pipeline sees them: an input line without its line break (after gunzip; an item of a
    JSON document as re-encoded for the pipeline; an oversize line by its full length), an output
    record without its line break. The sidecar counts the same way (its Prometheus counters
    stream_pairer_input_bytes_total and stream_pairer_output_bytes_total)."""

    input_bytes: int
    output_bytes_by_kind: dict[str, int]

    @property
    def output_bytes(self) -> int:
        return sum(self.output_bytes_by_kind.values())

    @property
    def ratio(self) -> float | None:
        """Output bytes per input byte; None for an empty input."""
        return self.output_bytes / self.input_bytes if self.input_bytes else None

    def as_dict(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "output_bytes_by_kind": self.output_bytes_by_kind,
            "output_bytes_per_input_byte": None if ratio is None else round(ratio, 4),
        }


class _Progress:
    """A progress line on stderr for long inputs: only after the first PROGRESS_EVERY_S seconds."""

    def __init__(self, stream: TextIO | None, started: float) -> None:
        self.stream = stream
        self.started = started
        self.next_at = started + PROGRESS_EVERY_S
        self.shown = False
        self._n = 0

    def tick(self, n: int = 1) -> None:
        """`n` more records read (fed or rejected): the count is the ticks themselves, so the
        line never reads the pipeline's summary. Checked for time every ~1024 records."""
        before = self._n
        self._n += n
        if self.stream is None or (before >> 10) == (self._n >> 10):
            return
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + PROGRESS_EVERY_S
        rate = self._n / max(now - self.started, 1e-9)
        end = "\r" if self.stream.isatty() else "\n"
        self.stream.write(f"stream-pairer: {self._n:,} records, {rate:,.0f}/s{end}")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.stream is not None and self.shown and self.stream.isatty():
            self.stream.write("\n")


def render_summary(
    s: Summary,
    elapsed: float,
    out: Path,
    crossings: dict[str, int] | None = None,
    size: OutputSize | None = None,
) -> str:
    rows: list[tuple[str, int | str]] = [
        ("records read", s.records),
        ("  skipped (no tool events)", s.skipped),
    ]
    rows += [(f"    unknown type {t}", n) for t, n in sorted(s.skipped_types.items())]
    rows += [
        ("  dead letters", sum(s.dead_letters.values())),
        ("events read", sum(s.events.values())),
    ]
    if s.duplicate_copies:
        rows.append(("  repeated copies (not events)", s.duplicate_copies))
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
    if crossings:
        rows.append(("loop cap crossings", sum(crossings.values())))
        rows += [(f"  {c}", n) for c, n in sorted(crossings.items())]
    if size is not None:
        rows.append(("input bytes", size.input_bytes))
        rows.append(("output bytes", size.output_bytes))
        rows += [(f"  {k}", n) for k, n in size.output_bytes_by_kind.items() if n]
        ratio = size.ratio
        rows.append(("output bytes per input byte", "-" if ratio is None else f"{ratio:.2f}"))
    acc = s.accounted()
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value:>10}" if value != "" else label for label, value in rows]
    lines.append(
        f"conservation: {acc['events_in']} events in, {acc['events_out']} in pairs/orphans"
        f" ({'ok' if acc['events_in'] == acc['events_out'] else 'MISMATCH'})"
    )
    lines.append(f"outputs in {out}/ ({elapsed:.2f} s, {s.records / max(elapsed, 1e-9):,.0f} records/s)")
    return "\n".join(lines)
