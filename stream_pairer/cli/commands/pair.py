"""`stream-pairer pair INPUT... --out DIR`: the whole job on files, no broker needed."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from stream_pairer.adapters.files import FileRecords, check_inputs
from stream_pairer.adapters.naming import named_inputs
from stream_pairer.adapters.outlock import OutputLock, stop_on_signals
from stream_pairer.adapters.outputs import (
    check_extra_output,
    check_output_dir,
    write_private_file,
)
from stream_pairer.adapters.sinks import FORMATS, STDOUT, Sink, check_out, file_records, open_sink
from stream_pairer.adapters.state import RunState, check_apart
from stream_pairer.adapters.stateopts import chain_options
from stream_pairer.adapters.walk import Walk, add_walk_arguments, skipped_line
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
from stream_pairer.errors import InputError, NativeUnavailable, OutputRefused, Stopped
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
        help="output directory, or - for stdout (every record as a JSON line with its kind; the "
        "summary goes to stderr)",
    )
    add_option(
        parser,
        "--output-format",
        choices=FORMATS,
        default="jsonl",
        help="jsonl files; typed parquet tables (zstd); or iceberg: append to the tables of --out "
        "CATALOG/NAMESPACE, a pyiceberg catalog (parquet and iceberg need the warehouse extra)",
    )
    add_option(
        parser,
        "--partition-by-day",
        action="store_true",
        default=False,
        help="parquet: Hive directories dt=YYYY-MM-DD by event day (dt=unknown without a time)",
    )
    add_option(
        parser,
        "--overwrite",
        action="store_true",
        default=False,
        help="replace the outputs of an existing, non-empty --out (refused without it)",
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
        "file, named by its path below its argument; a Codex session_meta id or a document's own "
        "id refines it)",
    )
    add_option(
        parser,
        "--stdin-name",
        help="the name of stdin (-) in the outputs (source.file, the conversation of records without "
        "one); give a file's name to get that file's pair_ids (default: -)",
    )
    add_option(
        parser,
        "--state",
        type=Path,
        help="incremental runs: carry held calls and results (and their clocks) from one run to the "
        "next in this directory, instead of ending them at the end of the input (README, Incremental "
        "runs)",
    )
    add_option(
        parser,
        "--flush",
        action="store_true",
        default=False,
        help="with --state: end everything still held at the end of this run (the final run)",
    )
    add_walk_arguments(parser)
    add_engine_arguments(parser)


def run(args: argparse.Namespace) -> int:
    tune_gc()  # held state makes CPython's default GC thresholds cost a third of the loop
    try:
        tagger = tagger_from_args(args)
        pairer = Pairer(engine_config_from_args(args), format_config_from_args(args), tagging=tagger)
    except (OSError, ValueError, NativeUnavailable) as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2
    if args.inputs.count("-") > 1:
        print("stream-pairer pair: stdin (-) can be given only once", file=sys.stderr)
        return 2
    walk = Walk(
        None if str(args.out) == STDOUT else args.out, follow_links=args.follow_links, state_dir=args.state
    )
    # The lock first: a second run into a busy --out is told who holds it, not that it is non-empty.
    lock = ExitStack()  # nothing held yet, if _out_lock refuses
    try:
        lock = _out_lock(args)
        named, state = _check_run(args, walk)
        inputs = [path for path, _ in named]
    except InputError as err:
        lock.close()
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2 if isinstance(err, OutputRefused) else 1
    started = time.monotonic()
    progress = _Progress(None if args.quiet else sys.stderr, started)
    try:
        with stop_on_signals(), lock:
            sink = open_sink(
                args.out, inputs, output_format=args.output_format, partition=args.partition_by_day
            )
            with sink as writer:
                _pair_inputs(pairer, named, args, writer, progress, state=state)
            if state is not None:
                state.save([name for _, name in named])
    except InputError as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2 if isinstance(err, OutputRefused) else 1
    except Stopped as stop:
        print(f"stream-pairer pair: stopped by {stop}: outputs left as they were", file=sys.stderr)
        return 128 + stop.signum
    finally:
        if state is not None:
            state.close()
    progress.done()
    elapsed = time.monotonic() - started
    crossings = pairer.crossings
    size = OutputSize(pairer.input_bytes, dict(writer.bytes_by_kind))
    summary = pairer.stats if state is None else state.uncount(pairer.stats)
    carried = None if state is None else (state.carried_in, state.carried_out)
    if args.summary_json is not None:
        extra = {
            "loop_cap_crossings": crossings,
            "history_ids_forgotten": pairer.pipeline.dedup.forgotten,
            "seconds": round(elapsed, 3),
            "inputs_skipped": dict(walk.skipped),
        }
        code = _write_summary_json(args.summary_json, summary, carried, extra, size)
        if code:
            return code
    if not args.quiet:  # beside the records when they go to stdout
        print(
            render_summary(summary, elapsed, args.out, crossings, size, carried=carried),
            file=sys.stderr if str(args.out) == STDOUT else sys.stdout,
        )
    events_in, events_out = conservation(summary, carried)
    if events_in != events_out:  # never expected: say so in the exit status, not only in the table
        print(
            f"stream-pairer pair: conservation MISMATCH: {events_in} events in, {events_out} in "
            "pairs/orphans (exit 3; `stream-pairer audit` names the events)",
            file=sys.stderr,
        )
        return 3
    return 0


def conservation(s: Summary, carried: tuple[int, int] | None) -> tuple[int, int]:
    """(events in, events in pairs/orphans) of a run, the events `--state` carried in and out
    counted on both sides."""
    acc = s.accounted()
    return (
        acc["events_in"] + (carried[0] if carried else 0),
        acc["events_out"] + (carried[1] if carried else 0),
    )


def _write_summary_json(
    path: Path,
    summary: Summary,
    carried: tuple[int, int] | None,
    extra: dict[str, Any],
    size: OutputSize,
) -> int:
    """`--summary-json`: the summary, what --state carried, `extra` and the sizes; 0, or the
    exit code of a refusal (printed as one line)."""
    import orjson  # noqa: PLC0415 - only needed for this option

    body = (
        summary.as_dict()
        | ({} if carried is None else {"events_carried_in": carried[0], "events_carried_out": carried[1]})
        | extra
        | size.as_dict()
    )
    try:
        write_private_file(path, orjson.dumps(body, option=orjson.OPT_INDENT_2))
    except InputError as err:
        print(f"stream-pairer pair: {err}", file=sys.stderr)
        return 2 if isinstance(err, OutputRefused) else 1
    return 0


def _check_run(args: argparse.Namespace, walk: Walk) -> tuple[list[tuple[str, str]], RunState | None]:
    """The named inputs and the --state of this run, every refusal (InputError) raised before
    anything is written: a typo in the last input name must not cost a long run."""
    named = named_inputs(args.inputs, stdin_name=args.stdin_name, walk=walk)
    inputs = [path for path, _ in named]
    check_output_dir(args.out, inputs)  # the more specific refusal first
    check_out(args.out, overwrite=args.overwrite, output_format=args.output_format)
    if args.summary_json is not None:
        check_extra_output(args.summary_json, "--summary-json", args.out, inputs)
    check_inputs(inputs)  # all of them, before anything is written
    state = _open_state(args, [name for _, name in named])
    if walk.skipped:
        print(f"stream-pairer pair: {skipped_line(walk.skipped)}", file=sys.stderr)
    return named, state


def _open_state(args: argparse.Namespace, names: list[str]) -> RunState | None:
    """`--state DIR` (checked against the inputs' names), or None; `--flush` needs it."""
    if args.state is None:
        if args.flush:
            raise OutputRefused("--flush ends what --state carries: give it with --state DIR")
        return None
    return RunState(args.state, names, chain_options(args))


def _pair_inputs(
    pairer: Pairer,
    named: list[tuple[str, str]],
    args: argparse.Namespace,
    writer: Sink,
    progress: _Progress,
    *,
    state: RunState | None,
) -> None:
    """Every input through the pairer into `writer` (`pairer.input_bytes` counts what was read).
    With `--state`, the previous run's held events are fed back first, and what is still held at
    the end is carried to the next run (adapters/state.py) unless `--flush`."""
    pipeline = pairer.pipeline
    out: Sink | _Observed = writer if state is None else _Observed(writer, state)
    if state is not None:
        out.write(state.restore(pipeline))
    reader = FileRecords if state is None else state.records
    for path, name in named:
        records = pairer.records_of(path, args.conversation_id, label=name, reader=reader)
        pairer.feed_records(records, sink=out, tick=progress.tick)
    if state is not None and not args.flush:
        state.carry(pipeline)
        return
    # End of a finite input: an open call will never get its result, and a held result's
    # call will never come; both are kept as orphans, never dropped.
    out.write(pairer.flush())


class _Observed:
    """A sink whose records `--state` sees first (it learns each conversation's clock from them).
    Its records come one by one: `RunState.records` takes blocks apart (it spools each record)."""

    def __init__(self, sink: Sink, state: RunState) -> None:
        self.sink = sink
        self.state = state

    def write(self, records: Sequence[bytes]) -> None:
        self.state.observe(records)
        self.sink.write(records)

    def write_files(
        self, pairs: bytes, orphans: bytes, dead_letters: bytes, sizes: tuple[int, int, int, int]
    ) -> None:
        self.state.observe(file_records(pairs, orphans, dead_letters))
        self.sink.write_files(pairs, orphans, dead_letters, sizes)


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
    *,
    carried: tuple[int, int] | None = None,
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
    if carried is not None:  # --state: events held across the run boundary count on both sides
        rows.append(("events carried in (--state)", carried[0]))
        rows.append(("events carried out (--state)", carried[1]))
    events_in, events_out = conservation(s, carried)
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value:>10}" if value != "" else label for label, value in rows]
    held = " (carried ones included)" if carried else ""
    lines.append(
        f"conservation: {events_in} events in, {events_out} in pairs/orphans{held}"
        f" ({'ok' if events_in == events_out else 'MISMATCH'})"
    )
    if s.events_by_format.get("discovered"):  # a guess must not read as a reader (formats/discover.py)
        lines.append(
            "note: `discovered` events are guesses in shapes no reader names (paired by id only); "
            "--map describes a shape"
        )
    where = "records to stdout" if str(out) == STDOUT else f"outputs in {out}/"
    lines.append(f"{where} ({elapsed:.2f} s, {s.records / max(elapsed, 1e-9):,.0f} records/s)")
    return "\n".join(lines)


def _out_lock(args: argparse.Namespace) -> ExitStack:
    """One run at a time writes an `--out` directory (outlock.py), and one run at a time carries a
    `--state` (two would both take its held events). Stdout has no directory to lock, an Iceberg
    catalog serialises its own commits (and a re-run appends nothing), and a file as `--out` is
    refused by check_output_dir (exit 2)."""
    stack = ExitStack()
    if args.state is not None and not (str(args.out) == STDOUT or args.output_format == "iceberg"):
        check_apart(args.out, args.state)
    try:
        if not (str(args.out) == STDOUT or args.output_format == "iceberg" or args.out.is_file()):
            stack.enter_context(OutputLock(args.out))
        if args.state is not None:
            stack.enter_context(OutputLock(args.state, "--state"))
    except BaseException:
        stack.close()
        raise
    return stack
