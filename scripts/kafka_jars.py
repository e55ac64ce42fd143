"""Kafka's jars and the Java that runs them: the resolve/download half of scripts/kafka_broker.py.

Why apart: fetching a pinned Kafka (and Kafka Connect, scripts/kafka_connect.py) from Maven Central
once, into a cache, is a concern of its own, needed before any broker can start (CI runs
`kafka_broker.py resolve` first); the broker's lifecycle is kafka_node.py's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# 3.9 is the last 3.x line: KRaft without ZooKeeper, yet it still accepts every old protocol version
# a client may use (aiokafka's own CI stops at broker 2.8). 4.1.2 is the compatibility row (KIP-896
# removed old protocol versions in 4.0); tests/integration/test_kafka4_compat.py checks it.
DEFAULT_VERSION = os.environ.get("STREAM_PAIRER_KAFKA_VERSION", "3.9.2")
KAFKA4_VERSION = "4.1.2"
JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError"]

# Kafka 3.x logs through slf4j 1.7 + reload4j; 4.x ships log4j2 and needs its slf4j 1.x binding.
_LOGGING_DEPS = {
    "3": [("org.slf4j", "slf4j-reload4j", "1.7.36"), ("ch.qos.reload4j", "reload4j", "1.2.25")],
    "4": [("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.3")],
}


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
