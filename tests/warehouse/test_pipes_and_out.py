"""`--out -` (records to stdout, summary to stderr) and the `--out` safety rule (issue 26, items 4, 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from stream_pairer.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "stream_pairer", "pair", *args]
    return subprocess.run(cmd, env=env, input=stdin, capture_output=True, timeout=120, check=False)


def test_out_dash_writes_every_record_to_stdout_and_the_summary_to_stderr(tmp_path: Path) -> None:
    proc = _run(str(EXAMPLE), "--out", "-")
    assert proc.returncode == 0, proc.stderr
    assert not (Path.cwd() / "-").exists()
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert b"conservation:" in proc.stderr and b"conservation:" not in proc.stdout
    # the same records as the files, each with its kind
    assert main(["pair", str(EXAMPLE), "--out", str(tmp_path / "o"), "-q"]) == 0
    files = []
    for name in ("pairs", "orphans", "dead_letter"):
        files += [json.loads(x) for x in (tmp_path / "o" / f"{name}.jsonl").read_text().splitlines()]
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, lines)) == sorted(map(key, files))
    kinds = Counter(r["kind"] for r in lines)
    assert (
        kinds["pair"] > 0 and kinds["dead_letter"] > 0 and kinds["orphan_call"] + kinds["orphan_result"] > 0
    )


def test_out_dash_pipes_into_duckdb() -> None:
    """The README's pipe, through a real pipe: DuckDB reads /dev/stdin as one object per line."""
    pytest.importorskip("duckdb")
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    query = (
        "import duckdb, json; print(json.dumps(dict(duckdb.sql(\"SELECT json->>'kind' AS kind, count(*) "
        "FROM read_ndjson_objects('/dev/stdin') GROUP BY kind\").fetchall())))"
    )
    pairer = subprocess.Popen(
        [sys.executable, "-m", "stream_pairer", "pair", str(EXAMPLE), "--out", "-", "-q"],
        env=env,
        stdout=subprocess.PIPE,
    )
    reader = subprocess.run(
        [sys.executable, "-c", query], stdin=pairer.stdout, capture_output=True, timeout=120, check=True
    )
    assert pairer.stdout is not None
    pairer.stdout.close()
    assert pairer.wait(timeout=60) == 0
    counts = eval(reader.stdout.decode())
    expected = Counter(
        json.loads(x)["kind"] for x in _run(str(EXAMPLE), "--out", "-", "-q").stdout.splitlines()
    )
    assert counts == dict(expected) and counts["pair"] > 0


def test_an_existing_non_empty_out_is_refused_unless_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run(str(EXAMPLE), "--out", str(out), "-q").returncode == 0
    before = (out / "pairs.jsonl").read_bytes()
    (out / "pairs.jsonl").write_bytes(b"day 1\n")
    again = _run(str(EXAMPLE), "--out", str(out), "-q")
    assert again.returncode == 2
    err = again.stderr.decode().strip()
    assert err.count("\n") == 0 and "not empty" in err and "--overwrite" in err
    assert (out / "pairs.jsonl").read_bytes() == b"day 1\n"  # untouched
    assert _run(str(EXAMPLE), "--out", str(out), "-q", "--overwrite").returncode == 0
    assert (out / "pairs.jsonl").read_bytes() == before
    (tmp_path / "empty").mkdir()  # an empty directory is fine
    assert _run(str(EXAMPLE), "--out", str(tmp_path / "empty"), "-q").returncode == 0


def test_overwrite_removes_the_outputs_an_earlier_run_wrote_in_another_format(tmp_path: Path) -> None:
    """JSONL over parquet, partitioned over unpartitioned parquet and back: only the last run's
    outputs remain, and only stream-pairer's own names go (a file of the user's stays, as does a
    `pairs/` directory holding anything but partitions)."""
    pytest.importorskip("pyarrow")
    out = tmp_path / "out"

    def run(*opts: str) -> set[str]:
        assert main(["pair", str(EXAMPLE), "--out", str(out), "-q", "--overwrite", *opts]) == 0
        return {p.name for p in out.iterdir()}

    parquet = {"pairs.parquet", "orphans.parquet", "dead_letter.parquet"}
    assert run("--output-format", "parquet") == parquet
    (out / "notes.txt").write_text("mine")
    (out / "orphans.jsonl.bak").write_text("mine")
    jsonl = {"pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl"}
    mine = {"notes.txt", "orphans.jsonl.bak"}
    assert run() == jsonl | mine
    assert (
        run("--output-format", "parquet", "--partition-by-day") == {"pairs", "orphans", "dead_letter"} | mine
    )
    assert any((out / "pairs").glob("dt=*/part-0.parquet"))
    assert run("--output-format", "parquet") == parquet | mine
    (out / "pairs").mkdir()
    (out / "pairs" / "x.csv").write_text("mine")  # not a partition tree: not stream-pairer's
    assert run() == jsonl | mine | {"pairs"}
    assert (out / "notes.txt").read_text() == "mine" and (out / "pairs" / "x.csv").exists()


def test_out_dash_is_jsonl_only() -> None:
    proc = _run(str(EXAMPLE), "--out", "-", "--output-format", "parquet")
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr.decode().strip().count("\n") == 0 and b"--out - writes JSONL" in proc.stderr
    proc = _run(str(EXAMPLE), "--out", "-", "--partition-by-day")  # was accepted and ignored
    assert proc.returncode == 2 and not proc.stdout
    assert b"--partition-by-day needs --output-format parquet" in proc.stderr


def test_the_progress_line_counts_its_own_ticks() -> None:
    """feed_file used to assemble the compiled core's Summary for every record, for a progress
    line printed every 2 s: half of a JSONL run's CPU (1.38 s -> 0.60 s on 52k records). The line
    now counts the records it is told of (a block's worth at a time) and reads no summary."""
    import io  # noqa: PLC0415

    from stream_pairer.cli.commands.pair import _Progress  # noqa: PLC0415

    out = io.StringIO()
    progress = _Progress(out, started=-1e9)  # long past: the first due tick prints
    for _ in range(1023):
        progress.tick()
    assert out.getvalue() == ""  # checked for time only every ~1024 records
    progress.tick(1)
    progress.tick(3 * 1024)  # a block's records at once: due again only 2 s later
    assert out.getvalue().startswith("stream-pairer: 1,024 records") and out.getvalue().count("\n") == 1
