"""The broker lifecycle: one KRaft node (`KafkaBroker`) or several (`KafkaCluster`) on loopback ports.

Why apart from kafka_broker.py (the CLI and the helpers the tests import from it): a node's
properties, start, stop, kill and restart are one concern; its jars come from kafka_jars.py and its
secured listeners are kafka_secure.py's subclass.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka_jars import DEFAULT_VERSION, JVM_OPTS, KafkaToolError, java_executable, resolve

READY_MARKER = "Kafka Server started"  # logged by KafkaRaftServer once the broker is unfenced

_LOG4J1 = """log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""
_LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.req.name = kafka.request.logger
logger.req.level = WARN
"""


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (all held open together so they cannot repeat)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def new_cluster_id() -> str:
    """A Kafka Uuid in its base64url form (what `kafka-storage random-uuid` prints)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka rejects ids that look like a command-line flag
            return text


_LIVE: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    """A crashed test run must not leave JVMs behind (detached CLI brokers are not in this set)."""
    for proc in list(_LIVE):
        with contextlib.suppress(OSError):
            proc.kill()


class KafkaBroker:
    """One combined broker+controller KRaft node; its ports and data persist across stop()/start()."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        version: str = DEFAULT_VERSION,
        port: int = 0,
        num_partitions: int = 1,
        node_id: int = 1,
        controller_port: int = 0,
        voters: str = "",
        cluster_id: str = "",
        replication: int = 1,
        auto_create_topics: bool = True,
    ) -> None:
        self._own_dir = directory is None
        # False as production brokers run: a deleted topic stays missing until someone creates it
        # (tests of an output outage need that; the broker's default re-creates it on first use).
        self.auto_create_topics = auto_create_topics
        self.dir = Path(directory or tempfile.mkdtemp(prefix="stream-pairer-kafka-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        saved: dict[str, Any] = self._load_state()
        self.version = saved.get("version", version)
        if self.version != version:
            raise KafkaToolError(f"{self.dir} holds a Kafka {self.version} node, not {version}")
        ports = free_ports(2)
        self.port: int = saved.get("port") or port or ports[0]
        self.controller_port: int = saved.get("controller_port") or controller_port or ports[1]
        self.node_id = node_id
        self.voters = voters or f"{node_id}@127.0.0.1:{self.controller_port}"
        self.cluster_id: str = saved.get("cluster_id") or cluster_id or new_cluster_id()
        self.num_partitions = num_partitions
        self.replication = replication
        self.log_path = self.dir / "kafka.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _load_state(self) -> dict[str, Any]:
        path = self.dir / "broker.json"
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def _properties(self) -> dict[str, Any]:
        rf, min_isr = self.replication, min(self.replication, 2)
        return {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.dir / "data",
            "num.partitions": self.num_partitions,
            "default.replication.factor": rf,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 5,  # 50 by default: slow to create on a 2-core CI box
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": 5,
            "group.initial.rebalance.delay.ms": 0,
            # A SIGKILLed node re-registers only once its old incarnation's session expired (9 s default).
            "broker.session.timeout.ms": 4000,
            "broker.heartbeat.interval.ms": 500,
            "auto.create.topics.enable": str(self.auto_create_topics).lower(),
        }

    def _write_files(self) -> None:
        props = self._properties()
        (self.dir / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.dir / "log4j.properties").write_text(_LOG4J1)
        (self.dir / "log4j2.properties").write_text(_LOG4J2)
        state = {
            "version": self.version,
            "port": self.port,
            "controller_port": self.controller_port,
            "cluster_id": self.cluster_id,
            "pid": self.proc.pid if self.proc else None,
        }
        (self.dir / "broker.json").write_text(json.dumps(state))

    def _java(self, main: str, *args: str) -> list[str]:
        logging = [
            f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
        ]
        return [java_executable(), *JVM_OPTS, *logging, "-cp", f"{resolve(self.version)}/*", main, *args]

    def format_cmd(self) -> list[str] | None:
        """The StorageTool command that formats this node's data dir, or None if it is formatted."""
        self._write_files()
        if (self.dir / "data" / "meta.properties").exists():
            return None
        conf = str(self.dir / "server.properties")
        extra = self._format_args()
        return self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", conf, *extra)

    def _format_args(self) -> list[str]:
        return []

    def launch(self, detach: bool = False) -> None:
        """Start the JVM without waiting; the node must be formatted (see format_cmd)."""
        if self.running:
            return
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            cmd = self._java("kafka.Kafka", str(self.dir / "server.properties"))
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if not detach:
            _LIVE.add(self.proc)
        self._write_files()  # records the pid for `stop --dir`

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until the broker logged that it serves and its port accepts connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = self.proc.returncode if self.proc else None
                raise KafkaToolError(f"Kafka node {self.node_id} exited ({code}):\n{self.log_tail()}")
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                started = READY_MARKER.encode() in log.read()
            if started:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
                    return
            time.sleep(0.2)
        raise KafkaToolError(f"Kafka node {self.node_id} not ready after {timeout}s:\n{self.log_tail()}")

    def start(self, timeout: float = 120.0, detach: bool = False) -> KafkaBroker:
        _run_all([self.format_cmd()], self.dir)
        self.launch(detach)
        self.wait_ready(timeout)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful (controlled) shutdown with SIGTERM; SIGKILL only if it overstays the timeout."""
        if self.proc is not None:
            self.proc.terminate()  # a no-op if it already exited
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
            self.kill()  # reaps it, and ends a node that overstayed the timeout

    def kill(self) -> None:
        """SIGKILL: a crash, with no controlled shutdown and no clean log close."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            _LIVE.discard(self.proc)
            self.proc = None

    def log_tail(self, lines: int = 30) -> str:
        """The first errors and the last lines of this run's log: the cause is rarely at the very end."""
        if not self.log_path.exists():
            return "(no log)"
        with self.log_path.open("rb") as log:
            log.seek(getattr(self, "_log_offset", 0))
            text = log.read().decode(errors="replace").splitlines()
        errors = [line for line in text if " ERROR " in line or "Exception: " in line][:6]
        return "\n".join([*errors, "[...]", *text[-lines:]] if errors else text[-lines:])

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_all(cmds: list[list[str] | None], where: Path) -> None:
    """Run the commands in parallel (JVM start-up dominates) and fail with their output if any fails."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for c in cmds if c]
    for proc in procs:
        out = proc.communicate()[0].decode(errors="replace")
        if proc.returncode != 0:
            raise KafkaToolError(f"formatting KRaft storage under {where} failed:\n{out[-4000:]}")


class KafkaCluster:
    """n combined KRaft nodes on loopback ports; all n are controller voters; topics default to RF 3."""

    def __init__(
        self,
        n: int = 3,
        directory: str | Path | None = None,
        *,
        version: str = DEFAULT_VERSION,
        num_partitions: int = 1,
    ) -> None:
        self._own_dir = directory is None
        self.dir = Path(directory or tempfile.mkdtemp(prefix="stream-pairer-kafka-cluster-"))
        ports = free_ports(2 * n)
        voters = ",".join(f"{i + 1}@127.0.0.1:{ports[n + i]}" for i in range(n))
        cluster_id = new_cluster_id()
        self.nodes = [
            KafkaBroker(
                self.dir / f"node-{i + 1}",
                version=version,
                port=ports[i],
                node_id=i + 1,
                controller_port=ports[n + i],
                voters=voters,
                cluster_id=cluster_id,
                num_partitions=num_partitions,
                replication=min(n, 3),
            )
            for i in range(n)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def start(self, i: int | None = None, timeout: float = 180.0) -> KafkaCluster:
        """Start node i, or every node at once (a quorum needs a majority up before any broker is ready)."""
        nodes = self.nodes if i is None else [self.nodes[i]]
        _run_all([node.format_cmd() for node in nodes], self.dir)
        for node in nodes:
            node.launch()
        for node in nodes:
            node.wait_ready(timeout)
        return self

    def stop(self, i: int | None = None) -> None:
        """Stop node i, or all: SIGTERM to every node first, so the quorum outlives the brokers' shutdown."""
        nodes = [node for node in (self.nodes if i is None else [self.nodes[i]]) if node.proc]
        for node in nodes:
            node.proc.terminate()  # type: ignore[union-attr]
        for node in nodes:
            node.stop()

    def kill(self, i: int) -> None:
        self.nodes[i].kill()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
