#!/usr/bin/env python3
"""Run a real Kafka Connect standalone worker with the Apache Iceberg sink on 127.0.0.1, for tests and CI.

Why this exists: `deploy/kafka-connect/iceberg-sink.json` is only worth what the real connector does
with it, so the test that proves it runs Apache Kafka's own `ConnectStandalone` with Apache Iceberg's
own sink, fetched from Maven Central the way `kafka_broker.py` fetches the broker (pinned versions,
cached once). The plugin directory holds `iceberg-kafka-connect` and what the connector's runtime
distribution adds for a catalog on local files: `iceberg-parquet` (the data files), Hadoop's shaded
client (`HadoopFileIO` and Parquet's writer need `org.apache.hadoop.conf.Configuration`) and the
SQLite JDBC driver (Iceberg's `JdbcCatalog` over a file, the same catalog tables pyiceberg's
`SqlCatalog` uses).

Library use::

    with ConnectWorker(broker.bootstrap, directory, [connector_json]) as worker:
        worker.wait_running("stream-pairer-iceberg-sink")   # REST status: connector and tasks RUNNING

CLI: ``python scripts/kafka_connect.py resolve`` (CI calls it up front).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_broker as kb  # a sibling script: its Maven cache, ports and error type are shared

# 1.10.1: an Apache Iceberg release with the sink (`org.apache.iceberg.connect`, since 1.7) built
# against Kafka 3.x; Hadoop 3.4.1 is the line the connector's runtime distribution bundles.
ICEBERG_VERSION = os.environ.get("STREAM_PAIRER_ICEBERG_VERSION", "1.10.1")
HADOOP_VERSION = "3.4.1"
SQLITE_JDBC_VERSION = "3.50.3.0"
PLUGIN_NAME = "iceberg-kafka-connect"


def worker_libs(version: str = kb.DEFAULT_VERSION) -> Path:
    """Kafka Connect's runtime jars (the broker's `kafka_2.13` does not carry connect-runtime)."""
    home = kb.cache_root() / f"connect-{version}"
    deps: list[kb.Artifact] = [
        ("org.apache.kafka", "connect-runtime", version),
        ("org.apache.kafka", "connect-json", version),
        *kb._LOGGING_DEPS[version.split(".", 1)[0]],
    ]
    return kb.maven_copy(home, deps, home / "libs", "connect-runtime-*.jar")


def plugin_path(version: str = ICEBERG_VERSION) -> Path:
    """The `plugin.path` directory; the sink and its dependencies are one isolated plugin under it."""
    home = kb.cache_root() / f"iceberg-connect-{version}"
    deps: list[kb.Artifact] = [
        ("org.apache.iceberg", "iceberg-kafka-connect", version),
        ("org.apache.iceberg", "iceberg-parquet", version),
        ("org.apache.hadoop", "hadoop-client-api", HADOOP_VERSION),
        ("org.apache.hadoop", "hadoop-client-runtime", HADOOP_VERSION),
        ("org.xerial", "sqlite-jdbc", SQLITE_JDBC_VERSION),
    ]
    # slf4j is always loaded from the worker's classpath (Connect never isolates it): a second copy
    # in the plugin would only warn.
    kb.maven_copy(home, deps, home / "plugins" / PLUGIN_NAME, "iceberg-kafka-connect-*.jar", "org.slf4j")
    return home / "plugins"


def is_resolved(version: str = kb.DEFAULT_VERSION, iceberg: str = ICEBERG_VERSION) -> bool:
    root = kb.cache_root()
    return all(
        (p / ".complete").exists()
        for p in (
            root / f"connect-{version}" / "libs",
            root / f"iceberg-connect-{iceberg}" / "plugins" / PLUGIN_NAME,
        )
    )


class ConnectWorker:
    """One `ConnectStandalone` JVM: REST on a free loopback port, offsets in a file under `directory`."""

    def __init__(
        self, bootstrap: str, directory: Path, connectors: list[Path], version: str = kb.DEFAULT_VERSION
    ):
        self.bootstrap = bootstrap
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.connectors = connectors
        self.version = version
        self.port = kb.free_ports(1)[0]
        self.log_path = self.dir / "connect.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _properties(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "plugin.path": plugin_path(),
            "plugin.discovery": "service_load",  # the jars' ServiceLoader manifests: no classpath scan
            "offset.storage.file.filename": self.dir / "connect.offsets",
            "offset.flush.interval.ms": 1000,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        }

    def start(self, timeout: float = 90.0) -> ConnectWorker:
        props = self._properties()
        (self.dir / "worker.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.dir / "log4j.properties").write_text(kb._LOG4J1)
        (self.dir / "log4j2.properties").write_text(kb._LOG4J2)
        cmd = [
            kb.java_executable(),
            *kb.JVM_OPTS,
            f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp",
            f"{worker_libs(self.version)}/*",
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(self.dir / "worker.properties"),
            *map(str, self.connectors),
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        kb._LIVE.add(self.proc)
        deadline = time.monotonic() + timeout
        try:
            while self.get("/") is None:
                self._check_alive()
                if time.monotonic() > deadline:
                    raise kb.KafkaToolError(f"Connect REST not up after {timeout}s:\n{self.log_tail()}")
                time.sleep(0.3)
        except BaseException:  # `with` calls __exit__ only after __enter__ returned: stop it here
            self.stop()
            raise
        return self

    def _check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = self.proc.returncode if self.proc else None
            raise kb.KafkaToolError(f"Connect worker exited ({code}):\n{self.log_tail()}")

    def get(self, path: str) -> Any:
        """GET a REST resource as JSON; None while the worker does not answer (or answers 404)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as resp:
                return json.loads(resp.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            return None

    def wait_running(self, name: str, timeout: float = 60.0) -> dict[str, Any]:
        """Block until the connector and all its tasks report RUNNING; a FAILED one raises with its trace."""
        deadline = time.monotonic() + timeout
        status: Any = None
        while time.monotonic() < deadline:
            self._check_alive()
            status = self.get(f"/connectors/{name}/status")
            if status:
                states = [status["connector"], *status.get("tasks", [])]
                failed = [s for s in states if s["state"] == "FAILED"]
                if failed:
                    raise kb.KafkaToolError(f"connector {name} failed: {failed[0].get('trace', '')[:4000]}")
                if status.get("tasks") and all(s["state"] == "RUNNING" for s in states):
                    return dict(status)
            time.sleep(0.5)
        raise kb.KafkaToolError(f"connector {name} not running after {timeout}s: {status}\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: Connect stops its tasks (closing the sink's writers) before it exits."""
        if self.proc is not None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
            self.proc.kill()
            self.proc.wait()
            kb._LIVE.discard(self.proc)
            self.proc = None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        errors = [line for line in text if " ERROR " in line or "Exception: " in line][:6]
        return "\n".join([*errors, "[...]", *text[-lines:]] if errors else text[-lines:])

    def __enter__(self) -> ConnectWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("resolve", help="download Kafka Connect's and the Iceberg sink's jars into the cache")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "resolve":
            print(worker_libs())
            print(plugin_path())
    except kb.KafkaToolError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
