"""The generated warehouse files (deploy/warehouse/) are current and usable, and the Kafka Connect
Iceberg sink routes every record kind to the table of its generated schema (issue 26, item 1)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stream_pairer.adapters.sinks.columns import TABLE_OF_KIND, TABLES, table_columns
from stream_pairer.adapters.sinks.ddl import iceberg_schema, rendered
from stream_pairer.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
WAREHOUSE = ROOT / "deploy" / "warehouse"
EXAMPLE = ROOT / "examples" / "mixed.jsonl"
SINK = ROOT / "deploy" / "kafka-connect" / "iceberg-sink.json"


def test_regenerating_gives_the_committed_files() -> None:
    for rel, text in rendered().items():
        assert (WAREHOUSE / rel).read_text() == text, f"{rel} is stale: run python scripts/gen_warehouse.py"
    proc = subprocess.run([sys.executable, "scripts/gen_warehouse.py", "--check"], cwd=ROOT, check=False)
    assert proc.returncode == 0


def test_a_schema_change_makes_the_check_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stream_pairer.adapters.sinks import columns  # noqa: PLC0415

    monkeypatch.setattr(
        columns, "table_columns", lambda t: (*table_columns(t), columns.Column("x", "string"))
    )
    from stream_pairer.adapters.sinks import ddl  # noqa: PLC0415

    monkeypatch.setattr(ddl, "table_columns", columns.table_columns)
    assert any((WAREHOUSE / rel).read_text() != text for rel, text in ddl.rendered().items())


def test_duckdb_ddl_takes_the_parquet_outputs_by_name(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "out"
    assert main(["pair", str(EXAMPLE), "--out", str(out), "-q", "--output-format", "parquet"]) == 0
    con = duckdb.connect()
    con.execute((WAREHOUSE / "duckdb.sql").read_text())
    for table in TABLES:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM read_parquet('{out / table}.parquet')")
        n = con.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert n is not None and n[0] > 0
        # the DDL's column types are the Parquet file's, column for column
        ddl_types = con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall()
        file_types = con.execute(
            f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM '{out / table}.parquet')"
        ).fetchall()
        assert ddl_types == file_types


def test_iceberg_schemas_are_valid_iceberg() -> None:
    schema_mod = pytest.importorskip("pyiceberg.schema")
    for table in TABLES:
        text = (WAREHOUSE / "iceberg" / f"{table}.schema.json").read_text()
        schema = schema_mod.Schema.model_validate_json(text)
        assert [f.name for f in schema.fields] == [c.name for c in table_columns(table)]
        ids = re.findall(r'"(?:id|element-id)": (\d+)', text)
        assert len(ids) == len(set(ids)), "field ids are unique"
    assert str(iceberg_schema("pairs")["fields"][0]["type"]) == "string"


def test_kafka_connect_iceberg_sink_routes_every_kind_to_its_generated_table() -> None:
    conn = json.loads(SINK.read_text())
    cfg = conn["config"]
    assert all(isinstance(v, str) for v in cfg.values()), "Connect configs are string maps"
    assert cfg["connector.class"] == "org.apache.iceberg.connect.IcebergSinkConnector"
    tables = cfg["iceberg.tables"].split(",")
    assert {t.split(".", 1)[1] for t in tables} == set(TABLES)
    assert cfg["iceberg.tables.route-field"] == "kind"
    # every record kind goes to exactly one table, the one the file mode writes it to
    for kind, table in TABLE_OF_KIND.items():
        hits = [t for t in tables if re.fullmatch(cfg[f"iceberg.table.{t}.route-regex"], kind)]
        assert hits == [f"ai_tools.{table}"], kind
    # the tables are created from the generated schemas, never inferred from the data
    assert cfg["iceberg.tables.auto-create-enabled"] == "false"
    assert cfg["iceberg.tables.evolve-schema-enabled"] == "false"
    assert cfg["iceberg.control.topic"] not in cfg["topics"].split(",")
    assert cfg["value.converter.schemas.enable"] == "false"
    secret = cfg["iceberg.catalog.credential"]
    assert secret.startswith("${file:") and "FileConfigProvider" in cfg["config.providers.file.class"]
    assert "iceberg-sink.json" in (SINK.parent / "README.md").read_text()
