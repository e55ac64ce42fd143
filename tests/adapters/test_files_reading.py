"""The read side of file mode (adapters/files.py) and the file-mode details of issue 16: bounded
line reading, document detection, directories and globs, environment variables, option errors,
`report` on a raw log, `audit` progress, the history dedup bound, loop caps per request."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

import stream_pairer.cli.commands.audit as audit_cmd
from stream_pairer.adapters import files
from stream_pairer.adapters.files import FileRecords, InputError, Oversize, expand_inputs, split_lines
from stream_pairer.cli.app import main
from stream_pairer.core.dedup import HistoryDedup
from stream_pairer.core.pipeline import MAX_SKIPPED_TYPES
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline
from tests.reference.tagging import FailureTagger

ROOT = Path(__file__).resolve().parents[2]


def lines_of(data: bytes, limit: int | None, chunk: int, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(files, "CHUNK", chunk)
    return list(split_lines(io.BytesIO(data), b"", limit))


# ---------------------------------------------------------------------------------------------- lines


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 16])
def test_split_lines_at_any_chunk_size(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    data = b'{"a":1}\r\n\n   \n' + b"x" * 30 + b'\n{"b":2}\nlast'
    assert lines_of(data, None, chunk, monkeypatch) == [
        (1, b'{"a":1}'),
        (4, b"x" * 30),
        (5, b'{"b":2}'),
        (6, b"last"),
    ]
    # with a 10-byte limit the 30-byte line is an Oversize with its true size; the rest is intact
    got = lines_of(data, 10, chunk, monkeypatch)
    assert [n for n, _ in got] == [1, 4, 5, 6]
    big = got[1][1]
    assert isinstance(big, Oversize) and big.size == 30 and big.head.startswith(b"x")
    assert got[0][1] == b'{"a":1}' and got[3][1] == b"last"


def test_a_line_of_exactly_the_limit_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lines_of(b"x" * 10 + b"\r\n" + b"y" * 11, 10, 4, monkeypatch) == [
        (1, b"x" * 10),
        (2, Oversize(11, b"y" * 11)),
    ]


def test_a_1_gib_line_is_not_read_into_memory(tmp_path: Path) -> None:
    """The issue's case: a small gzip of one 1 GiB line took 2.1 GB. The line is skipped to its end
    in chunks; the peak RSS of the whole `pair` process is measured in a subprocess."""
    gib = 1 << 30
    path = tmp_path / "huge.jsonl.gz"
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: a gzip stream
    block = b"a" * (1 << 20)
    with open(path, "wb") as f:
        f.write(comp.compress(b'{"conversation_id":"c","type":"tool_call","id":"x","name":"n","pad":"'))
        for _ in range(gib >> 20):
            f.write(comp.compress(block))
        f.write(comp.compress(b'"}\n{"conversation_id":"c","type":"tool_result","id":"y","content":"ok"}\n'))
        f.write(comp.flush())
    assert path.stat().st_size < 8 << 20
    out = tmp_path / "out"
    # VmHWM, the peak RSS of this process's own memory: ru_maxrss would also count the forking
    # pytest process's peak (Linux carries it across exec).
    code = (
        "import re, sys\n"
        "from stream_pairer.cli.app import main\n"
        f"rc = main(['pair', {str(path)!r}, '--out', {str(out)!r}, '-q'])\n"
        "status = open('/proc/self/status').read()\n"
        "print(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(proc.stdout.strip().splitlines()[-1])
    assert peak_kib < 200 * 1024, f"peak RSS {peak_kib} KiB for a 1 GiB line"  # far below 1 GiB
    (dead,) = [json.loads(x) for x in (out / "dead_letter.jsonl").read_text().splitlines()]
    assert dead["reason"] == "too_large" and dead["raw_bytes"] > gib and dead["raw_truncated"] is True
    assert dead["source"] == {"file": "huge.jsonl", "line": 1}  # named as the log it holds (naming.py)
    assert len(dead["raw"]) <= files.OVERSIZE_HEAD
    orphans = [json.loads(x) for x in (out / "orphans.jsonl").read_text().splitlines()]
    assert [o["event"]["id"] for o in orphans] == ["y"]  # the next line is read as usual


# ---------------------------------------------------------------------------------------------- documents


def records_of(path: Path, **kw: Any) -> list[tuple[dict[str, Any], Any, str]]:
    return list(FileRecords(str(path), **kw))


def test_pretty_printed_object_without_messages_is_one_record(tmp_path: Path) -> None:
    p = tmp_path / "one.json"
    rec = {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "n", "arguments": {"x": [1, 2.5]}}
    p.write_text(json.dumps(rec, indent=2))
    ((source, raw, key),) = records_of(p)
    assert json.loads(raw) == rec and source["line"] == 1 and key == str(p)


def test_a_broken_document_keeps_what_was_read_and_dead_letters_the_rest(tmp_path: Path) -> None:
    p = tmp_path / "cut.json"
    p.write_text('[{"role": "user", "content": "hi"},\n {"role": "assistant", "content": "he')
    got = records_of(p)
    assert json.loads(got[0][1]) == {"role": "user", "content": "hi"}
    broken = got[-1][1]
    assert isinstance(broken, Oversize) and broken.reason == "invalid_json"
    assert "after its 1 items" in (broken.detail or "")


def test_the_rest_of_a_broken_document_is_kept_as_the_dead_letters_raw(tmp_path: Path) -> None:
    """A bad byte inside message 1 must not lose message 2 (a valid call) without a copy: the
    dead letter's raw holds the bytes after the break, and its size counts all of them."""
    p = tmp_path / "bad.json"
    tail = b', {"role": "assistant", "tool_calls": [{"id": "v2", "type": "function"}]}]'
    p.write_bytes(b'[{"role": "user", "content": "hi"}, {"role": "user", "content": "x\xff"}' + tail)
    got = records_of(p, max_bytes=1 << 20)
    broken = got[-1][1]
    assert isinstance(broken, Oversize) and broken.reason == "invalid_json"
    assert tail in broken.head and broken.size == len(broken.head)
    assert "b'" not in (broken.detail or "") and "\n" not in (broken.detail or "")


def test_a_broken_documents_rest_over_the_limit_keeps_its_size(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(b'[{"a": 1}, {"b": "\xff' + b"z" * 10_000 + b'"}]')
    broken = records_of(p, max_bytes=1000)[-1][1]
    assert isinstance(broken, Oversize) and len(broken.head) == 1000 and broken.size > 10_000


def test_values_written_back_to_back_are_all_read(tmp_path: Path) -> None:
    """`jq .` output: pretty-printed records one after the other; each is a record."""
    recs = [
        {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "n"},
        {"conversation_id": "c", "type": "tool_result", "call_id": "a", "content": "ok"},
        {"conversation_id": "c", "type": "tool_call", "id": "b", "name": "n"},
    ]
    p = tmp_path / "jq.jsonl"
    p.write_text("\n".join(json.dumps(r, indent=2) for r in recs) + "\n")
    got = records_of(p)
    assert [json.loads(raw) for _, raw, _ in got] == recs
    assert [src["line"] for src, _, _ in got] == [1, 2, 3]


def test_a_stray_value_before_jsonl_lines_loses_nothing(tmp_path: Path) -> None:
    call = {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "n"}
    result = {"conversation_id": "c", "type": "tool_result", "call_id": "a", "content": "ok"}
    p = tmp_path / "stray.jsonl"
    p.write_text("[1,2]\n" + json.dumps(call) + "\n" + json.dumps(result) + "\n")
    got = [json.loads(raw) for _, raw, _ in records_of(p)]
    assert got == [1, 2, call, result]


def test_a_document_followed_by_more_documents_reads_them_all(tmp_path: Path) -> None:
    first = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    second = [{"role": "user", "content": "c"}]
    p = tmp_path / "two.json"
    p.write_text(json.dumps(first, indent=1) + "\n" + json.dumps(second) + "\n")
    got = records_of(p)
    assert [json.loads(raw)["content"] for _, raw, _ in got] == ["a", "b", "c"]
    assert [src["item"] for src, _, _ in got] == ["messages[0]", "messages[1]", "(1)[0]"]


def test_pair_reads_every_back_to_back_record_and_audit_agrees(tmp_path: Path) -> None:
    recs = [
        {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "n"},
        {"conversation_id": "c", "type": "tool_result", "call_id": "a", "content": "ok"},
    ]
    p = tmp_path / "jq.jsonl"
    p.write_text("\n".join(json.dumps(r, indent=2) for r in recs) + "\n")
    out = tmp_path / "out"
    assert main(["pair", str(p), "--out", str(out)]) == 0
    pairs = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert [(x["call"]["id"], x["match"]) for x in pairs] == [("a", "id")]
    assert (out / "orphans.jsonl").read_text() == ""
    assert main(["audit", "--input", str(p), "--outputs", str(out)]) == 0


def test_single_line_jsonl_record_is_not_taken_for_a_document(tmp_path: Path) -> None:
    p = tmp_path / "one.jsonl"
    p.write_bytes(b'{"conversation_id":"c","type":"tool_call","id":"a","name":"n"}\n')
    ((_, raw, _),) = records_of(p)
    assert raw == b'{"conversation_id":"c","type":"tool_call","id":"a","name":"n"}'


def test_document_items_larger_than_the_limit_are_too_large(tmp_path: Path) -> None:
    p = tmp_path / "doc.json"
    p.write_text(
        json.dumps({"messages": [{"role": "user", "content": "x" * 500}, {"role": "user", "content": "y"}]})
    )
    got = records_of(p, max_bytes=100)
    assert isinstance(got[0][1], Oversize) and got[0][1].size > 500
    assert json.loads(got[1][1]) == {"role": "user", "content": "y"}


def test_document_with_a_byte_order_mark(tmp_path: Path) -> None:
    p = tmp_path / "bom.json"
    p.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"messages": [{"role": "user", "content": "hi"}]}, indent=2).encode()
    )
    ((_, raw, _),) = records_of(p)
    assert json.loads(raw) == {"role": "user", "content": "hi"}


def test_gzip_document(tmp_path: Path) -> None:
    p = tmp_path / "doc.json.gz"
    p.write_bytes(gzip.compress(json.dumps([{"role": "user", "content": "hi"}], indent=1).encode()))
    ((_, raw, _),) = records_of(p)
    assert json.loads(raw) == {"role": "user", "content": "hi"}


# ---------------------------------------------------------------------------------------------- inputs


def test_directories_and_globs_expand_recursively_in_sorted_order(tmp_path: Path) -> None:
    (tmp_path / "b" / "deep").mkdir(parents=True)
    (tmp_path / "a").mkdir()
    for name in ("b/deep/z.jsonl", "b/a.json", "a/y.jsonl.gz", "a/README.md", "top.ndjson"):
        (tmp_path / name).write_text("")
    expected = [str(tmp_path / n) for n in ("a/y.jsonl.gz", "b/a.json", "b/deep/z.jsonl", "top.ndjson")]
    assert expand_inputs([str(tmp_path)]) == expected
    assert expand_inputs([str(tmp_path / "**" / "*.jsonl")]) == [str(tmp_path / "b/deep/z.jsonl")]
    assert expand_inputs(["-", str(tmp_path / "top.ndjson")]) == ["-", str(tmp_path / "top.ndjson")]
    with pytest.raises(InputError, match="no file matches"):
        expand_inputs([str(tmp_path / "*.nothing")])


def test_a_rerun_into_an_output_directory_inside_the_inputs_does_not_read_its_outputs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "s.jsonl").write_text('{"conversation_id":"c","type":"tool_call","id":"a","name":"n"}\n')
    out = logs / "out"
    for _ in range(2):
        assert main(["pair", str(logs), "--out", str(out), "-q", "--overwrite"]) == 0
        orphans = [json.loads(x) for x in (out / "orphans.jsonl").read_text().splitlines()]
        assert [o["event"]["id"] for o in orphans] == ["a"]  # not its own previous outputs
    assert expand_inputs([str(logs)], skip_dir=out) == [str(logs / "s.jsonl")]
    assert main(["audit", "--input", str(logs), "--outputs", str(out), "-q"]) == 0


def test_pair_on_a_directory_gives_one_conversation_per_file(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    for name in ("one.jsonl", "two.jsonl"):  # the same call id in two files: two conversations
        (d / name).write_text(
            '{"type":"tool_call","id":"same","name":"n"}\n{"type":"tool_result","id":"same","content":"x"}\n'
        )
    out = tmp_path / "out"
    assert main(["pair", str(d), "--out", str(out), "-q"]) == 0
    pairs = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
    assert sorted(p["conversation_id"] for p in pairs) == ["one.jsonl", "two.jsonl"]  # names below the dir


# ---------------------------------------------------------------------------------------------- options


def test_out_quiet_and_summary_json_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "in.jsonl"
    log.write_text('{"conversation_id":"c","type":"tool_call","id":"a","name":"n"}\n')
    monkeypatch.setenv("STREAM_PAIRER_OUT", str(tmp_path / "env-out"))
    monkeypatch.setenv("STREAM_PAIRER_QUIET", "1")
    monkeypatch.setenv("STREAM_PAIRER_SUMMARY_JSON", str(tmp_path / "s.json"))
    assert main(["pair", str(log)]) == 0
    assert capsys.readouterr().out == ""  # quiet: no summary table
    assert (tmp_path / "env-out" / "orphans.jsonl").read_text().count("\n") == 1
    assert json.loads((tmp_path / "s.json").read_text())["records"] == 1


def test_zero_disables_the_loop_caps(tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    log.write_text(
        "".join(
            json.dumps(
                {
                    "conversation_id": "c",
                    "type": "tool_call",
                    "id": f"i{i}",
                    "name": "n",
                    "arguments": {"i": i},
                    "ts": i * 3600,
                }
            )
            + "\n"
            for i in range(20)
        )
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "pair",
                str(log),
                "-o",
                str(out),
                "-q",
                "--max-tool-calls",
                "0",
                "--max-conversation-seconds",
                "0",
            ]
        )
        == 0
    )
    orphans = [json.loads(x) for x in (out / "orphans.jsonl").read_text().splitlines()]
    assert len(orphans) == 20 and all("termination" not in o["failures"] for o in orphans)


def test_option_errors_name_no_internal_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["pair", "x.jsonl", "-o", str(tmp_path), "--call-timeout", "soon"])
    err = capsys.readouterr().err
    assert "positive_float" not in err and "expected a number, got 'soon'" in err


def test_report_on_a_raw_input_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(ROOT / "examples" / "mixed.jsonl")]) == 1
    assert "not the raw log" in capsys.readouterr().err


def test_audit_shows_progress_on_long_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "in.jsonl"
    log.write_text(
        "".join(
            json.dumps({"conversation_id": "c", "type": "tool_call", "id": f"i{i}", "name": "n"}) + "\n"
            for i in range(3000)
        )
    )
    out = tmp_path / "out"
    assert main(["pair", str(log), "-o", str(out), "-q"]) == 0
    monkeypatch.setattr(audit_cmd, "PROGRESS_EVERY_S", 0.0)
    err = io.StringIO()
    auditor = audit_cmd.Auditor()
    report = audit_cmd.audit_files(auditor, [str(log)], [out], progress=err)
    assert report.ok
    shown = err.getvalue().splitlines()
    assert shown and shown[0].startswith("stream-pairer audit: 1,024 records read")
    assert len(shown) == 5  # every 1,024 records at most: 3,000 inputs + 3,000 outputs


# ---------------------------------------------------------------------------------------------- core pieces


def call(i: str, conv: str = "c", ts: float | None = None) -> bytes:
    return json.dumps(
        {"conversation_id": conv, "type": "tool_call", "id": i, "name": "n", "arguments": {"i": i}, "ts": ts}
    ).encode()


def test_history_dedup_is_bounded_and_a_forgotten_copy_is_not_lost() -> None:
    pipeline = Pipeline(Engine(), dedup=HistoryDedup(max_ids_per_conversation=2, max_conversations=1))
    src = {"file": "f", "line": 1}

    def wire(*ids: str) -> bytes:
        content = [{"type": "tool_use", "id": i, "name": "t", "input": {}} for i in ids]
        return json.dumps(
            {
                "request": {"body": {"messages": []}},
                "response": {"body": {"role": "assistant", "content": content}},
            }
        ).encode()

    out = pipeline.feed(wire("a", "b"), src, key="c") + pipeline.feed(wire("a", "b", "c"), src, key="c")
    assert pipeline.summary.events["tool_call"] == 3 and pipeline.summary.duplicate_copies == 2
    assert pipeline.dedup.remembered == 2 and pipeline.dedup.forgotten == 1  # "a" forgotten
    out += pipeline.feed(wire("a"), src, key="c")  # a copy of the forgotten "a": an event again...
    assert pipeline.summary.events["tool_call"] == 4
    assert [(r["kind"], r["reason"]) for r in out] == [("orphan_call", "superseded")]  # ...with a reason
    assert pipeline.dedup.forgotten == 2  # "b" made room for the new "a"
    pipeline.feed(wire("z"), src, key="other")  # a second conversation: the first one is forgotten
    assert pipeline.dedup.forgotten == 4 and pipeline.dedup.remembered == 1


def test_skipped_types_are_bounded_in_the_summary() -> None:
    pipeline = Pipeline(Engine())
    for i in range(MAX_SKIPPED_TYPES + 10):
        pipeline.feed(json.dumps({"type": f"t{i}", "sessionId": "s"}).encode(), {"file": "f", "line": i + 1})
    types = pipeline.summary.skipped_types
    assert len(types) == MAX_SKIPPED_TYPES + 1 and types["other"] == 10
    assert pipeline.summary.skipped == MAX_SKIPPED_TYPES + 10


def test_loop_caps_count_per_request_through_the_pipeline() -> None:
    """30 requests of 7 calls under a cap of 12 (the issue's Claude Code session): nothing is
    tagged; one request of 14 calls: only its 13th call."""
    tagger = FailureTagger(max_calls_per_conversation=12)
    pipeline = Pipeline(Engine(EngineConfig(), tagger=tagger))
    out = []
    n = 0
    for r in range(31):
        n += 1
        prompt = {
            "sessionId": "s",
            "type": "user",
            "message": {"role": "user", "content": f"task {r}"},
            "timestamp": r * 60.0,
        }
        out += pipeline.feed(json.dumps(prompt).encode(), {"file": "f", "line": n})
        for i in range(14 if r == 30 else 7):
            n += 1
            out += pipeline.feed(call(f"r{r}-{i}", "s", r * 60.0 + i), {"file": "f", "line": n})
    out += pipeline.flush("end_of_input")
    tagged = sorted(o["event"]["id"] for o in out if "termination" in o["failures"])
    assert tagged == ["r30-12"]
    assert tagger.crossings == {"calls": 1}
