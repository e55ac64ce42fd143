"""Fixtures for the integration tests: a REAL Apache Kafka broker on 127.0.0.1, started and stopped here.

Nothing is mocked: `scripts/kafka_broker.py` (the same script the README and CI use) fetches Kafka's
jars with Maven once, formats KRaft storage and runs `kafka.Kafka`. One broker serves the whole session
(JVM start-up costs seconds); tests that stop, kill or version-switch a broker take their own from
`broker_factory`. Every test under tests/integration is marked `integration` automatically.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import kafka_broker as kb  # a script, not a package: found through the path set just above
from kafka_broker import KafkaBroker, KafkaToolError

__all__ = [
    "BrokerFactory",
    "KafkaBroker",
    "TopicFactory",
    "check_transactions",
    "kb",
    "read_all",
    "start_broker",
]
HERE = Path(__file__).resolve().parent
BrokerFactory = Callable[..., KafkaBroker]
TopicFactory = Callable[..., Awaitable[str]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


def require_kafka(version: str) -> None:
    """Skip when Java/Maven are missing on a developer box; in CI (CI=true) that is a failure instead."""
    problems = []
    try:
        kb.java_executable()
    except KafkaToolError as err:
        problems.append(str(err))
    if not kb.is_resolved(version) and shutil.which("mvn") is None:
        problems.append(f"Maven (mvn) not found and Kafka {version} jars are not cached")
    if problems:
        reason = "real Kafka broker unavailable: " + "; ".join(problems)
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def start_broker(directory: Path, version: str = kb.DEFAULT_VERSION, **kw: Any) -> KafkaBroker:
    require_kafka(version)
    return KafkaBroker(directory, version=version, **kw).start()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One single-node Kafka (the pinned default version) shared by the whole test session."""
    broker = start_broker(tmp_path_factory.mktemp("kafka"))
    yield broker
    broker.close()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Private brokers for tests that stop/kill them or need another Kafka version; closed at teardown."""
    brokers: list[KafkaBroker] = []

    def make(version: str = kb.DEFAULT_VERSION, **kw: Any) -> KafkaBroker:
        brokers.append(start_broker(tmp_path / f"kafka-{len(brokers)}", version, **kw))
        return brokers[-1]

    yield make
    for broker in brokers:
        broker.close()


async def create_topic(bootstrap: str, partitions: int = 1, replication: int = 1, prefix: str = "it") -> str:
    """Create a uniquely named topic and wait until every partition has a leader."""
    return await kb.create_topic(bootstrap, partitions, replication, prefix, wait_s=15.0)


@pytest.fixture
async def topic_factory(request: pytest.FixtureRequest) -> AsyncIterator[TopicFactory]:
    """`await topic_factory(partitions)` -> a fresh topic on the session broker (or on `bootstrap=`)."""

    async def make(
        partitions: int = 1, *, bootstrap: str | None = None, replication: int = 1, prefix: str = "it"
    ) -> str:
        if bootstrap is None:  # only now, so tests on private brokers never start the session one
            bootstrap = request.getfixturevalue("kafka_broker").bootstrap
        return await create_topic(bootstrap, partitions, replication, prefix)

    yield make


async def read_all(consumer: AIOKafkaConsumer, expected: int, wait_s: float = 20.0) -> list[Any]:
    """Read records until `expected` arrived (or time is up), then linger briefly to catch extras."""
    records: list[Any] = []
    deadline = time.monotonic() + wait_s
    while len(records) < expected and time.monotonic() < deadline:
        for batch in (await consumer.getmany(timeout_ms=500)).values():
            records.extend(batch)
    for batch in (await consumer.getmany(timeout_ms=500)).values():
        records.extend(batch)
    return records


async def check_transactions(bootstrap: str, topic: str) -> None:
    """Committed transactions are visible to read_committed, aborted ones only to read_uncommitted."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"txn-{uuid.uuid4().hex[:8]}", acks="all"
    )
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(3):
                await producer.send(topic, f"committed-{i}".encode(), key=b"k")
        await producer.begin_transaction()
        for i in range(2):
            await producer.send(topic, f"aborted-{i}".encode(), key=b"k")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic, b"committed-last", key=b"k")
    finally:
        await producer.stop()

    seen: dict[str, list[bytes]] = {}
    for isolation, expected in (("read_committed", 4), ("read_uncommitted", 6)):
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            seen[isolation] = [r.value for r in await read_all(consumer, expected)]
        finally:
            await consumer.stop()
    assert seen["read_committed"] == [b"committed-0", b"committed-1", b"committed-2", b"committed-last"]
    # The aborted records really reached the log: only the isolation level keeps them out.
    assert b"aborted-0" in seen["read_uncommitted"]
    assert b"aborted-1" in seen["read_uncommitted"]
