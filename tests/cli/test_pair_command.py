"""The file-mode command end to end: files in, three files out, every record accounted for, every
output record valid against the published JSON Schemas."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from stream_pairer.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mixed.jsonl"
SCHEMAS = ROOT / "stream_pairer" / "schemas"


def _validators() -> dict[str, Draft202012Validator]:
    resources = []
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
        resources.append((path.name, Resource.from_contents(schema)))
    registry: Registry = Registry().with_resources(resources)
    out = {}
    for kind, name in [
        ("pair", "pair"),
        ("orphan_call", "orphan"),
        ("orphan_result", "orphan"),
        ("dead_letter", "dead_letter"),
    ]:
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        out[kind] = Draft202012Validator(
            schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def run_pair(tmp_path: Path, *inputs: str, extra: tuple[str, ...] = ()) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path / "out"
    assert main(["pair", *inputs, "--out", str(out), "-q", *extra]) == 0
    return {name: read_jsonl(out / f"{name}.jsonl") for name in ("pairs", "orphans", "dead_letter")}


def test_example_outputs_match_the_published_schemas(tmp_path: Path) -> None:
    outs = run_pair(tmp_path, str(EXAMPLE))
    validators = _validators()
    n = 0
    for records in outs.values():
        for rec in records:
            errors = sorted(validators[rec["kind"]].iter_errors(rec), key=str)
            assert not errors, (rec["kind"], [e.message for e in errors][:3])
            n += 1
    assert n >= 15


def test_example_conservation_by_line(tmp_path: Path) -> None:
    """Each non-blank input line is in the outputs: as dead letter, or as all of its events."""
    outs = run_pair(tmp_path, str(EXAMPLE))
    lines_seen: dict[int, int] = {}
    for rec in outs["pairs"]:
        for side in (rec["call"], rec["result"]):
            lines_seen[side["source"]["line"]] = lines_seen.get(side["source"]["line"], 0) + 1
    for rec in outs["orphans"]:
        lines_seen[rec["event"]["source"]["line"]] = lines_seen.get(rec["event"]["source"]["line"], 0) + 1
    dead = {rec["source"]["line"] for rec in outs["dead_letter"]}
    assert not dead & set(lines_seen)
    total = len(EXAMPLE.read_text().splitlines())
    # line 1 is a user text message (no tool events): the only line in no output
    assert set(lines_seen) | dead == set(range(2, total + 1))
    # line 8 carries two parallel OpenAI tool calls: both accounted for
    assert lines_seen[8] == 2


def test_example_match_types_and_reasons(tmp_path: Path) -> None:
    outs = run_pair(tmp_path, str(EXAMPLE))
    matches = sorted((p["conversation_id"], p["match"]) for p in outs["pairs"])
    assert ("legacy-42", "fifo") in matches and ("oa-chat-1", "id") in matches
    assert all(m == "id" for c, m in matches if c != "legacy-42" and not c.startswith("gemini"))
    reasons = sorted((o["kind"], o["reason"]) for o in outs["orphans"])
    assert ("orphan_result", "duplicate_result") in reasons
    assert ("orphan_result", "no_call") in reasons
    # mcp-sess-1's last call is unanswered but nothing later happens in its conversation: its own
    # clock never reaches the timeout (later conversations' clocks do not count), so the end of the
    # input closes it
    assert ("orphan_call", "end_of_input") in reasons
    assert ("orphan_call", "timeout") not in reasons
    dl = sorted(d["reason"] for d in outs["dead_letter"])
    assert dl == ["invalid_json", "unknown_shape"]
    # line 32 names no conversation: in file mode it belongs to its file's conversation
    (c3,) = [o for o in outs["orphans"] if o["event"]["id"] == "c-3"]
    assert c3["conversation_id"] == EXAMPLE.name  # its name, not the path as typed
    # the resumed Claude Code session reuses toolu_01GrepAbc: paired inside each session
    grep_pairs = [p for p in outs["pairs"] if p["call"]["id"] == "toolu_01GrepAbc"]
    assert sorted(p["conversation_id"] for p in grep_pairs) == ["cc-7f3a", "cc-9b21"]


def test_gzip_and_stdin_inputs(tmp_path: Path) -> None:
    gz = tmp_path / "in.jsonl.gz"
    gz.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    plain = run_pair(tmp_path / "a", str(EXAMPLE))
    zipped = run_pair(tmp_path / "b", str(gz))

    def ident(p: dict[str, Any]) -> tuple[Any, ...]:
        # FIFO pair ids derive from the source file name, which differs here by design
        return (p["conversation_id"], p["match"], p["call"]["source"]["line"], p["result"]["source"]["line"])

    assert [ident(p) for p in plain["pairs"]] == [ident(p) for p in zipped["pairs"]]
    proc = subprocess.run(
        [sys.executable, "-m", "stream_pairer", "pair", "-", "--out", str(tmp_path / "c")],
        input=EXAMPLE.read_bytes(),
        capture_output=True,
        check=True,
    )
    assert b"conservation:" in proc.stdout and b"(ok)" in proc.stdout
    piped = read_jsonl(tmp_path / "c" / "pairs.jsonl")
    assert [ident(p) for p in piped] == [ident(p) for p in plain["pairs"]]
    assert piped[0]["call"]["source"]["file"] == "-"


def test_invalid_utf8_goes_to_dead_letter_as_base64(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"conversation_id":"x","type":"tool_call","id":"a","name":"\xff\xfe"}\n')
    outs = run_pair(tmp_path, str(bad))
    (dl,) = outs["dead_letter"]
    assert dl["reason"] == "invalid_utf8" and "raw_base64" in dl and dl["source"]["line"] == 1


def test_unreadable_input_exits_non_zero_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["pair", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"), "-q"])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "missing.jsonl" in err


def test_bad_arguments_exit_non_zero() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["pair", "x.jsonl", "--out", "o", "--max-conversations", "0"])
    assert exc.value.code == 2


def test_limits_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_PAIRER_MAX_CONVERSATIONS", "1")
    outs = run_pair(tmp_path, str(EXAMPLE))
    evicted = [o for o in outs["orphans"] if o["reason"] == "evicted"]
    assert evicted, "with one conversation held at a time, interleaved conversations must evict"


def test_summary_json_counts_match_files(tmp_path: Path) -> None:
    summary = tmp_path / "s.json"
    outs = run_pair(tmp_path, str(EXAMPLE), extra=("--summary-json", str(summary)))
    s = json.loads(summary.read_text())
    assert sum(s["pairs"].values()) == len(outs["pairs"])
    assert sum(s["orphans"].values()) == len(outs["orphans"])
    assert sum(s["dead_letters"].values()) == len(outs["dead_letter"])
    assert sum(s["events"].values()) == 2 * len(outs["pairs"]) + len(outs["orphans"])


def _session_file(path: Path, prefix: str, t0: int) -> int:
    """Session files of one date: id and id-less pairs, a call left unanswered mid-conversation (a
    real timeout: its conversation goes on for longer than the timeout), one unanswered at the end,
    an unknown id. Returns the number of id-bearing answered calls."""
    lines: list[dict[str, Any]] = []
    answered = 0
    for c in range(6):
        conv = f"{prefix}-{c}"
        t = t0 + c * 1_000

        def ev(kind: str, cid: str | None, at: int, name: str = "search", conv: str = conv) -> None:
            body: dict[str, Any] = {"conversation_id": conv, "type": kind, "name": name, "ts": at}
            if cid is not None:
                body["id"] = cid
            if kind == "tool_result":
                body["content"] = "ok"
            lines.append(body)

        ev("tool_call", f"{conv}-a", t)
        ev("tool_result", f"{conv}-a", t + 400)
        ev("tool_call", f"{conv}-lost", t + 1_000)  # never answered, its conversation goes on
        ev("tool_call", None, t + 2_000, name="fetch")
        ev("tool_result", None, t + 2_500, name="fetch")
        ev("tool_result", f"{conv}-ghost", t + 3_000)
        ev("tool_call", f"{conv}-b", t + 700_000)  # 11+ minutes on: past the 10 min timeout
        ev("tool_result", f"{conv}-b", t + 700_300)
        ev("tool_call", f"{conv}-end", t + 701_000)  # unanswered, nothing after it
        answered += 2
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return answered


def _without_positions(rec: Any) -> Any:
    """A record minus what legitimately differs between the two runs: where each event was read
    (file, line) and the pair id of an id-less call, derived from it."""
    if isinstance(rec, dict):
        return {k: _without_positions(v) for k, v in rec.items() if k not in ("source", "pair_id")}
    if isinstance(rec, list):
        return [_without_positions(v) for v in rec]
    return rec


def test_files_of_different_dates_pair_the_same_in_any_order_and_concatenated(tmp_path: Path) -> None:
    old, new = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    n_old = _session_file(old, "old", 1_600_000_000_000)  # 2020
    n_new = _session_file(new, "new", 1_790_000_000_000)  # 2026
    in_order = run_pair(tmp_path / "ab", str(old), str(new))
    proc = subprocess.run(
        [sys.executable, "-m", "stream_pairer", "pair", "-", "--out", str(tmp_path / "cat"), "-q"],
        input=new.read_bytes() + old.read_bytes(),
        capture_output=True,
        check=True,
    )
    assert proc.returncode == 0
    concatenated = {name: read_jsonl(tmp_path / "cat" / f"{name}.jsonl") for name in ("pairs", "orphans")}
    reversed_files = run_pair(tmp_path / "ba", str(new), str(old))

    def canon(outs: dict[str, list[dict[str, Any]]]) -> list[str]:
        recs = outs["pairs"] + outs["orphans"]
        return sorted(json.dumps(_without_positions(r), sort_keys=True) for r in recs)

    assert canon(in_order) == canon(concatenated) == canon(reversed_files)
    id_pairs = [p for p in in_order["pairs"] if p["match"] == "id"]
    assert len(id_pairs) == n_old + n_new
    reasons = Counter((o["reason"], o["event"]["id"].rsplit("-", 1)[1]) for o in in_order["orphans"])
    assert reasons == {("timeout", "lost"): 12, ("end_of_input", "end"): 12, ("no_call", "ghost"): 12}
