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
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# 3.9 is the last 3.x line: KRaft without ZooKeeper, yet it still accepts every old protocol version
# a client may use (aiokafka's own CI stops at broker 2.8). 4.1.2 is the compatibility row (KIP-896
# removed old protocol versions in 4.0); tests/integration/test_kafka4_compat.py checks it.
DEFAULT_VERSION = os.environ.get("STREAM_PAIRER_KAFKA_VERSION", "3.9.2")
KAFKA4_VERSION = "4.1.2"
READY_MARKER = "Kafka Server started"  # logged by KafkaRaftServer once the broker is unfenced
JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError"]

# Kafka 3.x logs through slf4j 1.7 + reload4j; 4.x ships log4j2 and needs its slf4j 1.x binding.
_LOGGING_DEPS = {
    "3": [("org.slf4j", "slf4j-reload4j", "1.7.36"), ("ch.qos.reload4j", "reload4j", "1.2.25")],
    "4": [("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.3")],
}
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


class KafkaToolError(RuntimeError):
    """Java/Maven missing, jar resolution failed, or a broker did not come up (message has the log tail)."""


def cache_root() -> Path:
    env = os.environ.get("STREAM_PAIRER_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "stream-pairer" / "kafka"


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise KafkaToolError("Java not found: install a JDK/JRE 17+ or set JAVA_HOME")
    return java


def is_resolved(version: str = DEFAULT_VERSION) -> bool:
    return (cache_root() / version / "libs" / ".complete").exists()


Artifact = tuple[str, str, str]  # Maven (groupId, artifactId, version)


def _pom(deps: list[Artifact]) -> str:
    xml = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>local.stream-pairer</groupId><artifactId>kafka-libs</artifactId><version>1</version>"
        f"<packaging>pom</packaging><dependencies>{xml}</dependencies></project>\n"
    )


def maven_copy(home: Path, deps: list[Artifact], libs: Path, expect: str, exclude_groups: str = "") -> Path:
    """Copy `deps` and their runtime closure into `libs` with Maven, once (`.complete` marks it done).

    Shared by the broker's jars and Kafka Connect's (scripts/kafka_connect.py): the copy is staged
    and renamed into place, so an interrupted download never looks complete; `expect` is a glob that
    must match in the result (Maven can "succeed" with nothing copied).
    """
    if (libs / ".complete").exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaToolError(f"Maven (mvn) not found: it is needed once to fetch {deps[0][1]}'s jars")
    home.mkdir(parents=True, exist_ok=True)
    libs.parent.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(_pom(deps))
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    opts = [f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    if exclude_groups:  # e.g. a plugin's own slf4j, which Connect always loads from its own classpath
        opts.append(f"-DexcludeGroupIds={exclude_groups}")
    cmd = [mvn, "-q", "-B", "-f", str(home / "pom.xml"), "dependency:copy-dependencies", *opts]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not any(staging.glob(expect)):
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        raise KafkaToolError(f"Maven could not resolve {':'.join(deps[0])}:\n{tail}")
    (staging / ".complete").touch()
    shutil.rmtree(libs, ignore_errors=True)  # a half-done copy from an interrupted run
    staging.rename(libs)
    return libs


def resolve(version: str = DEFAULT_VERSION) -> Path:
    """Return the directory holding Kafka's runtime jars, downloading them with Maven on first use."""
    home = cache_root() / version
    if version.split(".", 1)[0] not in _LOGGING_DEPS:
        raise KafkaToolError(f"unsupported Kafka version {version} (3.x and 4.x are known)")
    deps = [("org.apache.kafka", "kafka_2.13", version), *_LOGGING_DEPS[version.split(".", 1)[0]]]
    return maven_copy(home, deps, home / "libs", "kafka_2.13-*.jar")


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


# ------------------------------------------------------------------------------ secured listeners


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise KafkaToolError("openssl not found: it makes the test CA and certificates")
    done = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KafkaToolError(f"openssl {args[0]} failed: {done.stderr[-2000:]}")


class TestPki:
    """A throwaway CA, a broker certificate for IP 127.0.0.1, a client certificate with an
    encrypted key (mutual TLS) and a second, unrelated CA (the "untrusted" case), made with
    openssl at test time: nothing secret is checked in, and nothing outlives the test directory."""

    def __init__(self, directory: Path, key_password: str = "client-key-pass") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key_password = key_password
        d = self.dir
        days = "2"
        for ca in ("ca", "other-ca"):
            _openssl(
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", days, "-keyout", f"{ca}.key",
                "-out", f"{ca}.pem", "-subj", f"/CN=stream-pairer test {ca}", cwd=d,
            )  # fmt: skip
        for name, san in (("broker", "IP:127.0.0.1"), ("client", "DNS:stream-pairer-client")):
            _openssl(
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}", cwd=d,
            )  # fmt: skip
            (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
            _openssl(
                "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", days, "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=d,
            )  # fmt: skip
        # The broker's PEM key store: its unencrypted PKCS#8 key, its certificate, then the CA.
        (d / "broker-keystore.pem").write_text(
            (d / "broker.key").read_text() + (d / "broker.pem").read_text() + (d / "ca.pem").read_text()
        )
        _openssl(
            "pkey", "-in", "client.key", "-aes256", "-passout", f"pass:{key_password}",
            "-out", "client-encrypted.key", cwd=d,
        )  # fmt: skip

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def other_ca(self) -> Path:
        return self.dir / "other-ca.pem"


class SecureKafkaBroker(KafkaBroker):
    """A single KRaft node with secured client listeners next to the PLAINTEXT one (which stays for
    inter-broker traffic, the controller and test set-up):

    * SASL_SSL: SCRAM-SHA-256 and SCRAM-SHA-512; the users are created by Kafka's own StorageTool
      (`format --add-scram`), the way a KRaft cluster bootstraps its first credentials;
    * SASL_PLAINTEXT: PLAIN (users in the JAAS config) and OAUTHBEARER with unsecured JWS tokens
      (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: for tests only);
    * SSL: mutual TLS (the client must present a certificate signed by the test CA).

    The broker's certificate names IP 127.0.0.1 only, so a client connecting to "localhost" meets a
    hostname mismatch."""

    def __init__(
        self, directory: str | Path | None = None, *, users: dict[str, str] | None = None, **kw: Any
    ) -> None:
        super().__init__(directory, **kw)
        self.users = dict(users or {"alice": "alice-secret"})
        saved = self._load_state()
        ports = free_ports(3)
        self.sasl_ssl_port: int = saved.get("sasl_ssl_port") or ports[0]
        self.sasl_plaintext_port: int = saved.get("sasl_plaintext_port") or ports[1]
        self.ssl_port: int = saved.get("ssl_port") or ports[2]
        pki_dir = self.dir / "pki"
        self.pki = TestPki(pki_dir) if not (pki_dir / "client-encrypted.key").exists() else _load_pki(pki_dir)

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def sasl_plaintext_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_plaintext_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def _properties(self) -> dict[str, Any]:
        props = super()._properties()
        listeners = {
            "PLAINTEXT": self.port,
            "SASL_SSL": self.sasl_ssl_port,
            "SASL_PLAINTEXT": self.sasl_plaintext_port,
            "SSL": self.ssl_port,
        }
        props["listeners"] = ",".join(
            [
                *(f"{n}://127.0.0.1:{p}" for n, p in listeners.items()),
                f"CONTROLLER://127.0.0.1:{self.controller_port}",
            ]
        )
        props["advertised.listeners"] = ",".join(f"{n}://127.0.0.1:{p}" for n, p in listeners.items())
        props["listener.security.protocol.map"] = (
            ",".join(f"{n}:{n}" for n in [*listeners, "CONTROLLER"] if n != "CONTROLLER")
            + ",CONTROLLER:PLAINTEXT"
        )
        keystore = self.pki.dir / "broker-keystore.pem"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())
        unsecured = "org.apache.kafka.common.security.oauthbearer.internals.unsecured"
        for name in ("sasl_ssl", "ssl"):
            props[f"listener.name.{name}.ssl.keystore.type"] = "PEM"
            props[f"listener.name.{name}.ssl.keystore.location"] = keystore
        props |= {
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            ),
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="broker";'
            ),
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                f"{unsecured}.OAuthBearerUnsecuredValidatorCallbackHandler"
            ),
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": self.pki.ca,
            "listener.name.ssl.ssl.client.auth": "required",
        }
        return props

    def _format_args(self) -> list[str]:
        out = []
        for user, password in self.users.items():
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                out += ["--add-scram", f"{mech}=[name={user},password={password}]"]
        return out

    def _write_files(self) -> None:
        super()._write_files()
        state = self._load_state() | {
            "sasl_ssl_port": self.sasl_ssl_port,
            "sasl_plaintext_port": self.sasl_plaintext_port,
            "ssl_port": self.ssl_port,
        }
        (self.dir / "broker.json").write_text(json.dumps(state))


def _load_pki(directory: Path) -> TestPki:
    pki = TestPki.__new__(TestPki)
    pki.dir, pki.key_password = directory, "client-key-pass"
    return pki


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
