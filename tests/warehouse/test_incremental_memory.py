"""Incremental runs (issue 26, item 4), what finished before the cut: `--state DIR` carries the
engine's memory (closed ids, the tagger's per-request counters and remembered calls, every
conversation's clock) and the history dedup, so records that relate to events finished in an
earlier run come out as one run gives them (adapters/state.py, native/src/engine/carry.rs)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stream_pairer.cli.app import main
from tests.warehouse.test_incremental import ROOT, _key, _records


def _ts(seconds: int) -> str:
    return f"2026-01-01T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}Z"


def call(conv: str, ident: str, at: int, name: str = "n", args: Any = None) -> dict[str, Any]:
    arguments = {"k": ident} if args is None else args
    return {"conversation_id": conv, "type": "tool_call", "id": ident, "name": name, "arguments": arguments,
            "ts": _ts(at)}  # fmt: skip


def result(conv: str, ident: str, at: int) -> dict[str, Any]:
    rec = {"conversation_id": conv, "type": "tool_result", "call_id": ident, "content": f"ok {ident}"}
    return rec | {"ts": _ts(at)}


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _parts(d: Path) -> tuple[Path, Path, Path]:
    """Three consecutive parts. Before the first cut: a1 paired, l1 timed out (l2's time passes its
    10 minutes), 8 calls of one request, a `grep` call. After it: a1's result again, l1's late
    result, calls 9-14 of the request (the 13th crosses the default cap of 12), the same `grep`
    call again, and o1; o1 and c13 are answered after the second cut (where a1's result comes a
    third time)."""
    grep = {"q": "x"}
    p1 = [call("dup", "a1", 0), result("dup", "a1", 1), call("late", "l1", 0)]
    p1 += [call("late", "l2", 1200), result("late", "l2", 1201)]
    for i in range(1, 9):
        p1 += [call("cap", f"c{i}", 10 * i), result("cap", f"c{i}", 10 * i + 1)]
    p1 += [call("rep", "r1", 5, "grep", grep), result("rep", "r1", 6)]
    p2 = [result("dup", "a1", 5), call("dup", "a1", 6), result("dup", "a1", 7), result("late", "l1", 1205)]
    for i in range(9, 15):  # c13 is answered after the second cut: held across it with its tag
        p2 += [call("cap", f"c{i}", 10 * i)] + ([] if i == 13 else [result("cap", f"c{i}", 10 * i + 1)])
    p2 += [call("rep", "r2", 50, "grep", grep), result("rep", "r2", 51), call("open", "o1", 0)]
    p3 = [result("open", "o1", 30), result("cap", "c13", 150), call("cap", "c15", 200)]
    p3 += [result("cap", "c15", 201), result("dup", "a1", 9)]
    return _write(d / "p1.jsonl", p1), _write(d / "p2.jsonl", p2), _write(d / "p3.jsonl", p3)


def _chain(tmp_path: Path, p1: Path, p2: Path, p3: Path, *extra: str) -> list[dict[str, Any]]:
    """p1, then p2 from stdin (named as its file), then p3 with --flush, through one --state."""
    state = str(tmp_path / "state")
    assert main(["pair", str(p1), "--out", str(tmp_path / "a"), "--state", state, "-q", *extra]) == 0
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "stream_pairer", "pair", "-", "--stdin-name", p2.name]
    cmd += ["--out", str(tmp_path / "b"), "--state", state, "-q", *extra]
    subprocess.run(cmd, input=p2.read_bytes(), env=env, check=True, timeout=120)
    argv = ["pair", str(p3), "--out", str(tmp_path / "c"), "--state", state, "--flush", "-q", *extra]
    assert main(argv) == 0
    return _records(tmp_path / "a", tmp_path / "b", tmp_path / "c")


def _side(rec: dict[str, Any]) -> dict[str, Any]:
    return rec["call"] if rec["kind"] == "pair" else rec["event"]


def test_three_runs_equal_one_for_what_finished_before_the_cut(tmp_path: Path) -> None:
    p1, p2, p3 = _parts(tmp_path)
    chain = _chain(tmp_path, p1, p2, p3)
    assert main(["pair", str(p1), str(p2), str(p3), "--out", str(tmp_path / "one"), "-q"]) == 0
    assert sorted(map(_key, chain)) == sorted(map(_key, _records(tmp_path / "one")))
    # ...and each case came out as one run gives it, not as a first run would:
    by = {(r.get("reason"), _side(r)["id"], _side(r)["source"]["file"]) for r in chain}
    assert {("duplicate_result", "a1", "p2.jsonl"), ("late_result", "l1", "p2.jsonl")} <= by
    assert ("duplicate_result", "a1", "p3.jsonl") in by  # a1 closed again by p2's pair
    assert not [r for r in chain if r.get("reason") == "no_call"]
    pairs = {r["call"]["id"]: r for r in chain if r["kind"] == "pair"}
    assert pairs["c13"]["failure"] == "termination" and "call 13" in pairs["c13"]["failure_detail"]
    # (l2: 20 minutes after its request's first call, past the time cap)
    assert {i for i, r in pairs.items() if r["failure"] == "termination"} == {"l2", "c13", "r2"}
    assert "repeats call r1" in pairs["r2"]["failure_detail"]
    assert pairs["o1"]["result"]["source"]["file"] == pairs["c13"]["result"]["source"]["file"] == "p3.jsonl"


def test_a_resent_history_copy_after_the_cut_is_still_a_copy(tmp_path: Path) -> None:
    """Wire logs re-send the whole history with every request: the second file's copies of calls
    and results read in the first are counted once (the history dedup is carried)."""

    def use(i: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": i, "name": "t", "input": {"q": i}}

    def res(i: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": i, "content": f"ok {i}"}

    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    exchanges = []
    for i in ("u1", "u2", "u3", None):
        answer = [use(i)] if i else [{"type": "text", "text": "done"}]
        exchanges.append({"session_id": "w", "request": {"body": {"messages": list(history)}},
                          "response": {"body": {"role": "assistant", "content": answer}}})  # fmt: skip
        if i:
            history += [{"role": "assistant", "content": [use(i)]}, {"role": "user", "content": [res(i)]}]
    w1, w2 = _write(tmp_path / "w1.jsonl", exchanges[:2]), _write(tmp_path / "w2.jsonl", exchanges[2:])
    state = str(tmp_path / "state")
    assert main(["pair", str(w1), "--out", str(tmp_path / "a"), "--state", state, "-q"]) == 0
    assert main(["pair", str(w2), "--out", str(tmp_path / "b"), "--state", state, "--flush", "-q"]) == 0
    assert main(["pair", str(w1), str(w2), "--out", str(tmp_path / "one"), "-q"]) == 0
    two = _records(tmp_path / "a", tmp_path / "b")
    assert sorted(map(_key, two)) == sorted(map(_key, _records(tmp_path / "one")))
    assert sorted((r["kind"], r["call"]["id"]) for r in two) == [("pair", f"u{i}") for i in (1, 2, 3)]


def test_the_carried_closed_ids_keep_to_the_limit_of_the_chain(tmp_path: Path) -> None:
    """Run 1 closes five ids and, limited to two remembered ids, carries the newest two: in run 2
    their results again are duplicates, the three forgotten ones wait for a call (no_call at
    --flush), as in one run with the limit. (A run 2 with another limit is refused: stateopts.py.)"""
    ids = [f"a{i}" for i in range(5)]
    p1 = _write(tmp_path / "p1.jsonl", [r for i in ids for r in (call("x", i, 0), result("x", i, 1))])
    p2 = _write(tmp_path / "p2.jsonl", [result("x", i, 2) for i in ids])
    state, limit = str(tmp_path / "state"), ["--max-closed-ids", "2"]
    assert main(["pair", str(p1), "--out", str(tmp_path / "a"), "--state", state, "-q", *limit]) == 0
    argv = ["pair", str(p2), "--out", str(tmp_path / "b"), "--state", state, "--flush", "-q"]
    assert main([*argv, *limit]) == 0
    reasons = {r["event"]["id"]: r["reason"] for r in _records(tmp_path / "b")}
    assert reasons == dict.fromkeys(ids[:3], "no_call") | dict.fromkeys(ids[3:], "duplicate_result")
    assert main(["pair", str(p1), str(p2), "--out", str(tmp_path / "one"), "-q", *limit]) == 0
    two = _records(tmp_path / "a", tmp_path / "b")
    assert sorted(map(_key, two)) == sorted(map(_key, _records(tmp_path / "one")))


def _state_lines(state: Path) -> list[bytes]:
    return gzip.decompress((state / "state.jsonl.gz").read_bytes()).splitlines()


def _rewrite(state: Path, lines: list[bytes]) -> None:
    (state / "state.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))


def test_a_state_of_the_previous_format_still_loads(tmp_path: Path) -> None:
    """Format 1 (held events and clocks, no memory): its held call pairs in the next run; what it
    did not carry behaves as in a first run (a1's result again waits for a call: no_call)."""
    p1 = _write(tmp_path / "p1.jsonl", [call("h", "h1", 0), call("dup", "a1", 0), result("dup", "a1", 1)])
    p2 = _write(tmp_path / "p2.jsonl", [result("h", "h1", 2), result("dup", "a1", 2)])
    state = tmp_path / "state"
    assert main(["pair", str(p1), "--out", str(tmp_path / "a"), "--state", str(state), "-q"]) == 0
    head, _memory, _dedup, *held = _state_lines(state)
    old = {k: v for k, v in json.loads(head).items() if k in {"held_events", "clocks", "names"}}
    _rewrite(state, [json.dumps(old | {"version": 1}).encode(), *held])
    assert main(["pair", str(p2), "--out", str(tmp_path / "b"), "--state", str(state), "--flush", "-q"]) == 0
    out = {(r["kind"], r.get("reason"), _side(r)["id"]) for r in _records(tmp_path / "b")}
    assert out == {("pair", None, "h1"), ("orphan_result", "no_call", "a1")}
    assert json.loads(_state_lines(state)[0])["version"] == 2  # written in the new format since


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: [b'{"version":99}', *lines[1:]], "state version 99"),
        (lambda lines: [lines[0], b'{"memory":7}', *lines[2:]], "engine memory version 7"),
        (lambda lines: [*lines[:2], b'{"convs":[[1]]}', *lines[3:]], "its dedup"),
    ],
)
def test_a_state_this_release_cannot_read_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, message: str
) -> None:
    p1, p2, _ = _parts(tmp_path)
    state = tmp_path / "state"
    assert main(["pair", str(p1), "--out", str(tmp_path / "a"), "--state", str(state), "-q"]) == 0
    _rewrite(state, edit(_state_lines(state)))
    capsys.readouterr()
    assert main(["pair", str(p2), "--out", str(tmp_path / "b"), "--state", str(state), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and "Traceback" not in err


def _undated(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "ts"}


@pytest.mark.parametrize("extra", [(), ("--call-timeout", "10", "--result-grace", "10")])
def test_held_events_without_a_time_keep_the_time_they_were_read_at(
    tmp_path: Path, extra: tuple[str, ...]
) -> None:
    """An undated event takes its conversation's clock when read. Held across a cut, it took the
    clock at the cut on replay (00:00:09, not 00:00:00): with a 10 s timeout one run timed the call
    u out and the chain paired it, and even by default the pair's call_ts differed. The same for
    an undated result held waiting for its call (v)."""
    p1 = [call("D", "x", 0), _undated(call("D", "u", 0)), result("D", "x", 9)]
    p1 += [call("E", "e1", 0), _undated(result("E", "v", 0)), result("E", "e1", 9)]
    p2 = [call("D", "z", 15, args={"k": 1}), result("D", "u", 16), result("D", "z", 16)]
    p2 += [call("E", "w", 11), call("E", "v", 12), result("E", "w", 13)]
    a, b = _write(tmp_path / "p1.jsonl", p1), _write(tmp_path / "p2.jsonl", p2)
    state = str(tmp_path / "state")
    assert main(["pair", str(a), "--out", str(tmp_path / "r1"), "--state", state, "-q", *extra]) == 0
    argv = ["pair", str(b), "--out", str(tmp_path / "r2"), "--state", state, "--flush", "-q", *extra]
    assert main([*argv]) == 0
    assert main(["pair", str(a), str(b), "--out", str(tmp_path / "one"), "-q", *extra]) == 0
    chain, one = _records(tmp_path / "r1", tmp_path / "r2"), _records(tmp_path / "one")
    assert sorted(map(_key, chain)) == sorted(map(_key, one))
    times = {(r["kind"], _side(r)["id"]): r.get("call_ts") or r.get("ts") for r in chain}
    assert times.get(("pair", "u"), times.get(("orphan_call", "u"))) == "2026-01-01T00:00:00.000Z"
