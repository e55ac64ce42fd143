"""`stream-pairer run --bootstrap-servers H:P --input-topic T --group-id G`: the Kafka sidecar.

Every option also comes from `STREAM_PAIRER_<OPTION>` (e.g. STREAM_PAIRER_BOOTSTRAP_SERVERS,
STREAM_PAIRER_INPUT_TOPIC=a,b), so the container is configured by its Pod spec alone. SIGTERM and
SIGINT stop it gracefully (finish the batch, make outputs durable, commit, exit 0 within
--shutdown-timeout); the HTTP endpoint serves /metrics, /healthz and /readyz.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from typing import Any

from stream_pairer.adapters.kafka.logs import LOG_FORMATS, asyncio_exception_handler, log_level, setup_logging
from stream_pairer.adapters.kafka.sidecar import Sidecar, SidecarConfig
from stream_pairer.cli.kafka_options import add_security_arguments, security_from_args
from stream_pairer.cli.options import (
    add_engine_arguments,
    add_option,
    engine_config_from_args,
    env_name,
    format_config_from_args,
    non_negative_float,
    positive_float,
    positive_int,
    tagger_from_args,
)
from stream_pairer.errors import ConfigError, NativeUnavailable
from stream_pairer.ops.gctune import tune_gc

NAME = "run"
HELP = "run as a Kafka sidecar: consume tool events, produce pairs, orphans and dead letters"

log = logging.getLogger("stream_pairer.run")


def _default(name: str) -> Any:
    """The default of a SidecarConfig field: options read it from there, so it is written once."""
    return SidecarConfig.__dataclass_fields__[name].default


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number (0-65535), got {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port: {value}")
    return port


def _log_level(value: str) -> str:
    try:
        return log_level(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def add_arguments(parser: argparse.ArgumentParser) -> None:
    k = parser.add_argument_group("Kafka")
    add_option(k, "--bootstrap-servers", help="Kafka bootstrap servers, host:port[,host:port] (required)")
    env = env_name("--input-topic")
    k.add_argument(
        "--input-topic", action="append", default=None,
        help=f"input topic; repeat for several (required) [env {env}, comma-separated]",
    )  # fmt: skip
    add_option(k, "--group-id", help="consumer group id (required)")
    add_option(
        k,
        "--exactly-once",
        action="store_true",
        default=_default("exactly_once"),
        help="transactional outputs + offsets: a replay emits nothing twice (consumers: read_committed)",
    )
    add_option(
        k, "--pairs-topic", default=_default("pairs_topic"), help="pairs output topic ({topic} = input topic)"
    )
    add_option(k, "--orphans-topic", default=_default("orphans_topic"), help="orphans output topic")
    add_option(
        k, "--dead-letter-topic", default=_default("dead_letter_topic"), help="dead-letter output topic"
    )
    add_option(
        k,
        "--checkpoint-topic",
        default=_default("checkpoint_topic"),
        help="internal compacted topic of replay checkpoints ({topic}, {group})",
    )
    add_option(
        k,
        "--repartition",
        action="store_true",
        default=_default("repartition"),
        help="input not keyed by conversation: first re-key it to an internal topic, then pair",
    )
    add_option(
        k,
        "--repartition-topic",
        default=_default("repartition_topic"),
        help="--repartition: the internal re-keyed topic ({topic} = input topic)",
    )
    add_option(
        k,
        "--no-create-topics",
        action="store_true",
        default=not _default("create_topics"),
        help="do not create missing output/checkpoint topics (fail and retry instead)",
    )
    add_option(
        k,
        "--replication-factor",
        type=int,
        default=_default("replication_factor"),
        help="replication factor of the topics this command creates (-1: the broker's default)",
    )
    add_option(
        k, "--instance-id", default=socket.gethostname(), help="this instance's name in client ids and logs"
    )
    add_option(
        k,
        "--transactional-id-prefix",
        default=_default("transactional_id_prefix"),
        help="exactly-once: transactional ids are <prefix>.<group>.<topic>.<partition>",
    )
    add_option(
        k,
        "--auto-offset-reset",
        default=_default("auto_offset_reset"),
        choices=["earliest", "latest"],
        help="where a partition without a committed offset starts",
    )
    add_option(
        k,
        "--isolation-level",
        default=_default("isolation_level"),
        choices=["read_committed", "read_uncommitted"],
        help="isolation level for reading the input topics",
    )
    add_option(
        k,
        "--max-records",
        type=positive_int,
        default=_default("max_records"),
        help="records per fetched batch",
    )
    add_option(
        k,
        "--poll-timeout",
        type=positive_float,
        default=_default("poll_timeout_s"),
        help="seconds a fetch waits for data",
    )
    add_option(
        k,
        "--prefetch-backoff",
        type=non_negative_float,
        default=_default("prefetch_backoff_s"),
        help=(
            "seconds one partition's fetched but not yet paired records may hold back the fetches of "
            "the other partitions on its broker (aiokafka's prefetch_backoff); lower it only when "
            "some partitions stay buffered (--max-records reached every turn): 0 splits the fetches "
            "and measured slower at 5k records/s"
        ),
    )
    add_option(
        k,
        "--no-fetch-ahead",
        action="store_true",
        default=not _default("fetch_ahead"),
        help=(
            "send the next fetch request only when a loop turn has ended, not as it starts: ~8%% less "
            "CPU per record at full speed, at the price of the fetch round trip on top of every turn"
        ),
    )
    add_option(
        k,
        "--commit-interval",
        type=non_negative_float,
        default=_default("commit_interval_s"),
        help=(
            "seconds between the starts of two commits (default: 1 at-least-once, 0.05 exactly-once; "
            "0 = as soon as the previous one ends); commits run beside the consume loop, one at a time"
        ),
    )
    add_option(
        k,
        "--tick-interval",
        type=positive_float,
        default=_default("tick_interval_s"),
        help="seconds between wall-clock ticks that advance each caught-up partition's processing time "
        "(what times out the calls of conversations that went quiet)",
    )
    add_option(
        k,
        "--heap-trim-interval",
        type=non_negative_float,
        default=_default("heap_trim_interval_s"),
        help="seconds between returns of the C heap's free pages to the system (glibc malloc_trim; "
        "keeps RSS from creeping with fragmentation); 0 never",
    )
    add_option(
        k,
        "--session-timeout",
        type=positive_float,
        default=_default("session_timeout_ms") / 1000,
        help="consumer group session timeout, seconds",
    )
    add_option(
        k,
        "--request-timeout",
        type=positive_float,
        default=_default("request_timeout_ms") / 1000,
        help="Kafka request timeout, seconds",
    )
    add_option(
        k,
        "--max-output-bytes",
        type=positive_int,
        default=_default("max_output_bytes"),
        help="an output record larger than this loses its payloads (payload_truncated: true)",
    )
    s = parser.add_argument_group("lifecycle and HTTP")
    add_option(
        s,
        "--shutdown-timeout",
        type=positive_float,
        default=_default("shutdown_timeout_s"),
        help="seconds a SIGTERM shutdown may take (finish batch, deliver, commit)",
    )
    add_option(
        s,
        "--flush-on-shutdown",
        action="store_true",
        default=_default("flush_on_shutdown"),
        help="emit held calls/results as orphans (reason shutdown) on stop: for decommissioning",
    )
    add_option(
        s,
        "--commit-held-back",
        action="store_true",
        default=not _default("commit_processed"),
        help="keep each partition's committed offset at its oldest held event (the rule before issue "
        "25; external lag tools then count held calls as lag). Default: commit what was processed; "
        "the held events' positions are in the checkpoint, and a restart replays them from there",
    )
    add_option(
        s,
        "--http-host",
        default=_default("http_host"),
        help="address the /metrics /healthz /readyz endpoint binds: 0.0.0.0 (all interfaces) by "
        "default because the kubelet's probes and Prometheus reach a Pod on its IP; 127.0.0.1 when "
        "only processes on the same host (or Pod) may read it",
    )
    add_option(
        s,
        "--http-port",
        type=_port,
        default=_default("http_port"),
        help="port of that endpoint (0: an ephemeral port)",
    )
    add_option(s, "--no-http", action="store_true", default=False, help="no HTTP endpoint")
    add_option(
        s,
        "--ready-timeout",
        type=positive_float,
        default=_default("ready_timeout_s"),
        help="/readyz fails when no fetch response came for this many seconds",
    )
    add_option(
        s,
        "--backoff-max",
        type=positive_float,
        default=_default("backoff_max_s"),
        help="cap of the reconnect backoff, seconds",
    )
    add_option(s, "--log-level", type=_log_level, default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    add_option(
        s,
        "--log-format",
        default="text",
        choices=list(LOG_FORMATS),
        help="text, or json: one JSON object per line (ts, level, logger, message, then named fields)",
    )
    add_security_arguments(parser)
    add_engine_arguments(parser)


def config_from_args(args: argparse.Namespace) -> SidecarConfig:
    topics = list(args.input_topic or [])
    if not topics:
        topics = [t for t in os.environ.get(env_name("--input-topic"), "").split(",") if t.strip()]
    missing = [
        flag
        for flag, value in (
            ("--bootstrap-servers", args.bootstrap_servers),
            ("--input-topic", topics),
            ("--group-id", args.group_id),
        )
        if not value
    ]
    if missing:
        raise ValueError(f"missing {', '.join(missing)} (flags or {', '.join(env_name(m) for m in missing)})")
    check_topic_loops(args, topics)
    return SidecarConfig(
        bootstrap_servers=args.bootstrap_servers,
        input_topics=tuple(t.strip() for t in topics),
        group_id=args.group_id,
        exactly_once=args.exactly_once,
        pairs_topic=args.pairs_topic,
        orphans_topic=args.orphans_topic,
        dead_letter_topic=args.dead_letter_topic,
        checkpoint_topic=args.checkpoint_topic,
        repartition=args.repartition,
        repartition_topic=args.repartition_topic,
        create_topics=not args.no_create_topics,
        replication_factor=args.replication_factor,
        transactional_id_prefix=args.transactional_id_prefix,
        client_id=f"stream-pairer-{args.instance_id}",
        engine=engine_config_from_args(args),
        formats=format_config_from_args(args),
        tagger=tagger_from_args(args),
        max_records=args.max_records,
        poll_timeout_s=args.poll_timeout,
        prefetch_backoff_s=args.prefetch_backoff,
        fetch_ahead=not args.no_fetch_ahead,
        tick_interval_s=args.tick_interval,
        heap_trim_interval_s=args.heap_trim_interval,
        commit_interval_s=args.commit_interval,
        shutdown_timeout_s=args.shutdown_timeout,
        flush_on_shutdown=args.flush_on_shutdown,
        commit_processed=not args.commit_held_back,
        auto_offset_reset=args.auto_offset_reset,
        isolation_level=args.isolation_level,
        session_timeout_ms=int(args.session_timeout * 1000),
        heartbeat_interval_ms=max(int(args.session_timeout * 1000) // 10, 100),
        request_timeout_ms=int(args.request_timeout * 1000),
        max_output_bytes=args.max_output_bytes,
        http_host=args.http_host,
        http_port=None if args.no_http else args.http_port,
        ready_timeout_s=args.ready_timeout,
        backoff_max_s=args.backoff_max,
        security=security_from_args(args),
    )


def _expand(template: str, topic: str, group: str) -> str | None:
    """A topic template as the sidecar expands it; None for one it cannot expand (an unknown
    placeholder), which the template validation refuses with its own message."""
    try:
        return template.format(topic=topic, group=group)
    except (KeyError, IndexError, ValueError, AttributeError):
        return None


def check_topic_loops(args: argparse.Namespace, topics: list[str]) -> None:
    """Refuse, before connecting, a layout where the sidecar would read back what it writes: an
    output topic (pairs, orphans, dead letters, checkpoints, after template expansion) that is an
    input topic, or (--repartition) the re-keyed topic it consumes. `--dead-letter-topic '{topic}'`
    would dead-letter a record into its own input, read it again and dead-letter it again, for
    ever. An empty input topic name is refused too (it names no topic).

    Self-contained in the CLI on purpose: the Kafka adapter's own template checks are separate."""
    names = [t.strip() for t in topics]
    if any(not t for t in names):
        raise ValueError("--input-topic: an empty topic name is not a topic")
    group = args.group_id or ""
    inputs = set(names)
    consumed = {t: (_expand(args.repartition_topic, t, group) if args.repartition else t) for t in names}
    if args.repartition:
        for topic, rekeyed in consumed.items():
            if rekeyed in inputs:
                raise ValueError(
                    f"--repartition-topic {args.repartition_topic!r} is the input topic {rekeyed!r} "
                    f"for input {topic!r}: the sidecar would read back what it writes"
                )
    read = inputs | {c for c in consumed.values() if c is not None}
    for topic in names:
        outputs = [
            ("--pairs-topic", args.pairs_topic, topic),
            ("--orphans-topic", args.orphans_topic, topic),
            ("--dead-letter-topic", args.dead_letter_topic, topic),
            ("--checkpoint-topic", args.checkpoint_topic, consumed[topic] or topic),
        ]
        for flag, template, source in outputs:
            name = _expand(template, source, group)
            if name is not None and name in read:
                raise ValueError(
                    f"{flag} {template!r} is {name!r} for input {topic!r}, a topic the sidecar reads: "
                    "it would read back its own output for ever; choose another name"
                )


async def serve(config: SidecarConfig) -> int:
    sidecar = Sidecar(config)
    try:
        await sidecar.start()
    except ConfigError as err:  # e.g. the HTTP port is in use: nothing started yet
        print(f"stream-pairer run: {err}", file=sys.stderr)
        return 2
    if sidecar.http_port is not None:
        print(f"stream-pairer: HTTP on {config.http_host}:{sidecar.http_port}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if not log.isEnabledFor(logging.DEBUG):
        loop.set_exception_handler(asyncio_exception_handler)
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    stopper = asyncio.create_task(stop.wait())
    runner = asyncio.create_task(sidecar.wait())
    await asyncio.wait({stopper, runner}, return_when=asyncio.FIRST_COMPLETED)
    if runner.done() and not runner.cancelled() and runner.exception() is not None:
        log.error("the sidecar loop failed: %s", runner.exception())
        await sidecar.stop(config.shutdown_timeout_s)
        return 1
    log.info("stopping (signal received)")
    clean = await sidecar.stop(config.shutdown_timeout_s)
    for task in (stopper, runner):  # nothing left running for asyncio.run to cancel (no tracebacks)
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    return 0 if clean else 1


def run(args: argparse.Namespace) -> int:
    tune_gc()  # held state makes CPython's default GC thresholds cost a third of the loop
    setup_logging(args.log_level, args.log_format)
    try:
        config = config_from_args(args)
    except (OSError, ValueError, ConfigError, NativeUnavailable) as err:
        print(f"stream-pairer run: {err}", file=sys.stderr)
        return 2
    log.info("Kafka %s: %s", config.bootstrap_servers, config.security.describe())
    return asyncio.run(serve(config))
