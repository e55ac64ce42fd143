"""What a `--state` chain must never do (issue 26, a stranger's probes): read its own state back
as input, run into the directory it writes, or go on with other reading options than the run
before it; and what `--overwrite` must never remove."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stream_pairer.cli.app import main
from tests.hostile.child import cli, records

CALL = json.dumps({"conversation_id": "c", "type": "tool_call", "id": "1", "name": "n", "arguments": {},
                   "ts": "2025-01-01T00:00:00Z"}) + "\n"  # fmt: skip
RESULT = json.dumps({"conversation_id": "c", "type": "tool_result", "call_id": "1", "content": "ok",
                     "ts": "2025-01-01T00:00:01Z"}) + "\n"  # fmt: skip


def test_a_state_directory_inside_the_input_tree_is_not_read(tmp_path: Path) -> None:
    """`pair logs/ --state logs/st` twice: the second walk skips st/ (its state file is the
    engine's memory: read back it gave unknown_shape dead letters and a phantom orphan call)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_text(CALL)
    assert cli("pair", "logs/", "--out", "o1", "--state", "logs/st", "-q", cwd=tmp_path).rc == 0
    (logs / "a.jsonl").rename(tmp_path / "a.done")
    (logs / "b.jsonl").write_text(RESULT)
    run = cli("pair", "logs/", "--out", "o2", "--state", "logs/st", "--flush", cwd=tmp_path)
    assert run.rc == 0, run.err
    assert "1 state_dir" in run.err
    o2 = tmp_path / "o2"
    assert [r["call"]["id"] for r in records(o2, "pairs.jsonl")] == ["1"]
    assert records(o2, "orphans.jsonl") == records(o2, "dead_letter.jsonl") == []
    # an audit over the tree reads what the runs read: the state file is skipped there too (its
    # three lines were read as three more input records)
    audit = cli("audit", "--input", "logs/", "--outputs", "o2", cwd=tmp_path)
    assert audit.out.startswith("inputs:  1 records (0 unreadable"), audit.out


def test_the_state_files_are_never_inputs_by_glob_or_by_name(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "a.jsonl").write_text(CALL)
    assert cli("pair", "a.jsonl", "--out", "o1", "--state", "in/st", "-q", cwd=tmp_path).rc == 0
    (tmp_path / "in" / "b.jsonl").write_text(RESULT)
    run = cli("pair", "in/**/*.*", "--out", "o2", "--state", "in/st", "--flush", "-q", cwd=tmp_path)
    assert run.rc == 0 and "state_dir" in run.err, run.err
    assert [r["call"]["id"] for r in records(tmp_path / "o2", "pairs.jsonl")] == ["1"]
    assert records(tmp_path / "o2", "dead_letter.jsonl") == []
    (tmp_path / "c.jsonl").write_text(CALL)
    assert cli("pair", "c.jsonl", "--out", "o3", "--state", "in/st", "-q", cwd=tmp_path).rc == 0
    run = cli("pair", "in/st/state.jsonl.gz", "--out", "o4", "--state", "in/st", "-q", cwd=tmp_path)
    assert run.rc == 2 and "--state directory" in run.one_line()
    assert not (tmp_path / "o4").exists()


@pytest.mark.parametrize("state", ["o", "o/st", "."])
def test_out_and_state_must_be_two_separate_directories(tmp_path: Path, state: str) -> None:
    """The same directory was refused as "being written by stream-pairer pid N" (the run itself)."""
    (tmp_path / "o").mkdir()
    (tmp_path / "a.jsonl").write_text(CALL)
    run = cli("pair", "a.jsonl", "--out", "o", "--state", state, "-q", cwd=tmp_path)
    assert run.rc == 2 and "two separate directories" in run.one_line() and "pid" not in run.err
    assert list((tmp_path / "o").iterdir()) == []


def test_overwrite_keeps_the_users_files_in_a_partitioned_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only `dt=*/part-*.parquet` (and the directories that leaves empty) are stream-pairer's in a
    `<table>/` directory: a user's notes beside them stay, and one stderr line names them."""
    pytest.importorskip("pyarrow")
    first, second, out = tmp_path / "ts.jsonl", tmp_path / "other.jsonl", tmp_path / "ow"
    first.write_text(CALL)
    second.write_text(CALL.replace("2025-01-01", "2025-01-02"))
    opts = ["--out", str(out), "-q", "--output-format", "parquet", "--partition-by-day"]
    assert main(["pair", str(first), *opts]) == 0
    (out / "pairs" / "notes.txt").write_text("hi")
    (out / "orphans" / "dt=2025-01-01" / "mine.csv").write_text("keep")
    capsys.readouterr()
    assert main(["pair", str(second), *opts, "--overwrite"]) == 0
    assert (out / "pairs" / "notes.txt").read_text() == "hi"
    assert (out / "orphans" / "dt=2025-01-01" / "mine.csv").read_text() == "keep"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == [
        "dead_letter/dt=unknown/part-0.parquet",
        "orphans/dt=2025-01-02/part-0.parquet",
        "pairs/dt=unknown/part-0.parquet",
    ]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kept 2" in err[0] and "pairs/notes.txt" in err[0], err
    # ...and a JSONL run over it removes the partitions, not the user's files
    assert main(["pair", str(second), "--out", str(out), "-q", "--overwrite"]) == 0
    assert not list(out.rglob("*.parquet"))
    assert (out / "pairs" / "notes.txt").exists()
    assert (out / "orphans" / "dt=2025-01-01" / "mine.csv").exists()
    assert json.loads((out / "orphans.jsonl").read_text())["event"]["id"] == "1"


MAPPING = """if .event == "tool.start" then
  {type: "tool_call", conversation_id: .session, id: .span, name: .tool, arguments: {}, ts: .at}
elif .event == "tool.end" then {type: "tool_result", conversation_id: .session, call_id: .span,
  content: .output, ts: .at}
else empty end
"""


def _mapped_chain_start(tmp_path: Path) -> tuple[Path, Path]:
    """Run 1 of a chain with `--map`: its call t1 is carried; p2 holds t1's result, canonical."""
    (tmp_path / "inhouse.jq").write_text(MAPPING)
    p1 = tmp_path / "p1.jsonl"
    p1.write_text(json.dumps({"at": "2025-05-01T09:00:00Z", "session": "s", "event": "tool.start",
                              "span": "t1", "tool": "search"}) + "\n")  # fmt: skip
    p2 = tmp_path / "p2.jsonl"
    p2.write_text(RESULT.replace('"c"', '"s"').replace('"1"', '"t1"'))
    state = tmp_path / "st"
    argv = ["pair", str(p1), "--map", str(tmp_path / "inhouse.jq"), "--out", str(tmp_path / "r1")]
    assert main([*argv, "--state", str(state), "-q"]) == 0
    return p2, state


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ((), ("--map differs", "sha256", "none here")),  # run 2 without the mapping of run 1
        (
            ("--map", "{IN}/inhouse.jq", "--call-timeout", "30"),
            ("--call-timeout differs", "600.0 there", "30.0 here"),
        ),
        (
            ("--map", "{IN}/inhouse.jq", "--conversation-field", "session"),
            ("--conversation-field differs", "session here"),
        ),
        (("--map", "{IN}/inhouse.jq", "--raw", "omit"), ("--raw differs", "all there", "omit here")),
    ],
)
def test_a_chain_run_with_other_reading_options_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, ...], says: tuple[str, ...]
) -> None:
    """Run 2 without run 1's --map read the carried records as the built-in readers do: dead
    letters, a MISMATCH, exit 0. Now refused in one line naming the option and both values."""
    p2, state = _mapped_chain_start(tmp_path)
    capsys.readouterr()
    opts = [o.replace("{IN}", str(tmp_path)) for o in change]
    argv = ["pair", str(p2), "--out", str(tmp_path / "r2"), "--state", str(state), "--flush", "-q", *opts]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and all(s in err for s in says), err
    assert not (tmp_path / "r2").exists()
    # ...and the same options are accepted: the carried call pairs
    argv = ["pair", str(p2), "--out", str(tmp_path / "r3"), "--state", str(state), "--flush", "-q"]
    assert main([*argv, "--map", str(tmp_path / "inhouse.jq")]) == 0


def test_pair_exits_non_zero_when_its_summary_says_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state from before the options were recorded cannot refuse the changed --map: the carried
    call is read by the built-in readers, conservation fails, and the exit status says so (3)."""
    p2, state = _mapped_chain_start(tmp_path)
    path = state / "state.jsonl.gz"
    head, *rest = gzip.decompress(path.read_bytes()).splitlines()
    old = {k: v for k, v in json.loads(head).items() if k != "options"}
    path.write_bytes(gzip.compress(b"\n".join([json.dumps(old).encode(), *rest]) + b"\n"))
    capsys.readouterr()
    argv = ["pair", str(p2), "--out", str(tmp_path / "r2"), "--state", str(state), "--flush"]
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert "(MISMATCH)" in out and "conservation MISMATCH" in err
