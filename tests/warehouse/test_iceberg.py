"""`--output-format iceberg` (issue 26, item 2): a run appends one snapshot per kind to tables in
a pyiceberg catalog (SQLite here), created from the generated schemas; re-running the same input
adds nothing (the run's fingerprint is in the snapshot summary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream_pairer.adapters.sinks.columns import TABLES, table_columns
from stream_pairer.adapters.sinks.iceberg import FINGERPRINT
from stream_pairer.cli.app import main

catalog_mod = pytest.importorskip("pyiceberg.catalog")
pytest.importorskip("sqlalchemy")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """A SQLite catalog configured the way a user configures one: environment variables."""
    monkeypatch.setenv("PYICEBERG_CATALOG__LOCAL__URI", f"sqlite:///{tmp_path / 'catalog.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__LOCAL__WAREHOUSE", f"file://{tmp_path / 'warehouse'}")
    from pyiceberg.utils.config import Config  # noqa: PLC0415

    monkeypatch.setattr(catalog_mod, "_ENV_CONFIG", Config())  # read at import; read again here
    return catalog_mod.load_catalog("local")


def _pair(*inputs: Path) -> int:
    return main(["pair", *map(str, inputs), "--out", "local/ai_tools", "--output-format", "iceberg", "-q"])


def test_a_run_appends_one_snapshot_per_kind_and_a_rerun_adds_nothing(
    catalog: object, tmp_path: Path
) -> None:
    assert _pair(EXAMPLE) == 0
    assert main(["pair", str(EXAMPLE), "--out", str(tmp_path / "j"), "-q"]) == 0
    tables = {t: catalog.load_table(("ai_tools", t)) for t in TABLES}  # type: ignore[attr-defined]
    for name, table in tables.items():
        assert [c.name for c in table.schema().fields] == [c.name for c in table_columns(name)]
        (snap,) = table.snapshots()
        assert snap.summary.get(FINGERPRINT)
        jsonl = [json.loads(x) for x in (tmp_path / "j" / f"{name}.jsonl").read_text().splitlines()]
        assert table.scan().to_arrow().num_rows == len(jsonl) > 0
    pairs = tables["pairs"].scan().to_arrow()
    assert str(pairs.schema.field("call_ts").type).startswith("timestamp")
    assert "list<element: " in str(pairs.schema.field("failures").type)
    got = sorted(pairs.column("pair_id").to_pylist())
    want = sorted(json.loads(x)["pair_id"] for x in (tmp_path / "j" / "pairs.jsonl").read_text().splitlines())
    assert got == want
    arguments = [c["arguments"] for c in pairs.column("call").to_pylist()]
    assert all(json.loads(a) is not None for a in arguments)  # JSON text, whatever its keys

    # DuckDB over the table (the README's query), typed by the table's schema
    pytest.importorskip("duckdb")
    con = tables["pairs"].scan().to_duckdb("pairs")
    assert con.sql("SELECT count(call_ts), count(*) FROM pairs").fetchall() == [(len(got), len(got))]
    types = dict(con.sql("SELECT column_name, column_type FROM (DESCRIBE pairs)").fetchall())
    assert types["call_ts"] == "TIMESTAMP WITH TIME ZONE" and types["failures"] == "VARCHAR[]"

    assert _pair(EXAMPLE) == 0  # the same day again: nothing added
    for name in TABLES:
        table = catalog.load_table(("ai_tools", name))  # type: ignore[attr-defined]
        assert len(table.snapshots()) == 1 and table.scan().to_arrow().num_rows == len(
            (tmp_path / "j" / f"{name}.jsonl").read_text().splitlines()
        )


def test_another_day_appends_its_own_snapshot(catalog: object, tmp_path: Path) -> None:
    day2 = tmp_path / "day2.jsonl"
    day2.write_text(
        '{"conversation_id":"d2","type":"tool_call","id":"a","name":"n","ts":"2026-12-01T00:00:00Z"}\n'
        '{"conversation_id":"d2","type":"tool_result","call_id":"a","content":"ok","ts":"2026-12-01T00:00:01Z"}\n'
    )
    assert _pair(EXAMPLE) == 0
    assert _pair(day2) == 0
    pairs = catalog.load_table(("ai_tools", "pairs"))  # type: ignore[attr-defined]
    runs = [s.summary.get(FINGERPRINT) for s in pairs.snapshots()]
    assert len(runs) == 2 and len(set(runs)) == 2
    assert "d2" in pairs.scan().to_arrow().column("conversation_id").to_pylist()


def test_a_bad_target_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pair", str(EXAMPLE), "--out", "no-namespace", "--output-format", "iceberg", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "CATALOG/NAMESPACE" in err
