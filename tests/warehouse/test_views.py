"""deploy/warehouse/views.duckdb.sql (issue 26, item 6): every kind under the same columns, and one
row per input event whose count is the conservation count."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from stream_pairer.cli.app import main

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"
VIEWS = ROOT / "deploy" / "warehouse" / "views.duckdb.sql"


def test_views_give_every_kind_the_same_columns(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    argv = ["pair", str(EXAMPLE), "--out", str(tmp_path / "p"), "-q", "--output-format", "parquet"]
    assert main([*argv, "--summary-json", str(summary)]) == 0
    assert main(["pair", str(EXAMPLE), "--out", str(tmp_path / "j"), "-q"]) == 0
    con = duckdb.connect()
    for table in ("pairs", "orphans", "dead_letter"):
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{tmp_path / 'p' / table}.parquet')")
    con.execute(VIEWS.read_text())

    records = []
    for name in ("pairs", "orphans", "dead_letter"):
        records += [json.loads(x) for x in (tmp_path / "j" / f"{name}.jsonl").read_text().splitlines()]
    kinds = dict(con.execute("SELECT kind, count(*) FROM tool_outputs GROUP BY kind").fetchall())
    assert kinds == dict(Counter(r["kind"] for r in records))
    # one `ts` for every kind: the pair's call time, the orphan's event time, where the record has one
    dated = sum(1 for r in records if (r.get("call_ts") or r.get("result_ts") or r.get("ts")))
    assert con.execute("SELECT count(ts) FROM tool_outputs").fetchall() == [(dated,)]
    labels = con.execute("SELECT count(*) FROM tool_outputs WHERE label IS NULL").fetchall()
    assert labels == [(0,)]  # match or reason, for every record
    assert con.execute("SELECT count(*) FROM tool_outputs WHERE source IS NULL").fetchall() == [(0,)]

    # tool_events: one row per input event, the conservation count of the run's summary
    events_in = sum(json.loads(summary.read_text())["events"].values())
    assert con.execute("SELECT count(*) FROM tool_events").fetchall() == [(events_in,)]
    sides = dict(con.execute("SELECT side, count(*) FROM tool_events GROUP BY side").fetchall())
    pairs = sum(1 for r in records if r["kind"] == "pair")
    assert sides["call"] == pairs + sum(1 for r in records if r["kind"] == "orphan_call")
    # every event's own identity survives under the common names
    ids = {row[0] for row in con.execute("SELECT id FROM tool_events").fetchall()}
    for r in records:
        for side in ("call", "result", "event"):
            if isinstance(r.get(side), dict) and r[side]["id"] is not None:
                assert r[side]["id"] in ids
