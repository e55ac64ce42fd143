"""`--output-format parquet` (issue 26, item 1): DuckDB reads the typed tables with no column list
and finds every value the JSONL has, where `read_json_auto` lost them (a field absent from the
first rows typed NULL); empty outputs keep their schema; Hive partitions by event day."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from stream_pairer.adapters.sinks.columns import TABLES, Column, table_columns
from stream_pairer.cli.app import main

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"
PARQUET = ("--output-format", "parquet")


def _late_failures(path: Path, calls: int = 40) -> Path:
    """One conversation whose first calls are clean and whose later ones pass the tool-call cap
    (`termination`): `failure` is absent from the first rows, as on the issue's big file."""
    lines = []
    for i in range(calls):
        base = {"conversation_id": "c1", "ts": f"2026-11-30T09:00:{i:02d}.000Z"}
        args = {"q": f"x{i}"} if i % 2 else {"path": f"/tmp/{i}", "deep": {"n": i}}
        lines.append(base | {"type": "tool_call", "id": f"k{i}", "name": "search", "arguments": args})
        lines.append(base | {"type": "tool_result", "call_id": f"k{i}", "content": f"r{i}"})
    lines.append({"conversation_id": "c2", "type": "tool_call", "id": "lonely", "name": "n"})  # undated
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _same(col: Column, want: Any, got: Any, where: str) -> None:
    if want is None:
        return  # the JSONL has no value here
    assert got is not None, f"{where}: NULL where the JSONL has {want!r}"
    if col.type == "struct":
        for f in col.fields:
            _same(f, want.get(f.name), got.get(f.name), f"{where}.{f.name}")
    elif col.type == "json":
        assert json.loads(got) == want, where
    elif col.type == "timestamp":
        assert got == datetime.fromisoformat(want), where
    else:
        assert got == want, where


def _key(r: dict[str, Any]) -> str:
    return json.dumps(r.get("pair_id") or r.get("source") or r.get("event", {}).get("source"))


def _compare(out_jsonl: Path, parquet: Path, table: str) -> int:
    want = [json.loads(x) for x in (out_jsonl / f"{table}.jsonl").read_text().splitlines()]
    cur = duckdb.sql(f"SELECT * FROM read_parquet('{parquet}')")  # no column list
    names = cur.columns
    got = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    assert len(got) == len(want)
    columns = table_columns(table)
    for w, g in zip(sorted(want, key=_key), sorted(got, key=_key), strict=True):
        for col in columns:
            _same(col, w.get(col.name), g.get(col.name), f"{table}.{col.name}")
        assert set(w) <= {c.name for c in columns}, "every JSONL field has a column"
    return len(want)


def _types(parquet: Path) -> dict[str, str]:
    rows = duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM '{parquet}')")
    return dict(rows.fetchall())


def test_parquet_has_every_value_of_the_jsonl_and_typed_columns(tmp_path: Path) -> None:
    src = _late_failures(tmp_path / "late.jsonl")
    for fmt in ("jsonl", "parquet"):
        argv = ["pair", str(src), str(EXAMPLE), "--out", str(tmp_path / fmt), "-q", "--max-tool-calls", "12"]
        assert main([*argv, "--output-format", fmt]) == 0
    pairs = (tmp_path / "jsonl" / "pairs.jsonl").read_text().splitlines()
    failures = [json.loads(x)["failure"] for x in pairs]
    late = sum(1 for f in failures if f)
    assert late >= 5 and not any(failures[:12])  # the shape: absent from the first rows
    typed = duckdb.sql(f"SELECT count(failure) FROM '{tmp_path / 'parquet' / 'pairs.parquet'}'")
    assert typed.fetchall() == [(late,)]
    for table in TABLES:
        assert _compare(tmp_path / "jsonl", tmp_path / "parquet" / f"{table}.parquet", table) > 0
    types = _types(tmp_path / "parquet" / "pairs.parquet")
    assert types["call_ts"] == "TIMESTAMP WITH TIME ZONE" and types["failures"] == "VARCHAR[]"
    assert types["failure"] == "VARCHAR" and types["latency_ms"] == "DOUBLE"
    assert "arguments JSON" in types["call"] and "raw JSON" in types["call"]


def test_empty_outputs_keep_their_schema(tmp_path: Path) -> None:
    src = tmp_path / "one.jsonl"
    src.write_text('{"conversation_id":"c","type":"tool_call","id":"a","name":"n"}\n')
    assert main(["pair", str(src), "--out", str(tmp_path / "o"), "-q", *PARQUET]) == 0
    assert list(_types(tmp_path / "o" / "pairs.parquet")) == [c.name for c in table_columns("pairs")]
    empty = duckdb.sql(f"SELECT count(*) FROM '{tmp_path / 'o' / 'dead_letter.parquet'}'")
    assert empty.fetchall() == [(0,)]
    # the same schema whatever the data: the files of two runs read as one table
    assert main(["pair", str(EXAMPLE), "--out", str(tmp_path / "p"), "-q", *PARQUET]) == 0
    assert _types(tmp_path / "o" / "pairs.parquet") == _types(tmp_path / "p" / "pairs.parquet")
    both = f"['{tmp_path / 'o' / 'pairs.parquet'}', '{tmp_path / 'p' / 'pairs.parquet'}']"
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet({both})").fetchall()[0][0] > 0


def test_hive_partitions_by_event_day(tmp_path: Path) -> None:
    src = _late_failures(tmp_path / "late.jsonl")
    out = tmp_path / "o"
    assert (
        main(["pair", str(src), str(EXAMPLE), "--out", str(out), "-q", *PARQUET, "--partition-by-day"]) == 0
    )
    parts = sorted(p.parent.name for p in (out / "orphans").rglob("*.parquet"))
    assert "dt=unknown" in parts and "dt=2026-11-30" in parts  # the undated orphan, the dated ones
    assert [p.name for p in (out / "dead_letter").iterdir()] == ["dt=unknown"]
    files = f"read_parquet('{out}/pairs/*/*.parquet', hive_partitioning=true)"
    rows = duckdb.sql(f"SELECT dt, count(*) FROM {files} GROUP BY dt").fetchall()
    assert main(["pair", str(src), str(EXAMPLE), "--out", str(tmp_path / "j"), "-q"]) == 0
    pairs = (tmp_path / "j" / "pairs.jsonl").read_text().splitlines()
    days = Counter(json.loads(x)["call_ts"][:10] for x in pairs)
    assert {str(dt): n for dt, n in rows} == dict(days)  # every pair in the day of its call
    assert not list(out.glob(".parquet.*")), "no temporary directory left"


def test_a_missing_pyarrow_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys  # noqa: PLC0415

    for name in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, name, None)  # `import pyarrow` now raises ImportError
    assert main(["pair", str(EXAMPLE), "--out", str(tmp_path / "o"), "-q", *PARQUET]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "stream-pairer[warehouse]" in err
