"""Hostile files and directories (issue 27): names that are not UTF-8, corrupt compression,
/proc and devices, named pipes, links out of the input tree, loops, sockets, a second run into
the same --out, and SIGTERM in the middle of a run. Each ends in records or in one line and an
exit status, never a traceback or a hang, and leaves no temporary file behind."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import threading
from pathlib import Path

import pytest

from tests.hostile.child import assert_conserved, call_line, cli, no_litter, records, start


def test_an_undecodable_file_name_is_read_and_shown_escaped(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "good.jsonl").write_text(call_line(1))
    with open(os.fsencode(logs) + b"/bad\xff.jsonl", "w") as f:  # the OS name is these bytes
        f.write(call_line(2))
    out = tmp_path / "out"
    run = cli("pair", str(logs), "--out", str(out), "-q")
    assert run.rc == 0 and "Traceback" not in run.err, run.err
    files = sorted(r["event"]["source"]["file"] for r in records(out, "orphans.jsonl"))
    assert files == ["bad\\xff.jsonl", "good.jsonl"]  # both read, the name escaped
    assert_conserved([str(logs)], out)


def test_corrupt_gzip_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    data = bytearray(gzip.compress("".join(call_line(i) for i in range(5000)).encode()))
    data[40:48] = b"\xff" * 8  # bytes flipped mid-stream
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(bytes(data))
    out = tmp_path / "out"
    run = cli("pair", str(bad), "--out", str(out), "-q")
    assert run.rc == 1
    assert run.one_line().startswith(f"stream-pairer pair: cannot read {bad}")
    assert not (out / "pairs.jsonl").exists()
    no_litter(out)


def test_proc_self_mem_is_refused_up_front(tmp_path: Path) -> None:
    run = cli("pair", "/proc/self/mem", "--out", str(tmp_path / "out"), "-q")
    assert run.rc == 1
    assert run.one_line() == "stream-pairer pair: cannot read /proc/self/mem: Input/output error"
    assert not (tmp_path / "out").exists()  # refused before anything was written


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_up_front(tmp_path: Path, device: str) -> None:
    run = cli("pair", device, "--out", str(tmp_path / "out"), "-q")
    assert run.rc == 1 and "it is a device" in run.one_line()


def test_a_named_pipe_is_read_to_its_end(tmp_path: Path) -> None:
    """Its data used to be consumed by the up-front check, then the run blocked for ever."""
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)

    def writer() -> None:
        with open(fifo, "w") as f:  # blocks until the run opens the pipe
            f.write(call_line(1) + call_line(2))

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    out = tmp_path / "out"
    run = start("pair", str(fifo), "--out", str(out), "-q").finish(timeout=60)
    thread.join(5)
    assert run.rc == 0, run.err
    assert sorted(r["event"]["id"] for r in records(out, "orphans.jsonl")) == ["c1", "c2"]
    no_litter(out)


def test_a_walk_skips_what_it_should_not_read_and_says_why(tmp_path: Path) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text(call_line(99))
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "a.jsonl").write_text(call_line(1))
    (logs / "sub" / "b.jsonl").write_text(call_line(2))
    (logs / "passwd.jsonl").symlink_to("/etc/passwd")  # outside the inputs
    (logs / "secret.jsonl").symlink_to(secret)  # outside the inputs
    (logs / "dangling.jsonl").symlink_to(tmp_path / "nothing")
    (logs / "self.jsonl").symlink_to(logs / "self.jsonl")  # a loop
    (logs / "sub" / "up").symlink_to(logs)  # a directory loop
    (logs / "sublink").symlink_to(logs / "sub")  # the same tree again
    os.mkfifo(logs / "pipe.jsonl")  # would block the run if opened
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(logs / "sock.jsonl"))
    try:
        out = tmp_path / "out"
        summary = tmp_path / "summary.json"
        run = cli("pair", str(logs), "--out", str(out), "-q", "--summary-json", str(summary))
        assert run.rc == 0, run.err
        skipped = json.loads(summary.read_text())["inputs_skipped"]
        assert skipped == {
            "link_outside_inputs": 2,
            "dangling_link": 1,
            "link_loop": 2,
            "directory_link": 1,
            "fifo": 1,
            "socket": 1,
        }
        assert "skipped 8 directory entries" in run.one_line()
        assert sorted(r["event"]["id"] for r in records(out, "orphans.jsonl")) == ["c1", "c2"]
        assert records(out, "dead_letter.jsonl") == []  # /etc/passwd not copied in
        assert_conserved([str(logs)], out)
        followed = cli("pair", str(logs), "--out", str(out), "-q", "--follow-links", "--overwrite")
        assert followed.rc == 0
        ids = sorted(r["event"]["id"] for r in records(out, "orphans.jsonl"))
        assert ids == ["c1", "c2", "c99"] and records(out, "dead_letter.jsonl")  # asked for: read
    finally:
        sock.close()


def test_a_second_run_into_the_same_out_is_refused_naming_the_first(tmp_path: Path) -> None:
    """The first run holds the lock while it waits on a pipe nobody writes yet."""
    fifo = tmp_path / "slow.jsonl"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    first = start("pair", str(fifo), "--out", str(out), "-q")
    lock = out / ".stream-pairer.lock"
    first.wait_until(lambda: lock.exists() and bool(lock.read_text()))
    other = tmp_path / "other.jsonl"
    other.write_text(call_line(1))
    second = cli("pair", str(other), "--out", str(out), "-q")
    assert second.rc == 2
    line = second.one_line()
    assert f"refusing --out {out}: it is being written by stream-pairer pid" in line
    with open(fifo, "w") as f:
        f.write(call_line(7))
    run = first.finish(timeout=60)
    assert run.rc == 0
    assert [r["event"]["id"] for r in records(out, "orphans.jsonl")] == ["c7"]  # the first's
    no_litter(out)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_leaves_no_temporary_file(tmp_path: Path, signum: int) -> None:
    """Stopped while its outputs are temporary files: they are removed, earlier outputs stay."""
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    (out / "pairs.jsonl").write_text("earlier\n")
    child = start("pair", str(fifo), "--out", str(out), "-q", "--overwrite")
    with open(fifo, "w") as f:
        f.write(call_line(1))
        f.flush()
        child.wait_until(lambda: any(p.name.endswith(".tmp") for p in out.iterdir()))
        child.signal(signum)
        run = child.finish(timeout=60)
    assert run.rc == 128 + signum
    assert run.one_line() == (
        f"stream-pairer pair: stopped by {signal.Signals(signum).name}: outputs left as they were"
    )
    assert (out / "pairs.jsonl").read_text() == "earlier\n"
    no_litter(out)


def test_a_link_to_a_file_inside_the_tree_is_read_once(tmp_path: Path) -> None:
    """The target is read where it lies; the link is counted as skipped (`file_link`), never a
    second copy of its records."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_text(call_line(1))
    os.symlink(logs / "a.jsonl", logs / "inside.jsonl")
    out = tmp_path / "out"
    summary = tmp_path / "summary.json"
    run = cli("pair", str(logs), "--out", str(out), "-q", "--summary-json", str(summary))
    assert run.rc == 0, run.err
    assert [r["event"]["source"]["file"] for r in records(out, "orphans.jsonl")] == ["a.jsonl"]
    assert json.loads(summary.read_text())["inputs_skipped"] == {"file_link": 1}


def test_two_runs_cannot_share_one_state_directory(tmp_path: Path) -> None:
    """Two runs carrying one --state would both take its held events (a pair made twice): the
    second is refused while the first holds the state, naming it."""
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    state = tmp_path / "state"
    first = start("pair", str(fifo), "--out", str(tmp_path / "o1"), "-q", "--state", str(state))
    with open(fifo, "w") as f:
        f.write(call_line(1))
        f.flush()
        first.wait_until((state / ".stream-pairer.lock").exists)
        (tmp_path / "d2.jsonl").write_text(call_line(2))
        second = cli(
            "pair", str(tmp_path / "d2.jsonl"), "--out", str(tmp_path / "o2"), "-q", "--state", str(state)
        )
    assert second.rc == 2
    assert "is being written by stream-pairer pid" in second.one_line()
    assert first.finish(timeout=60).rc == 0


def test_an_earlier_runs_outputs_in_the_input_tree_are_not_read(tmp_path: Path) -> None:
    """`pair logs/ --out logs/out` then `pair logs/ --out logs/out2`: the second run does not read
    the first run's outputs back as tool events (they were `discovered` pairs before)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_text(call_line(1))
    assert cli("pair", str(logs), "--out", str(logs / "out"), "-q").rc == 0
    summary = tmp_path / "summary.json"
    run = cli("pair", str(logs), "--out", str(logs / "out2"), "-q", "--summary-json", str(summary))
    assert run.rc == 0, run.err
    assert [r["event"]["source"]["file"] for r in records(logs / "out2", "orphans.jsonl")] == ["a.jsonl"]
    assert records(logs / "out2", "pairs.jsonl") == [] and records(logs / "out2", "dead_letter.jsonl") == []
    assert json.loads(summary.read_text())["inputs_skipped"] == {"run_output": 3}


def test_the_walk_knows_the_names_the_outputs_are_written_under() -> None:
    from stream_pairer.adapters.outputs import OUTPUT_FILES  # noqa: PLC0415
    from stream_pairer.adapters.walk import RUN_OUTPUTS  # noqa: PLC0415

    assert frozenset(OUTPUT_FILES.values()) == RUN_OUTPUTS
