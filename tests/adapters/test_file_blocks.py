"""File mode's batch path (adapters/filefeed.py + the core's `feed_block`) gives exactly what the
record-by-record path gives: the same three output files, byte for byte, the same summary, the
same input and output byte counts, at any read size (lines whole inside a read go as a block,
lines across reads one by one), with CRLF and blank lines, lines over the size limit inside a
block, and a session id announced in the middle of a block.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_pairer.adapters import files
from stream_pairer.adapters.filefeed import feed_file
from stream_pairer.adapters.files import Block, FileRecords, split_blocks, split_lines
from stream_pairer.adapters.outputs import OutputWriter
from stream_pairer.core.config import EngineConfig
from stream_pairer.core.native import NativePipeline
from stream_pairer.core.vocab import OrphanReason

REPO = Path(__file__).resolve().parents[2]
OUTPUTS = ("pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl")


def _log() -> bytes:
    """Calls and results of three conversations, a Codex session announced half way (later
    records without a conversation field belong to it), CRLF line ends, blank lines, a line over
    the 600-byte limit, a broken line, and the sample logs (fast path and Python readers)."""
    rows: list[bytes] = []
    for i in range(40):
        conv = f"c{i % 3}"
        rows.append(orjson.dumps({"conversation_id": conv, "type": "tool_call", "id": f"k{i}", "name": "t"}))
        if i % 7 == 3:
            rows.append(b"   ")
        if i % 5 != 4:
            rows.append(
                orjson.dumps({"conversation_id": conv, "type": "tool_result", "id": f"k{i}", "content": "ok"})
                + (b"\r" if i % 4 == 0 else b"")
            )
        if i == 20:
            rows.append(b'{"conversation_id":"big","type":"tool_call","id":"z","pad":"' + b"x" * 700 + b'"}')
            rows.append(b"{not json")
    rows += (REPO / "tests" / "samples" / "codex.jsonl").read_bytes().splitlines()
    rows.append(orjson.dumps({"type": "tool_call", "id": "late", "name": "t"}))  # the session's
    rows += (REPO / "tests" / "samples" / "anthropic.jsonl").read_bytes().splitlines()
    return b"\n".join(rows) + b"\n"


def _per_record(path: Path, out: Path) -> dict[str, Any]:
    """The record path: every record through `NativePipeline.feed` (what `pair` did before)."""
    pipeline = NativePipeline(EngineConfig(call_timeout_ms=5_000))
    records = FileRecords(str(path), max_bytes=600)
    size = 0
    with OutputWriter(out) as writer:
        for source, raw, key in records:
            if isinstance(raw, files.Oversize):
                size += raw.size
                writer.write(pipeline.reject(raw.head, raw.size, source, raw.reason, raw.detail))
            else:
                size += len(raw)
                writer.write(pipeline.feed(raw, source, key=key))
                if pipeline.info.session_id is not None:
                    records.set_session(pipeline.info.session_id)
        writer.write(pipeline.flush(OrphanReason.END_OF_INPUT.value, OrphanReason.NO_CALL.value))
    return {"summary": pipeline.summary.as_dict(), "size": size, "out": dict(writer.bytes_by_kind)}


def _blocks(path: Path, out: Path) -> dict[str, Any]:
    pipeline = NativePipeline(EngineConfig(call_timeout_ms=5_000))
    ticks: list[int] = []
    with OutputWriter(out) as writer:
        size = feed_file(pipeline, FileRecords(str(path), max_bytes=600), writer, ticks.append)
        writer.write(pipeline.flush(OrphanReason.END_OF_INPUT.value, OrphanReason.NO_CALL.value))
    summary = pipeline.summary.as_dict()
    assert sum(ticks) == summary["records"]  # the progress line counts every record once
    return {"summary": summary, "size": size, "out": dict(writer.bytes_by_kind)}


@pytest.mark.parametrize("chunk", [50, 333, 4096, 1 << 16])
def test_blocks_give_what_records_give(chunk: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "CHUNK", chunk)
    path = tmp_path / "log.jsonl"
    path.write_bytes(_log())
    want = _per_record(path, tmp_path / "records")
    got = _blocks(path, tmp_path / "blocks")
    assert got == want
    for name in OUTPUTS:
        assert (tmp_path / "blocks" / name).read_bytes() == (tmp_path / "records" / name).read_bytes(), name
    s = want["summary"]
    assert s["dead_letters"]["too_large"] >= 1 and s["dead_letters"]["invalid_json"] >= 1
    assert s["events_by_format"]["codex"] > 0 and s["events_by_format"]["anthropic"] > 0
    pairs = (tmp_path / "blocks" / "pairs.jsonl").read_bytes().splitlines()
    late = [orjson.loads(p) for p in pairs if b'"late"' in p] + [
        orjson.loads(o)
        for o in (tmp_path / "blocks" / "orphans.jsonl").read_bytes().splitlines()
        if b'"late"' in o
    ]
    assert late and not late[0]["conversation_id"].endswith("log.jsonl")  # the session's id, not the file's


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 16])
def test_split_blocks_reads_every_line_as_one_read_would(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks expanded line by line (as the core reads them) and the lines that span reads give,
    at every read size, what one read of the whole input gives (all of it one block), with and
    without a limit."""
    data = b'{"a":1}\r\n\n   \n' + b"x" * 30 + b'\n{"b":2}\n' + b"y" * 12 + b"\r\nlast"
    for limit in (None, 10, 12):
        lim = -1 if limit is None else limit
        monkeypatch.setattr(files, "CHUNK", 1 << 20)
        want = list(split_lines(io.BytesIO(data), b"", limit))
        assert want[0] == (1, b'{"a":1}') and want[-1] == (7, b"last")
        monkeypatch.setattr(files, "CHUNK", chunk)
        got: list[Any] = []
        for item in split_blocks(io.BytesIO(data), b"", limit):
            if isinstance(item, Block):
                n = item.lineno
                for line in item.data.split(b"\n")[:-1]:
                    n += 1
                    rec = files.read_line(line, lim)
                    if rec is not None:
                        got.append((n, rec))
            else:
                got.append(item)
        # An oversize line's kept head depends on where the reads cut it (the bytes held before it
        # was known to be too long); its number, size and reason do not.
        assert list(map(_comparable, got)) == list(map(_comparable, want)), (chunk, limit)


def _comparable(item: tuple[int, Any]) -> tuple[int, Any]:
    n, rec = item
    return (n, (rec.size, rec.reason)) if isinstance(rec, files.Oversize) else (n, rec)
