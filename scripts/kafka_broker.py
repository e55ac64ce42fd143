#!/usr/bin/env python3
"""Run a real Apache Kafka broker (KRaft, no ZooKeeper) on 127.0.0.1 for tests, CI, demos and benchmarks.

Why this exists: the sidecar's delivery guarantees are only worth what a real broker says about them,
so nothing here is mocked. Kafka's own jars come from Maven Central through Maven (a pinned version,
cached once), and each node runs as ``java -cp <libs>/* kafka.Kafka server.properties``. Only Java,
Maven and the Python standard library are needed, which is all a clean CI machine has.

Library use::

    with KafkaBroker() as broker:      # one combined broker+controller on a free port
        print(broker.bootstrap)        # "127.0.0.1:PORT"
        broker.stop(); broker.start()  # same port, same data: "the broker went away and came back"

    with KafkaCluster(3) as cluster:   # three KRaft nodes, replication factor 3, min ISR 2
        cluster.kill(0); cluster.start(0)

    with SecureKafkaBroker(users={"alice": "pw"}) as broker:  # + SASL_SSL (SCRAM), SASL_PLAINTEXT
        broker.sasl_ssl_bootstrap, broker.pki.ca               # (PLAIN, OAUTHBEARER), SSL (mutual TLS)

CLI: ``python scripts/kafka_broker.py {resolve,start,stop} --help``.

Its parts, beside it: kafka_jars.py (Java and the jars, resolved once), kafka_node.py (a node's and a
cluster's lifecycle), kafka_secure.py (the test PKI and the secured listeners); every name the tests,
benchmarks and sibling scripts use is re-exported here.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

# The broker's parts, re-exported here: tests, benchmarks and sibling scripts import them from this
# script (`import kafka_broker as kb`), the one name the README and CI know.
from kafka_jars import (
    _LOGGING_DEPS,
    DEFAULT_VERSION,
    JVM_OPTS,
    KAFKA4_VERSION,
    Artifact,
    KafkaToolError,
    cache_root,
    is_resolved,
    java_executable,
    maven_copy,
    resolve,
)
from kafka_node import (
    _LIVE,
    _LOG4J1,
    _LOG4J2,
    READY_MARKER,
    KafkaBroker,
    KafkaCluster,
    free_ports,
    new_cluster_id,
)
from kafka_secure import SecureKafkaBroker, TestPki

__all__ = [  # the re-exported parts, and this script's own names
    "DEFAULT_VERSION",
    "JVM_OPTS",
    "KAFKA4_VERSION",
    "READY_MARKER",
    "_LIVE",
    "_LOG4J1",
    "_LOG4J2",
    "_LOGGING_DEPS",
    "Artifact",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaToolError",
    "SecureKafkaBroker",
    "TestPki",
    "cache_root",
    "create_topic",
    "free_ports",
    "is_resolved",
    "java_executable",
    "main",
    "maven_copy",
    "new_cluster_id",
    "resolve",
    "stop_dir",
]


def stop_dir(directory: Path, timeout: float = 30.0) -> bool:
    """Stop the broker a detached `start --dir` left running; False if none was running there."""
    state = json.loads((directory / "broker.json").read_text())
    pid = state.get("pid")
    try:
        if not pid or b"kafka.Kafka" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False  # gone, or the pid now belongs to another program
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError):
        pass
    return True


async def create_topic(
    bootstrap: str,
    partitions: int = 1,
    replication: int = 1,
    prefix: str = "topic",
    wait_s: float = 30.0,
    *,
    name: str = "",
) -> str:
    """Create a uniquely named topic and wait until every partition has a leader: a freshly created
    topic answers produce and fetch requests with errors until then, which would make the first
    seconds of every test and trial flaky. aiokafka is imported here so that `resolve` and `start`
    keep working before the project's dependencies are installed (CI resolves the jars first)."""
    import asyncio  # noqa: PLC0415 - only the async helper needs it
    import uuid  # noqa: PLC0415

    from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: PLC0415 - see docstring

    name = name or f"{prefix}-{uuid.uuid4().hex[:10]}"  # a given name: e.g. a config's own topics
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=replication)])
        deadline = time.monotonic() + wait_s
        while True:
            (meta,) = await admin.describe_topics([name])
            leaders = [p["leader"] for p in meta["partitions"]]
            if meta["error_code"] == 0 and len(leaders) == partitions and min(leaders) >= 0:
                return name
            if time.monotonic() > deadline:
                raise KafkaToolError(f"topic {name} has no leaders after {wait_s:.0f}s: {meta}")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    res = sub.add_parser("resolve", help="download Kafka's jars into the cache (CI calls this up front)")
    res.add_argument("--version", default=DEFAULT_VERSION)
    start = sub.add_parser("start", help="start a single-node broker; prints its bootstrap address")
    start.add_argument("--version", default=DEFAULT_VERSION)
    start.add_argument("--port", type=int, default=0, help="client port (default: a free one)")
    start.add_argument("--partitions", type=int, default=1, help="num.partitions for auto-created topics")
    start.add_argument("--dir", type=Path, help="data dir (reused on restart; default: a new temp dir)")
    start.add_argument("--foreground", action="store_true", help="stay attached; Ctrl-C stops the broker")
    stop = sub.add_parser("stop", help="stop the broker started with `start --dir D`")
    stop.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "resolve":
            print(resolve(args.version))
        elif args.cmd == "stop":
            print("stopped" if stop_dir(args.dir) else f"no broker running in {args.dir}", file=sys.stderr)
        else:
            directory = args.dir or Path(tempfile.mkdtemp(prefix="stream-pairer-kafka-"))
            broker = KafkaBroker(
                directory, version=args.version, port=args.port, num_partitions=args.partitions
            )
            if args.foreground:  # Ctrl-C or SIGTERM (even where a parent shell ignores SIGINT) stops it
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, signal.default_int_handler)
            t0 = time.monotonic()
            broker.start(detach=not args.foreground)
            print(broker.bootstrap, flush=True)
            print(
                f"Kafka {broker.version} up in {time.monotonic() - t0:.1f}s; dir {broker.dir}; "
                f"log {broker.log_path}",
                file=sys.stderr,
            )
            if args.foreground:
                try:
                    broker.proc.wait()  # type: ignore[union-attr]
                except KeyboardInterrupt:
                    print("stopping Kafka ...", file=sys.stderr)
                broker.stop()
            else:
                print(f"stop it with: python {sys.argv[0]} stop --dir {broker.dir}", file=sys.stderr)
    except KafkaToolError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
