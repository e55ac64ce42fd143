"""`stream-pairer audit`: check conservation between the inputs and the outputs of a run.

Files:  stream-pairer audit --input in1.jsonl in2.jsonl --outputs out/
Topics: stream-pairer audit --bootstrap-servers HOST:PORT --input-topic T [--outputs T.pairs ...]

Exit status: 0 when every input event is accounted for exactly once (doubles allowed unless
--exactly-once), 1 when the audit finds a problem, 2 when the inputs or outputs cannot be read.
The pairing options that change what a record parses to (conversation fields, record size limit)
must be the ones the run used; they read the same STREAM_PAIRER_* environment variables.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import orjson

from stream_pairer.adapters.files import (
    FileRecords,
    Oversize,
    check_inputs,
    read_lines,
)
from stream_pairer.adapters.kafka.security import PLAINTEXT, KafkaSecurity, probe
from stream_pairer.adapters.naming import named_inputs
from stream_pairer.adapters.outputs import OUTPUT_FILES
from stream_pairer.adapters.walk import Walk, add_walk_arguments
from stream_pairer.adapters.walk import probe as probe_file
from stream_pairer.analysis.audit import Auditor, AuditReport, render
from stream_pairer.analysis.outputs import DEFAULT_MAX_LINE_BYTES
from stream_pairer.cli.kafka_options import add_security_arguments, security_from_args
from stream_pairer.cli.options import (
    add_map_option,
    add_option,
    mapping_from_args,
    positive_float,
    positive_int,
)
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.errors import AuditReadError, InputError, SidecarError
from stream_pairer.stream.partition import DEAD_LETTER_TOPIC, ORPHANS_TOPIC, PAIRS_TOPIC

NAME = "audit"
HELP = "check that every input event is in exactly one output record (files or Kafka topics)"
PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        "-i",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="input JSONL file(s) of the run (gzip ok), named as the run named them",
    )
    parser.add_argument(
        "--outputs",
        "-o",
        nargs="+",
        action="extend",
        default=[],
        metavar="OUT",
        help="files mode: the output directory or output files; topics mode: output "
        "topics, with {topic} expanded for each input topic as `run` does "
        f"(default {PAIRS_TOPIC} {ORPHANS_TOPIC} {DEAD_LETTER_TOPIC})",
    )
    add_option(parser, "--bootstrap-servers", help="Kafka bootstrap servers: audit topics instead of files")
    add_option(parser, "--input-topic", action="append", help="input topic of the run (repeatable)")
    add_option(
        parser,
        "--input-isolation",
        default="read_committed",
        choices=("read_committed", "read_uncommitted"),
        help="isolation level used to read the input topic (the sidecar's own)",
    )
    add_option(
        parser,
        "--exactly-once",
        action="store_true",
        default=False,
        help="the run promised exactly-once: duplicates fail the audit",
    )
    add_option(
        parser,
        "--conversation-field",
        action="append",
        default=None,
        help="conversation id field(s) the run used "
        f"(default: {', '.join(DEFAULT_CONFIG.conversation_fields)})",
    )
    add_map_option(parser)
    add_option(
        parser,
        "--max-record-bytes",
        type=positive_int,
        default=DEFAULT_CONFIG.max_record_bytes,
        help="the run's record size limit (larger records are dead letters)",
    )
    add_option(
        parser,
        "--max-id-bytes",
        type=positive_int,
        default=DEFAULT_CONFIG.max_id_bytes,
        help="the run's id length limit (records with longer ids are dead letters)",
    )
    add_option(
        parser,
        "--max-history-ids",
        type=positive_int,
        default=DEFAULT_CONFIG.max_history_ids,
        help="the run's per-conversation history id limit (wire logs, OTel)",
    )
    add_option(
        parser,
        "--max-history-conversations",
        type=positive_int,
        default=DEFAULT_CONFIG.max_history_conversations,
        help="the run's history conversation limit (wire logs, OTel)",
    )
    add_option(
        parser,
        "--conversation-id",
        help="the conversation id the run gave records without one (files mode; default: the "
        "file's name, README File mode)",
    )
    add_option(
        parser,
        "--audit-timeout",
        type=positive_float,
        default=300.0,
        help="seconds allowed to read the topics up to their end offsets",
    )
    add_walk_arguments(parser)
    add_security_arguments(parser, producer=False)
    parser.add_argument(
        "--max-line-bytes",
        type=positive_int,
        default=DEFAULT_MAX_LINE_BYTES,
        help="files mode: an output line longer than this stops the audit with one line, unread",
    )
    parser.add_argument("--show", type=int, default=20, help="problem positions to print (default: 20)")
    parser.add_argument("--json", type=Path, default=None, help="also write the full report as JSON here")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")


def run(args: argparse.Namespace) -> int:
    fields = tuple(args.conversation_field) if args.conversation_field else DEFAULT_CONFIG.conversation_fields
    try:
        mapping = mapping_from_args(args)
    except (OSError, ValueError) as err:
        return _usage(str(err))
    config = FormatConfig(
        mapping=mapping,
        conversation_fields=fields,
        max_record_bytes=args.max_record_bytes,
        max_history_ids=args.max_history_ids,
        max_history_conversations=args.max_history_conversations,
        max_id_bytes=args.max_id_bytes,
    )
    auditor = Auditor(config, exactly_once=args.exactly_once)
    started = time.monotonic()
    try:
        if args.bootstrap_servers:
            if not args.input_topic:
                return _usage("--bootstrap-servers needs --input-topic")
            outputs = expand_topics(
                args.outputs or [PAIRS_TOPIC, ORPHANS_TOPIC, DEAD_LETTER_TOPIC], args.input_topic
            )
            report = asyncio.run(
                audit_topics(
                    auditor,
                    args.bootstrap_servers,
                    args.input_topic,
                    outputs,
                    input_isolation=args.input_isolation,
                    timeout_s=args.audit_timeout,
                    progress=None if args.quiet else sys.stderr,
                    security=security_from_args(args),
                )
            )
        else:
            if not args.input or not args.outputs:
                return _usage("give --input FILE... and --outputs DIR|FILE... (or --bootstrap-servers)")
            if "-" in args.input:
                return _usage("stdin cannot be audited: the audit must re-read the input")
            report = audit_files(
                auditor,
                args.input,
                [Path(o) for o in args.outputs],
                conversation_id=args.conversation_id,
                progress=None if args.quiet else sys.stderr,
                max_line_bytes=args.max_line_bytes,
                follow_links=args.follow_links,
            )
    except (InputError, AuditReadError, SidecarError) as err:
        print(f"stream-pairer audit: {err}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - started
    if args.json is not None:
        args.json.write_bytes(
            orjson.dumps(report.as_dict() | {"seconds": round(elapsed, 3)}, option=orjson.OPT_INDENT_2)
        )
    if args.quiet:
        print(render(report, 0).splitlines()[-1])
    else:
        print(render(report, args.show))
        print(f"({elapsed:.2f} s)")
    return 0 if report.ok else 1


def expand_topics(templates: list[str], input_topics: list[str]) -> list[str]:
    """Output topic names as `run` derives them: a `{topic}` template names one topic per input
    topic, so the audit accepts the very values given to `run --pairs-topic ...`. Order-preserving
    and without repeats (two templates may name the same topic)."""
    names: dict[str, None] = {}
    for template in templates:
        for topic in input_topics if "{topic}" in template else [template]:
            names[template.replace("{topic}", topic)] = None
    return list(names)


def _usage(msg: str) -> int:
    print(f"stream-pairer audit: {msg}", file=sys.stderr)
    return 2


# ---------------------------------------------------------------------------------------------- files


def audit_files(
    auditor: Auditor,
    inputs: list[str],
    outputs: list[Path],
    *,
    conversation_id: str | None = None,
    progress: TextIO | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    follow_links: bool = False,
) -> AuditReport:
    """Inputs read exactly as `pair` read them (same files in the same order, same documents,
    same conversation fallbacks), then every output line."""
    config = auditor.format_config
    tick = _AuditProgress(progress)
    out_dir = next((o for o in outputs if o.is_dir()), None)  # as `pair` skipped it in a walk
    named = named_inputs(inputs, walk=Walk(out_dir, follow_links=follow_links))
    check_inputs([path for path, _ in named])  # devices, /proc files: one line before reading, as `pair` does
    for path in output_files(outputs):
        probe_file(str(path))
    for input_path, name in named:
        stream = auditor.add_stream(("file", name), name, 1)  # as `pair` wrote it in source.file
        records = FileRecords(
            input_path,
            max_bytes=config.max_record_bytes,
            conversation_id=conversation_id,
            conversation_fields=config.conversation_fields,
            label=name,
        )
        for source, raw, key in records:
            if isinstance(raw, Oversize):
                auditor.add_rejected(stream, source["line"], raw.reason)
            else:
                auditor.add_input(stream, source["line"], raw, source, key)
                if auditor.session_id is not None and records.forced is None:
                    records.set_session(auditor.session_id)
            tick.tick("input records")

    def too_long(lineno: int, item: Oversize, path: Path = Path()) -> None:
        raise InputError(
            f"{path}:{lineno} is a line of {item.size} bytes, more than {max_line_bytes}: not read "
            "(raise --max-line-bytes to audit it)"
        )

    for path in output_files(outputs):
        for lineno, line in read_lines(str(path), max_line_bytes, functools.partial(too_long, path=path)):
            auditor.add_output_line(line, f"{path}:{lineno}")
            tick.tick("output records")
    tick.done()
    return auditor.finish()


class _AuditProgress:
    """A progress line on stderr for long audits, at most every PROGRESS_EVERY_S seconds."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.started = time.monotonic()
        self.next_at = self.started + PROGRESS_EVERY_S
        self.n = 0
        self.shown = False

    def tick(self, what: str) -> None:
        self.n += 1
        if self.stream is None or self.n & 1023:
            return
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + PROGRESS_EVERY_S
        end = "\r" if self.stream.isatty() else "\n"
        self.stream.write(
            f"stream-pairer audit: {self.n:,} records read ({what}), {now - self.started:.0f} s{end}"
        )
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.stream is not None and self.shown and self.stream.isatty():
            self.stream.write("\n")


def output_files(outputs: list[Path]) -> list[Path]:
    """Output files as given; a directory stands for the output files of `pair --out DIR` in it."""
    files: list[Path] = []
    for out in outputs:
        if out.is_dir():
            found = [out / n for n in sorted(set(OUTPUT_FILES.values())) if (out / n).exists()]
            if not found:
                raise InputError(f"{out} holds none of {', '.join(sorted(set(OUTPUT_FILES.values())))}")
            files += found
        elif out.exists():
            files.append(out)
        else:
            raise InputError(f"no such output file or directory: {out}")
    return files


# ---------------------------------------------------------------------------------------------- topics


async def audit_topics(
    auditor: Auditor,
    bootstrap: str,
    input_topics: list[str],
    output_topics: list[str],
    *,
    input_isolation: str = "read_committed",
    timeout_s: float = 300.0,
    progress: TextIO | None = None,
    security: KafkaSecurity = PLAINTEXT,
) -> AuditReport:
    """Read the input topics, then the output topics (read_committed: only what a transaction
    committed, as any downstream consumer sees it), each up to its end offsets taken at start."""
    deadline = time.monotonic() + timeout_s
    await probe(bootstrap, security)  # a TLS/SASL failure is named here, not "cannot reach Kafka"
    tick = _AuditProgress(progress)

    def on_input(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        stream = auditor.streams[("kafka", topic, partition)]
        source = {"topic": topic, "partition": partition, "offset": offset}
        text_key = key.decode("utf-8", "replace") if key is not None else None
        auditor.add_input(stream, offset, value if value is not None else b"", source, text_key)
        tick.tick("input records")

    def on_input_partition(topic: str, partition: int, begin: int, end: int) -> None:
        auditor.add_stream(("kafka", topic, partition), f"{topic}[{partition}]", begin, end)

    def on_output(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        auditor.add_output_line(value or b"", f"{topic}[{partition}]@{offset}")
        tick.tick("output records")

    await read_topics(
        bootstrap,
        input_topics,
        input_isolation,
        on_input,
        deadline,
        on_partition=on_input_partition,
        required=True,
        security=security,
    )
    await read_topics(
        bootstrap, output_topics, "read_committed", on_output, deadline, required=False, security=security
    )
    tick.done()
    return auditor.finish()


OnRecord = Callable[[str, int, int, bytes | None, bytes | None], None]


async def read_topics(
    bootstrap: str,
    topics: list[str],
    isolation: str,
    on_record: OnRecord,
    deadline: float,
    *,
    on_partition: Callable[[str, int, int, int], None] | None = None,
    required: bool = True,
    security: KafkaSecurity = PLAINTEXT,
) -> None:
    """Every record of every partition of `topics` from the beginning up to the end offsets taken
    now, in offset order per partition. No consumer group: nothing is committed, nothing rebalances.
    A missing topic is an error when `required`, else empty (e.g. no dead letter was ever written)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: PLC0415 - files mode needs no Kafka
    from aiokafka.errors import KafkaError  # noqa: PLC0415

    partitions = await _partitions(bootstrap, topics, required, deadline, security)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
        **security.client_kwargs(),
        **security.consumer_config,
    )
    try:
        await asyncio.wait_for(consumer.start(), max(1.0, deadline - time.monotonic()))
        tps = [TopicPartition(t, p) for t, p in partitions]
        if not tps:
            return
        consumer.assign(tps)
        begin = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        for tp in tps:
            if on_partition is not None:
                on_partition(tp.topic, tp.partition, begin[tp], end[tp])
            consumer.seek(tp, begin[tp])
        remaining = {tp for tp in tps if end[tp] > begin[tp]}
        while remaining:
            if time.monotonic() > deadline:
                left = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(remaining))
                raise AuditReadError(f"timed out reading to the end offsets of {left}")
            batch = await consumer.getmany(*remaining, timeout_ms=500, max_records=20_000)
            for tp, msgs in batch.items():
                stop = end[tp]
                for m in msgs:
                    if m.offset >= stop:
                        break
                    on_record(tp.topic, tp.partition, m.offset, m.key, m.value)
            # Positions, not message offsets: a partition may end in transaction markers.
            for tp in list(remaining):
                if await consumer.position(tp) >= end[tp]:
                    remaining.discard(tp)
                    consumer.pause(tp)
    except KafkaError as err:
        raise AuditReadError(f"cannot read {', '.join(topics)} from {bootstrap}: {err}") from err
    except TimeoutError as err:
        raise AuditReadError(f"cannot reach Kafka at {bootstrap}") from err
    finally:
        await consumer.stop()


async def _partitions(
    bootstrap: str, topics: list[str], required: bool, deadline: float, security: KafkaSecurity = PLAINTEXT
) -> list[tuple[str, int]]:
    """(topic, partition) of every existing topic in `topics`, from the admin client: a consumer
    only knows the partitions of topics it subscribed to, and a metadata request naming a missing
    topic may auto-create it, which an audit must never do (all topics are listed first)."""
    from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415
    from aiokafka.errors import KafkaError  # noqa: PLC0415

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=30_000, **security.client_kwargs()
    )
    try:
        await asyncio.wait_for(admin.start(), max(1.0, deadline - time.monotonic()))
        existing = set(await admin.list_topics())
        missing = [t for t in topics if t not in existing]
        if missing and required:
            raise AuditReadError(f"topic {missing[0]!r} does not exist on {bootstrap}")
        present = [t for t in topics if t in existing]
        described = await admin.describe_topics(present) if present else []
    except KafkaError as err:
        raise AuditReadError(f"cannot list the topics of {bootstrap}: {err}") from err
    except TimeoutError as err:
        raise AuditReadError(f"cannot reach Kafka at {bootstrap}") from err
    finally:
        await admin.close()
    out: list[tuple[str, int]] = []
    for meta in described:
        if meta["error_code"] != 0:
            raise AuditReadError(f"topic {meta['topic']!r}: metadata error code {meta['error_code']}")
        out += sorted((meta["topic"], p["partition"]) for p in meta["partitions"])
    return out
