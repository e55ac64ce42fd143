"""One input file through the compiled core, a read's worth of lines per call.

Why: handing the core one record at a time cost as much CPU in the Python loop around it (a
source dict, a call, a list of outputs and a write per record) as the core spent pairing (issue
23). JSONL lines that lie whole inside one read go to the core as one `Block`
(`NativePipeline.feed_block`), which returns the encoded outputs already grouped per output file;
a JSON document's items, a line that spans reads and a line over the size limit take the record
path, with the same records and counts either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from stream_pairer.adapters.files import Block, FileRecords, Oversize, read_line
from stream_pairer.core.native import BLOCK_OVERSIZE, BLOCK_SESSION, NativePipeline

Tick = Callable[[int], None]


class OutputSink(Protocol):
    """Where a file's outputs go: `adapters.outputs.OutputWriter` (the `pair` command), or the
    public API's list (`stream_pairer.api.Sink`)."""

    def write(self, records: Sequence[bytes]) -> None: ...

    def write_files(
        self, pairs: bytes, orphans: bytes, dead_letters: bytes, sizes: tuple[int, int, int, int]
    ) -> None: ...


def feed_file(
    pipeline: NativePipeline, records: FileRecords, writer: OutputSink, tick: Tick | None = None
) -> int:
    """Every record of one input file through the pipeline, its outputs written; returns the
    record bytes read (see pair's OutputSize). A session id announced by a record (Codex
    `session_meta`) becomes the conversation of the file's later records, unless
    --conversation-id fixed it. `tick(n)`: n more records read (the progress line)."""
    info = pipeline.info
    size = 0
    items = records.blocks() if pipeline.reads_blocks else iter(records)
    for item in items:
        if isinstance(item, Block):
            size += _feed_block(pipeline, records, item, writer, tick)
            continue
        source, raw, key = item
        if isinstance(raw, Oversize):
            size += raw.size
            writer.write(pipeline.reject(raw.head, raw.size, source, raw.reason, raw.detail))
        else:
            size += len(raw)
            writer.write(pipeline.feed(raw, source, key=key))
            if info.session_id is not None and records.forced is None:
                records.set_session(info.session_id)
        if tick is not None:
            tick(1)
    return size


def _feed_block(
    pipeline: NativePipeline, records: FileRecords, block: Block, writer: OutputSink, tick: Tick | None
) -> int:
    """A block through the core; a line it stops at (over the size limit, or after a session id)
    is handled here and the rest of the block goes on."""
    limit = records.max_bytes if records.max_bytes is not None else -1
    watch = records.forced is None
    data, lineno, size = block.data, block.lineno, 0
    while data:
        out = pipeline.feed_block(data, records.label, lineno, records.key, limit, watch)
        writer.write_files(out.pairs, out.orphans, out.dead_letters, out.sizes)
        size += out.input_bytes
        lineno = out.lineno
        if tick is not None and out.fed:
            tick(out.fed)
        data = data[out.consumed :]
        if out.status == BLOCK_OVERSIZE:
            nl = data.index(b"\n")
            lineno += 1
            over = read_line(data[:nl], limit)
            assert isinstance(over, Oversize)  # the core stopped because it is one
            size += over.size
            source = {"file": records.label, "line": lineno}
            writer.write(pipeline.reject(over.head, over.size, source, over.reason, over.detail))
            if tick is not None:
                tick(1)
            data = data[nl + 1 :]
        elif out.status == BLOCK_SESSION and pipeline.info.session_id is not None:
            records.set_session(pipeline.info.session_id)
    return size
