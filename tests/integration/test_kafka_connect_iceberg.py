"""The shipped Kafka Connect Iceberg sink config (`deploy/kafka-connect/iceberg-sink.json`) lands
stream-pairer's real output topics in the three generated Iceberg tables, with nothing lost.

Everything is real: Apache Kafka's `ConnectStandalone` with Apache Iceberg's own sink
(`scripts/kafka_connect.py` fetches both with Maven), a Kafka broker of the test's own, Iceberg's
`JdbcCatalog` over a SQLite file that pyiceberg's `SqlCatalog` opens too (the same catalog tables).
Only the environment's keys are overridden (catalog, topics, control topic, commit interval, the
credential file, the Connect DLQ's replication factor on a one-broker cluster, SQLite's one-writer
settings); the routing, converters, table names, isolation level and auto-create/evolve switches
are the shipped file's. The tables are created beforehand from `deploy/warehouse/iceberg/` because
the shipped config does not create them. The records are `stream-pairer pair examples/mixed.jsonl
--out -`'s, each produced to its kind's topic in transactions (one aborted), or a real
`--exactly-once` sidecar's outputs for the same lines; the check walks every JSON value of every
record and finds it in its table's row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import kafka_connect as kc  # a script, not a package: found on the path the conftest set for kafka_broker
import pytest
from aiokafka import AIOKafkaProducer

from stream_pairer.adapters.sinks.columns import TABLE_OF_KIND  # the file mode's kind -> table

from .conftest import BrokerFactory, kb, require_kafka
from .sidecar_support import OutputReader, config, produce, started, summary

pyiceberg_sql = pytest.importorskip("pyiceberg.catalog.sql")
schema_mod = pytest.importorskip("pyiceberg.schema")

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "kafka-connect" / "iceberg-sink.json"
SCHEMAS = ROOT / "deploy" / "warehouse" / "iceberg"
CATALOG_NAME = json.loads(SHIPPED.read_text())["config"].get("iceberg.catalog", "iceberg")
# The sidecar's output topics ({topic}.pairs, .orphans, .dead-letter), by record kind.
TOPIC_OF_KIND = {
    "pair": "pairs",
    "orphan_call": "orphans",
    "orphan_result": "orphans",
    "dead_letter": "dead-letter",
}


def _require_connect() -> None:
    require_kafka(kb.DEFAULT_VERSION)
    if not kc.is_resolved() and shutil.which("mvn") is None:
        reason = "Maven (mvn) not found and the Kafka Connect / Iceberg sink jars are not cached"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def _pair_outputs() -> list[dict[str, Any]]:
    """The file mode's records, as `stream-pairer pair ... --out -` pipes them."""
    out = subprocess.run(
        [sys.executable, "-m", "stream_pairer", "pair", str(ROOT / "examples" / "mixed.jsonl"), "--out", "-"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def _connector(shipped: dict[str, Any], tmp: Path, prefix: str, db: Path) -> dict[str, Any]:
    """The shipped connector with only the environment's keys replaced."""
    secrets = tmp / "iceberg.properties"
    secrets.write_text("credential=unused-by-a-jdbc-catalog\n")
    cfg = dict(shipped["config"])
    shipped_topics = cfg["topics"].split(",")
    cfg.update(
        {
            "topics": ",".join(t.replace("tool-events", prefix, 1) for t in shipped_topics),
            "iceberg.control.topic": f"{prefix}.iceberg-control",
            "iceberg.control.commit.interval-ms": "1000",
            "iceberg.catalog.type": "jdbc",
            "iceberg.catalog.uri": f"jdbc:sqlite:{db}",
            # SQLite has one writer at a time: the coordinator commits one table at a time (by
            # default in parallel threads, which fail each other's commits with SQLITE_BUSY and
            # retry them into duplicate snapshots), and a writer waits for the lock rather than
            # failing at once. A server catalog (REST, Postgres) needs neither.
            "iceberg.control.commit.threads": "1",
            "iceberg.catalog.jdbc.busy_timeout": "30000",
            "iceberg.catalog.warehouse": f"file:{tmp / 'warehouse'}",
            "iceberg.catalog.credential": cfg["iceberg.catalog.credential"].replace(
                "/opt/kafka/secrets/iceberg.properties", str(secrets)
            ),
            "errors.deadletterqueue.topic.replication.factor": "1",
        }
    )
    return {"name": shipped["name"], "config": cfg}


def _catalog(db: Path, warehouse: Path) -> Any:
    """pyiceberg's view of the connector's catalog: JDBC catalogs keep every catalog's tables in one
    `iceberg_tables` table keyed by catalog name, and the sink's is `iceberg.catalog` ("iceberg")."""
    return pyiceberg_sql.SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")


async def _sidecar_outputs(bootstrap: str, prefix: str) -> list[dict[str, Any]]:
    """The sidecar's own records: mixed.jsonl's lines into the input topic `prefix`, paired by an
    in-process `--exactly-once` sidecar into `prefix.pairs` / `.orphans` / `.dead-letter`
    (transactions, Kafka lineage in `source`); returned as a read_committed reader sees them."""
    lines = (ROOT / "examples" / "mixed.jsonl").read_bytes().splitlines()
    await kb.create_topic(bootstrap, name=prefix, wait_s=15.0)
    await produce(bootstrap, prefix, [(None, line) for line in lines if line.strip()])
    sidecar = await started(config(bootstrap, prefix, f"g-{prefix}", exactly_once=True))
    try:
        async with OutputReader(bootstrap, prefix) as reader:
            # unanswered calls come last: by the wall-clock tick, after the call timeout
            await reader.until(lambda recs: "orphan_call:timeout" in summary(recs), timeout_s=30)
            await reader.settle(1.5)
            return reader.records
    finally:
        assert await sidecar.stop()


async def _produce(bootstrap: str, prefix: str, records: list[dict[str, Any]]) -> None:
    """Write the records as the sidecar's `--exactly-once` mode does, in a transaction, after an
    aborted one holding the same records: what a sidecar killed mid-transaction and replayed leaves
    in its output topics. Only a read_committed sink lands each record once."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", transactional_id=f"txn-{prefix}")
    await producer.start()
    try:
        await producer.begin_transaction()
        for rec in records:
            await producer.send(f"{prefix}.{TOPIC_OF_KIND[rec['kind']]}", json.dumps(rec).encode())
        await producer.abort_transaction()
        async with producer.transaction():
            for rec in records:
                await producer.send(f"{prefix}.{TOPIC_OF_KIND[rec['kind']]}", json.dumps(rec).encode())
    finally:
        await producer.stop()


def _rows(catalog: Any, namespace: str) -> dict[str, list[dict[str, Any]]]:
    return {
        t: catalog.load_table((namespace, t)).scan().to_arrow().to_pylist()
        for t in set(TABLE_OF_KIND.values())
    }


async def _until_landed(
    worker: kc.ConnectWorker, name: str, catalog: Any, namespace: str, expected: Counter[str]
) -> dict[str, list[dict[str, Any]]]:
    """Read the tables until they hold `expected` rows per table (the connector commits every second)."""
    deadline = time.monotonic() + 90
    while True:
        rows = await asyncio.to_thread(_rows, catalog, namespace)
        landed = Counter({t: len(r) for t, r in rows.items()})
        if landed == expected:
            return rows
        if time.monotonic() > deadline or any(landed[t] > n for t, n in expected.items()):  # too many: final
            raise AssertionError(f"landed {dict(landed)}, expected {dict(expected)}\n{worker.log_tail()}")
        worker.wait_running(name, timeout=30)  # a FAILED task ends the wait with its trace
        await asyncio.sleep(1)


def _identity(rec: dict[str, Any]) -> tuple[Any, ...]:
    """A record's own identity: a pair by pair_id, anything else by its input's lineage."""
    if rec["kind"] == "pair":
        return (rec["kind"], rec["pair_id"])
    lineage = {k: v for k, v in rec["source"].items() if v is not None}  # file/line, topic/partition/offset
    return (rec["kind"], json.dumps(lineage, sort_keys=True))


def _same(value: Any, landed: Any, path: str) -> list[str]:
    """Where a JSON value and the table's value differ (recursively); a NULL for a value is a difference."""
    if value is None:
        return []
    if landed is None:
        return [f"{path}: NULL where the JSON has {value!r}"]
    if isinstance(value, dict) and isinstance(landed, dict):
        missing = [f"{path}.{k}: no column" for k in value if k not in landed and value[k] is not None]
        return missing + [
            d for k, v in value.items() if k in landed for d in _same(v, landed[k], f"{path}.{k}")
        ]
    if isinstance(landed, datetime):
        ok = datetime.fromisoformat(value.replace("Z", "+00:00")) == landed
    elif isinstance(landed, str) and not isinstance(value, str):
        ok = json.loads(landed) == value  # objects and lists in a string column land as JSON text
    else:
        ok = value == landed
    return [] if ok else [f"{path}: {landed!r} where the JSON has {value!r}"]


@pytest.mark.parametrize("source", ["pair", "sidecar"])
async def test_shipped_iceberg_sink_lands_every_record_in_its_table(
    broker_factory: BrokerFactory, tmp_path: Path, source: str
) -> None:
    _require_connect()
    # A cluster of its own, as a new deployment has: the sink keeps state under the connector's
    # name (its consumer groups), and a second run under the same name with a new control topic
    # and new tables on the same cluster committed nothing (deploy/kafka-connect/README.md).
    broker = broker_factory()
    shipped = json.loads(SHIPPED.read_text())
    prefix = f"tool-events-{uuid.uuid4().hex[:8]}"

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    with contextlib.closing(sqlite3.connect(db)) as con:  # WAL: readers and the writer never block
        con.execute("PRAGMA journal_mode=WAL")  # each other (the mode is stored in the file)
    catalog = _catalog(db, warehouse)
    tables = shipped["config"]["iceberg.tables"].split(",")
    namespace = tables[0].split(".")[0]
    catalog.create_namespace(namespace)
    for name in tables:
        schema = schema_mod.Schema.model_validate_json(
            (SCHEMAS / f"{name.split('.', 1)[1]}.schema.json").read_text()
        )
        catalog.create_table(tuple(name.split(".")), schema=schema)

    conn = tmp_path / "iceberg-sink.json"
    connector = _connector(shipped, tmp_path, prefix, db)
    conn.write_text(json.dumps(connector))
    control = connector["config"]["iceberg.control.topic"]  # else only broker auto-creation makes it
    for topic in [*connector["config"]["topics"].split(","), control]:
        await kb.create_topic(broker.bootstrap, name=topic, wait_s=15.0)

    with kc.ConnectWorker(broker.bootstrap, tmp_path / "connect", [conn]) as worker:
        worker.wait_running(shipped["name"])
        if source == "pair":
            records = _pair_outputs()
            await _produce(broker.bootstrap, prefix, records)
        else:
            records = await _sidecar_outputs(broker.bootstrap, prefix)
        assert {r["kind"] for r in records} == set(TABLE_OF_KIND)  # every kind is exercised
        expected = Counter(TABLE_OF_KIND[r["kind"]] for r in records)
        rows = await _until_landed(worker, shipped["name"], _catalog(db, warehouse), namespace, expected)
        await asyncio.sleep(3)  # three more commit intervals: a late duplicate commit would show now
        rows = await asyncio.to_thread(_rows, _catalog(db, warehouse), namespace)
    assert Counter({t: len(r) for t, r in rows.items()}) == expected

    by_identity = {_identity(row): (table, row) for table, rs in rows.items() for row in rs}
    assert len(by_identity) == len(records)  # each record once, none twice
    differences = []
    for rec in records:
        table, row = by_identity[_identity(rec)]
        assert table == TABLE_OF_KIND[rec["kind"]]  # routed by its kind
        differences += _same(rec, row, f"{rec['kind']}[{_identity(rec)[1]}]")
    assert differences == []
    # Where the connector's rows differ from the file mode's (deploy/kafka-connect/README.md):
    # a JSON column whose value is a JSON string holds the bare string, not its JSON text.
    texts = [(r["result"]["content"], r["pair_id"]) for r in records if r["kind"] == "pair"]
    content, pair_id = next((c, i) for c, i in texts if isinstance(c, str))
    assert by_identity[("pair", pair_id)][1]["result"]["content"] == content != json.dumps(content)
